"""The version is hilo.control's default_version, written nowhere else."""

import os
import re

import hilo


def test_version_is_the_extensions():
    control = os.path.join(os.path.dirname(__file__), "..", "..", "..", "hilo.control")
    with open(control, encoding="utf-8") as f:
        want = re.search(r"^default_version = '(.*)'", f.read(), re.M).group(1)
    assert hilo.__version__ == want
