# frozen_string_literal: true

require_relative "test_helper"

class TestHilo < Minitest::Test
  include HiloTestHelper

  def test_take_returns_integer_ranges
    seq = new_seq
    got = Hilo.take(admin, seq, 10)
    assert_equal 10, Hilo.count(got)
    got.each do |r|
      assert_kind_of Range, r
      assert_kind_of Integer, r.first
      refute r.exclude_end?
    end
    part = Hilo.take(admin, seq, 50, partial: true)
    assert_operator Hilo.count(part), :>=, 1
  end

  def test_push_counts_and_frees
    seq = new_seq
    r = Hilo.take(admin, seq, 10).first
    assert_equal 3, Hilo.push(admin, seq, [r.first..(r.first + 2)])
    assert_equal 1, Hilo.push(admin, seq, [[r.first + 5, r.first + 5]]) # a pair works too
    assert_free(seq, [r.first..(r.first + 2), (r.first + 5)..(r.first + 5)])
  end

  def test_nextval_and_errors_are_the_drivers
    seq = new_seq
    assert_kind_of Integer, Hilo.nextval(admin, seq)
    err = assert_raises(PG::UndefinedObject) { Hilo.take(admin, "no_such_seq", 1) }
    assert_equal "42704", err.result.error_field(PG::Result::PG_DIAG_SQLSTATE)
  end

  def test_version_is_the_extensions
    control = File.read(File.expand_path("../../../hilo.control", __dir__))
    assert_equal control[/^default_version = '([^']+)'/, 1], Hilo::VERSION
  end
end
