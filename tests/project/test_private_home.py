"""The tests write nothing into the user's home: they run with a home of their own, and the
libraries' telemetry is off."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from tests.conftest import TELEMETRY_OFF


def test_the_tests_run_with_a_home_of_their_own() -> None:
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert Path.home() != real_home
    assert Path(os.environ["XDG_CACHE_HOME"]).is_relative_to(Path.home())
    assert not Path(os.environ["DSPY_CACHEDIR"]).is_relative_to(real_home)


def test_third_party_telemetry_is_off() -> None:
    for variable, value in TELEMETRY_OFF.items():
        assert os.environ[variable] == value, variable
