# frozen_string_literal: true

# Tests against a real server with hilo preloaded, named by the PG*
# variables (PGHOST, PGPORT, PGUSER, PGDATABASE), as libpq reads them.
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "minitest/autorun"
require "securerandom"
require "hilo"

module HiloTestHelper
  def connect
    PG.connect
  end

  def admin
    @admin ||= begin
      c = connect
      c.exec("SET client_min_messages = warning")
      c.exec("CREATE EXTENSION IF NOT EXISTS hilo")
      c
    end
  end

  def teardown
    @admin&.close
    super
  end

  def new_seq(prefix = "rb", **settings)
    name = "#{prefix}_#{SecureRandom.hex(4)}"
    settings = { window_size: 100_000, block_size: 100 }.merge(settings)
    args = settings.map { |k, v| ", #{k} => #{v}" }.join
    admin.exec_params("SELECT hilo_create($1#{args})", [name])
    name
  end

  # Every ID of ranges is free in hilo (pushed back, not handed out since):
  # pushing it again is refused with 22023, which changes nothing.
  def assert_free(seq, ranges)
    ranges.each do |r|
      err = assert_raises(PG::InvalidParameterValue, "#{r} was not pushed back") { Hilo.push(admin, seq, [r]) }
      assert_match(/already free|wait in a pool/, err.message)
    end
  end
end
