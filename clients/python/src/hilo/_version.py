"""The version: hilo.control's default_version (the one place it is
written), read from the source tree; installed, the distribution's
metadata (which the build took from here)."""

import os
import re


def _read() -> str:
    control = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "hilo.control")
    try:
        with open(control, encoding="utf-8") as f:
            m = re.search(r"^default_version\s*=\s*'([^']+)'", f.read(), re.M)
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        from importlib.metadata import version

        return version("hilo-ids")
    except Exception:
        return "0+unknown"


__version__ = _read()
