# frozen_string_literal: true

require "active_record"
require "hilo"

module Hilo
  # ActiveRecord (6.1 and later, PostgreSQL) primary keys from hilo.
  #
  # In a migration:
  #
  #   create_hilo_sequence :orders, block_size: 1000     # reversible: hilo_drop
  #   create_table :orders, id: :bigint, default: Hilo::ActiveRecord.nextval(:orders) do |t| ... end
  #
  # The column's DEFAULT calls hilo_nextval: Order.create and insert_all get
  # hilo IDs from the server (ActiveRecord reads them back with RETURNING).
  # To draw them in the process instead, from an IdSet:
  #
  #   class Item < ApplicationRecord
  #     include Hilo::ActiveRecord::Ids
  #     self.hilo_id_set = Hilo::IdSet.new(-> { PG.connect(...) }, "items", batch_size: 10_000)
  #   end
  #   Item.create!(...)                 # id from the IdSet, no round trip for it
  #   Item.hilo_insert_all(rows)        # insert_all with an id from the IdSet for each row
  module ActiveRecord
    module_function

    def quote_literal(name)
      "'#{name.to_s.gsub("'", "''")}'"
    end

    # A column default calling hilo_nextval(name): default: Hilo::ActiveRecord.nextval(:orders)
    def nextval(name)
      sql = "hilo_nextval(#{quote_literal(name)})"
      -> { sql }
    end

    # Migration (connection) methods: create_hilo_sequence and
    # drop_hilo_sequence; settings are hilo_create's.
    module SchemaStatements
      # (settings may come as a Hash too: a reversed migration replays them so)
      def create_hilo_sequence(name, more = {}, **settings)
        args = more.merge(settings).map { |k, v| ", #{k} => #{Integer(v)}" }.join
        execute("SELECT hilo_create(#{Hilo::ActiveRecord.quote_literal(name)}#{args})")
      end

      def drop_hilo_sequence(name, _more = {}, **_settings)
        execute("SELECT hilo_drop(#{Hilo::ActiveRecord.quote_literal(name)})")
      end
    end

    # Lets a migration's change method reverse create_hilo_sequence.
    module CommandRecorder
      def create_hilo_sequence(*args, **kw)
        record(:create_hilo_sequence, [*args, kw])
      end

      def drop_hilo_sequence(*args, **kw)
        record(:drop_hilo_sequence, [*args, kw])
      end

      private

      def invert_create_hilo_sequence(args)
        [:drop_hilo_sequence, args]
      end

      def invert_drop_hilo_sequence(args)
        [:create_hilo_sequence, args]
      end
    end

    # A model whose primary key comes from an IdSet (hilo_id_set).
    module Ids
      def self.included(model)
        model.class_attribute :hilo_id_set, instance_writer: false
        model.before_create :assign_hilo_id
        model.extend(ClassMethods)
      end

      module ClassMethods
        # insert_all, with an id from hilo_id_set for every row without one.
        def hilo_insert_all(rows, **options)
          insert_all(with_hilo_ids(rows), **options)
        end

        def with_hilo_ids(rows)
          pk = primary_key.to_s
          rows.map do |row|
            has = row.key?(pk) || row.key?(pk.to_sym)
            has ? row : row.merge(pk.to_sym => hilo_id_set.next)
          end
        end
      end

      private

      def assign_hilo_id
        self[self.class.primary_key] ||= self.class.hilo_id_set.next
      end
    end
  end
end

ActiveSupport.on_load(:active_record) do
  require "active_record/connection_adapters/postgresql_adapter"
  ActiveRecord::ConnectionAdapters::PostgreSQLAdapter.include(Hilo::ActiveRecord::SchemaStatements)
  ActiveRecord::Migration::CommandRecorder.include(Hilo::ActiveRecord::CommandRecorder)
end
