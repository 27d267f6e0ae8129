# frozen_string_literal: true

# The version is hilo.control's default_version (the one place it is
# written); lib/hilo/version.rb reads the same line.
version = File.read(File.expand_path("../../hilo.control", __dir__))[/^default_version = '([^']+)'/, 1]

Gem::Specification.new do |s|
  s.name = "hilo-ids"
  s.version = version
  s.summary = "Client for the hilo PostgreSQL extension: ID ranges, a thread-safe IdSet, ActiveRecord keys"
  s.description = "Typed ranges over hilo_take_ranges and hilo_push_ranges, a thread-safe in-process IdSet " \
                  "that pushes back on close and at exit, and ActiveRecord primary keys from hilo " \
                  "(a server default calling hilo_nextval, or an IdSet for insert_all)."
  s.authors = ["hilo developers"]
  s.license = "PostgreSQL"
  s.files = Dir["lib/**/*.rb"] + %w[README.md LICENSE]
  s.require_paths = ["lib"]
  s.required_ruby_version = ">= 2.7"
  s.add_dependency "pg", ">= 1.1"
  s.add_development_dependency "activerecord", ">= 6.1"
  s.add_development_dependency "minitest", ">= 5"
end
