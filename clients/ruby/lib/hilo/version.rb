# frozen_string_literal: true

module Hilo
  # hilo.control's default_version, the one place it is written: read from
  # the source tree, or (installed) from the gem's own specification, which
  # the gemspec read from there when the gem was built.
  VERSION = begin
    control = File.expand_path("../../../../hilo.control", __dir__)
    if File.exist?(control)
      File.read(control)[/^default_version = '([^']+)'/, 1]
    else
      Gem.loaded_specs["hilo-ids"]&.version&.to_s || "0.0.0"
    end
  end
end
