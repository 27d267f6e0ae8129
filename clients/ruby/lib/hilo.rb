# frozen_string_literal: true

require "pg"
require_relative "hilo/version"

# Client for the hilo PostgreSQL extension over ruby-pg (PG::Connection):
#
#   require "hilo"
#   Hilo.take(conn, "orders", 10)          # => [1..10]
#   Hilo.push(conn, "orders", [3..5])      # => 3
#   Hilo.nextval(conn, "orders")           # => 11
#
#   ids = Hilo::IdSet.new(-> { PG.connect(dbname: "app") }, "orders", batch_size: 10_000)
#   ids.next                               # no round trip; thread safe
#   ids.close                              # pushes back what was not handed out
#
# Ranges are inclusive Ruby Ranges of Integers, both ways. Errors are
# ruby-pg's (PG::UndefinedObject for SQLSTATE 42704, and so on).
module Hilo
  TAKE = "SELECT first_id, last_id FROM hilo_take_ranges($1::text, $2::bigint, $3::boolean)"
  PUSH = "SELECT hilo_push_ranges($1::text, $2::bigint[], $3::bigint[])"
  NEXTVAL = "SELECT hilo_nextval($1::text)"

  # next on an IdSet after close.
  class IdSetClosed < StandardError; end

  module_function

  # Reserves n IDs of seq: an Array of inclusive Ranges. With partial:
  # true, as many as remain (at least one). The IDs are reserved for good,
  # whether the connection's transaction commits or not.
  def take(conn, seq, n, partial: false)
    n = Integer(n)
    conn.exec_params(TAKE, [seq.to_s, n, partial ? "t" : "f"]).map do |row|
      Integer(row["first_id"])..Integer(row["last_id"])
    end
  end

  # Gives unused IDs back (inclusive Ranges, or [first, last] pairs);
  # returns how many went back. Counts once the transaction commits.
  def push(conn, seq, ranges)
    firsts = []
    lasts = []
    ranges.each do |r|
      first, last = r.is_a?(Range) ? [r.first, r.exclude_end? ? r.last - 1 : r.last] : r
      firsts << Integer(first)
      lasts << Integer(last)
    end
    res = conn.exec_params(PUSH, [seq.to_s, "{#{firsts.join(",")}}", "{#{lasts.join(",")}}"])
    Integer(res.getvalue(0, 0))
  end

  # One ID, one round trip: SELECT hilo_nextval(seq).
  def nextval(conn, seq)
    Integer(conn.exec_params(NEXTVAL, [seq.to_s]).getvalue(0, 0))
  end

  # How many IDs a list of ranges holds.
  def count(ranges)
    ranges.sum(&:size)
  end
end

require_relative "hilo/id_set"
