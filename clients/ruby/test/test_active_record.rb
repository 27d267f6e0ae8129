# frozen_string_literal: true

require_relative "test_helper"
require "hilo/active_record"

# The connection: libpq's PG* variables (an empty configuration lets libpq
# read them).
ActiveRecord::Base.establish_connection(adapter: "postgresql", database: ENV.fetch("PGDATABASE", "postgres"))
ActiveRecord::Migration.verbose = false

class CreateHiloTables < ActiveRecord::Migration[6.1]
  def change
    create_hilo_sequence :ar_orders, start_value: 1_000_000, block_size: 100
    create_table :ar_orders, id: :bigint, default: Hilo::ActiveRecord.nextval(:ar_orders) do |t|
      t.text :note
    end
    create_table :ar_items, id: :bigint, default: nil do |t|
      t.text :note
    end
  end
end

class ArOrder < ActiveRecord::Base
end

class ArItem < ActiveRecord::Base
  include Hilo::ActiveRecord::Ids
end

class TestActiveRecord < Minitest::Test
  include HiloTestHelper

  def setup
    CreateHiloTables.migrate(:up)
    ArOrder.reset_column_information
    ArItem.reset_column_information
  end

  def teardown
    CreateHiloTables.migrate(:down)
    super
  end

  def test_server_default_calls_hilo_nextval
    default = admin.exec("SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'ar_orders'::regclass")
    assert_equal "hilo_nextval('ar_orders'::text)", default.getvalue(0, 0)
    o = ArOrder.create!(note: "one")
    assert_operator o.id, :>=, 1_000_000 # the hilo sequence starts there (a serial at 1)
    assert_equal "one", ArOrder.find(o.id).note
    res = ArOrder.insert_all(Array.new(300) { |i| { note: "n#{i}" } }, returning: [:id])
    got = res.rows.flatten
    assert_equal 300, got.uniq.size
    assert(got.all? { |i| i >= 1_000_000 })
    refute_includes got, Hilo.take(admin, "ar_orders", 1).first.first # they came from hilo
  end

  def test_idset_for_create_and_insert_all
    seq = new_seq("ar", window_size: 1_000_000, block_size: 10_000)
    ArItem.hilo_id_set = Hilo::IdSet.new(-> { PG.connect }, seq, batch_size: 10_000)
    item = ArItem.create!(note: "one")
    statements = 0
    counter = ->(*, payload) { statements += 1 if payload[:sql].start_with?("INSERT") }
    ActiveSupport::Notifications.subscribed(counter, "sql.active_record") do
      ArItem.hilo_insert_all(Array.new(20_000) { |i| { note: "r#{i}" } })
    end
    assert_equal 1, statements # one INSERT for all the rows: no round trip per row
    got = ArItem.pluck(:id)
    assert_equal 20_001, got.uniq.size
    assert_includes got, item.id
    ArItem.hilo_id_set.close
    # Every ID came from the IdSet: the sequence hands none of them out again.
    taken = Hilo.take(admin, seq, 1000).flat_map(&:to_a)
    assert_empty taken & got
  ensure
    ArItem.hilo_id_set&.close
  end

  def test_reverse_migration_drops_the_sequence
    CreateHiloTables.migrate(:down)
    assert_raises(PG::UndefinedObject) { Hilo.take(admin, "ar_orders", 1) }
    CreateHiloTables.migrate(:up) # for teardown
  end
end
