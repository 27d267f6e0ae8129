# One round of the ActiveRecord rows benchmark (test/bench/clients.sh):
# HILO_BENCH_ROWS (100,000) rows by insert_all, the IDs from an IdSet
# (hilo_insert_all) and from the server's DEFAULT hilo_nextval. Prints one
# line: activerecord idset_rows_per_s default_rows_per_s
$LOAD_PATH.unshift File.expand_path("../../../clients/ruby/lib", __dir__)
require "hilo/active_record"
require "securerandom"

ROWS = Integer(ENV.fetch("HILO_BENCH_ROWS", "100000"))
ActiveRecord::Base.establish_connection(adapter: "postgresql", database: ENV.fetch("PGDATABASE", "postgres"))
ActiveRecord::Migration.verbose = false
TAG = SecureRandom.hex(4)
conn = ActiveRecord::Base.connection
conn.create_hilo_sequence("bench_ar_ids_#{TAG}", block_size: 10_000)
conn.create_hilo_sequence("bench_ar_default_#{TAG}", block_size: 10_000)
conn.create_table("bench_ar_idset_#{TAG}", id: :bigint, default: nil) { |t| t.text :note }
conn.create_table("bench_ar_default_#{TAG}", id: :bigint,
                                             default: Hilo::ActiveRecord.nextval("bench_ar_default_#{TAG}")) do |t|
  t.text :note
end

with_idset = Class.new(ActiveRecord::Base) do
  self.table_name = "bench_ar_idset_#{TAG}"
  include Hilo::ActiveRecord::Ids
end
with_idset.hilo_id_set = Hilo::IdSet.new(-> { PG.connect }, "bench_ar_ids_#{TAG}", batch_size: 10_000)
with_default = Class.new(ActiveRecord::Base) { self.table_name = "bench_ar_default_#{TAG}" }

def rows_per_s
  rows = Array.new(ROWS) { { note: "x" } }
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  yield rows
  ROWS / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0)
end

begin
  idset = rows_per_s { |rows| with_idset.hilo_insert_all(rows) }
  default = rows_per_s { |rows| with_default.insert_all(rows) }
ensure
  with_idset.hilo_id_set.close
  conn.drop_table("bench_ar_idset_#{TAG}")
  conn.drop_table("bench_ar_default_#{TAG}")
end
printf("activerecord %.0f %.0f\n", idset, default)
