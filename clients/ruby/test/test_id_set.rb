# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "json"

class TestIdSet < Minitest::Test
  include HiloTestHelper

  def wait_for(what, timeout = 60)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until yield
      flunk "timed out waiting for #{what}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.01
    end
  end

  def test_unique_across_threads_and_pushed_back_on_close
    seq = new_seq
    ids = Hilo::IdSet.new(-> { connect }, seq, batch_size: 50, low_water: 20)
    got = Array.new(8) { [] }
    threads = got.map { |out| Thread.new { 1500.times { out << ids.next } } }
    threads.each(&:join)
    handed = got.flatten
    assert_equal 8 * 1500, handed.size
    assert_equal handed.size, handed.uniq.size, "an ID was handed out twice"
    got.each { |out| assert_equal out.sort, out }
    assert_operator ids.refills, :>, 0
    wait_for("the last refill") { ids.remaining >= ids.low_water }
    held = ids.ranges
    assert_equal ids.remaining, Hilo.count(held)
    ids.close
    assert_equal 0, ids.remaining
    assert_free(seq, held)
    assert_raises(Hilo::IdSetClosed) { ids.next }
    ids.close # idempotent
  end

  def test_refills_in_the_background
    ids = Hilo::IdSet.new(-> { connect }, new_seq, batch_size: 100, low_water: 50)
    assert_equal 100, ids.remaining
    51.times { ids.next }
    wait_for("the background refill") { ids.refills == 1 }
    assert_equal 149, ids.remaining
  ensure
    ids&.close
  end

  def test_unknown_sequence_and_failed_refill
    assert_raises(PG::UndefinedObject) { Hilo::IdSet.new(-> { connect }, "no_such_seq") }
    seq = new_seq
    ids = Hilo::IdSet.new(-> { connect }, seq, batch_size: 10, low_water: 0)
    admin.exec_params("SELECT hilo_drop($1)", [seq])
    assert_equal 10, Array.new(10) { ids.next }.uniq.size # the batch held still serves
    2.times { assert_raises(PG::UndefinedObject) { ids.next } }
    ids.close
  end

  def test_given_connection_is_left_open
    c = connect
    seq = new_seq
    ids = Hilo::IdSet.new(c, seq, batch_size: 10)
    a = ids.next
    ids.close
    assert_free(seq, [(a + 1)..(a + 9)])
    refute c.finished?
    assert_kind_of Integer, Hilo.nextval(c, seq)
  ensure
    c&.close
  end

  def test_process_exit_pushes_back
    seq = new_seq
    lib = File.expand_path("../lib", __dir__)
    script = <<~RUBY
      require "hilo"
      require "json"
      ids = Hilo::IdSet.new(-> { PG.connect }, ARGV[0], batch_size: 100, low_water: 0)
      handed = Array.new(3) { ids.next }
      puts JSON.generate(handed: handed, held: ids.ranges.map { |r| [r.first, r.last] })
      # exit without close: at_exit pushes back
    RUBY
    out, err, status = Open3.capture3("ruby", "-I", lib, "-e", script, seq)
    assert status.success?, err
    data = JSON.parse(out)
    assert_equal 3, data["handed"].size
    held = data["held"].map { |a, b| a..b }
    assert_equal 97, Hilo.count(held)
    assert_free(seq, held)
  end
end
