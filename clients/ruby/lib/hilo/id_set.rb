# frozen_string_literal: true

module Hilo
  # IDs of one hilo sequence, taken in batches and handed out in the process.
  #
  #   IdSet.new(conn, seq, batch_size: 1000, low_water: batch_size)
  #
  # conn is a PG::Connection that the set uses alone, or anything that
  # responds to call and returns one (a lambda), which the set then opens
  # and closes itself, and opens anew when it finds its connection lost
  # (PG::ConnectionBad, PG::UnableToSend: the take is retried once). The
  # first batch is taken in the constructor (an unknown sequence raises
  # there). Whenever fewer than low_water IDs are left, a background
  # thread takes the next batch while next goes on handing out the current
  # one; next waits only if the set ran dry first. A failed refill raises
  # its error from next once the set is dry, and the call after that tries
  # again.
  #
  # Thread safe. close (and at_exit, for a set not closed) pushes back
  # every ID not handed out; a killed process leaves a gap, never a
  # duplicate. One process: open it after a fork.
  class IdSet
    LOST = [PG::ConnectionBad, PG::UnableToSend].freeze
    @live = {}
    @live_lock = Mutex.new

    class << self
      def register(set)
        @live_lock.synchronize { @live[set.object_id] = set }
      end

      def unregister(set)
        @live_lock.synchronize { @live.delete(set.object_id) }
      end

      # At exit: pushes back what every set not closed still holds.
      def close_all
        sets = @live_lock.synchronize { @live.values }
        sets.each do |set|
          set.close
        rescue StandardError
          nil # the process is going away: a gap, not a crash
        end
      end
    end

    at_exit { IdSet.close_all }

    attr_reader :seq, :batch_size, :low_water

    def initialize(conn, seq, batch_size: 1000, low_water: nil)
      @batch_size = Integer(batch_size)
      raise ArgumentError, "batch_size must be at least 1" if @batch_size < 1

      @low_water = low_water.nil? ? @batch_size : Integer(low_water)
      raise ArgumentError, "low_water must not be negative" if @low_water.negative?

      @seq = seq.to_s
      @factory = conn.respond_to?(:call) ? conn : nil
      @conn = @factory ? @factory.call : conn
      @mutex = Mutex.new
      @cond = ConditionVariable.new
      @next = 1 # current range: @next..@last
      @last = 0
      @ranges = [] # later ranges, [first, last] each
      @later = 0
      @refilling = false
      @error = nil
      @closed = false
      @refills = 0
      begin
        add(take_batch)
      rescue Exception # rubocop:disable Lint/RescueException
        @conn.close if @factory && @conn && !@conn.finished?
        raise
      end
      @thread = Thread.new { run }
      @thread.name = "hilo-idset-#{@seq}" if @thread.respond_to?(:name=)
      IdSet.register(self)
    end

    # The next ID (an Integer). Raises IdSetClosed after close, or the
    # driver's error if the set ran dry and its refill failed.
    def next
      @mutex.synchronize do
        loop do
          raise IdSetClosed, "IdSet for #{@seq} is closed" if @closed

          if @next <= @last
            v = @next
            @next += 1
            ask_refill if !@refilling && @error.nil? && held_count < @low_water
            return v
          end
          unless @ranges.empty?
            first, last = @ranges.shift
            @later -= last - first + 1
            @next = first
            @last = last
            next
          end
          if @error
            err = @error
            @error = nil
            raise err
          end
          ask_refill unless @refilling
          @cond.wait(@mutex)
        end
      end
    end

    # IDs held and not yet handed out.
    def remaining
      @mutex.synchronize { held_count }
    end

    # Batches taken in the background so far.
    def refills
      @mutex.synchronize { @refills }
    end

    # The IDs held and not yet handed out, as inclusive Ranges.
    def ranges
      @mutex.synchronize { held.map { |a, b| a..b } }
    end

    def closed?
      @mutex.synchronize { @closed }
    end

    # Stops the refills and pushes back every ID not handed out.
    # Idempotent. Raises the driver's error if the push failed (those IDs
    # are then a gap).
    def close
      @mutex.synchronize do
        return if @closed

        @closed = true
        @cond.broadcast
      end
      IdSet.unregister(self)
      @thread.join unless Thread.current == @thread # a refill under way lands first
      back = @mutex.synchronize do
        h = held
        @ranges.clear
        @later = 0
        @next = 1
        @last = 0
        h
      end
      begin
        Hilo.push(connection, @seq, back.map { |a, b| a..b }) unless back.empty?
      ensure
        @conn.close if @factory && @conn && !@conn.finished?
      end
      nil
    end

    private

    def held
      h = @next <= @last ? [[@next, @last]] : []
      h.concat(@ranges)
    end

    def held_count
      (@next <= @last ? @last - @next + 1 : 0) + @later
    end

    def ask_refill
      @refilling = true
      @cond.broadcast
    end

    def add(ranges)
      ranges.each do |r|
        @ranges << [r.first, r.last]
        @later += r.size
      end
      return unless @next > @last && !@ranges.empty?

      @next, @last = @ranges.shift
      @later -= @last - @next + 1
    end

    def connection
      @conn = @factory.call if @conn.nil? || (@factory && @conn.finished?)
      @conn
    end

    def take_batch
      retried = false
      begin
        Hilo.take(connection, @seq, @batch_size)
      rescue *LOST
        raise if @factory.nil? || retried

        retried = true
        begin
          @conn.close
        rescue StandardError
          nil
        end
        @conn = nil
        retry
      end
    end

    def run
      loop do
        @mutex.synchronize do
          @cond.wait(@mutex) until @refilling || @closed
          return if @closed
        end
        begin
          got = take_batch
          @mutex.synchronize do
            add(got)
            @refills += 1
            @refilling = false
            @cond.broadcast
          end
        rescue StandardError => e
          @mutex.synchronize do
            @error = e
            @refilling = false
            @cond.broadcast
          end
        end
      end
    end
  end
end
