# frozen_string_literal: true

# Runs every test file: ruby test/run.rb (minitest's summary line at the end).
Dir.glob(File.join(__dir__, "test_*.rb")).sort.each { |f| require f }
