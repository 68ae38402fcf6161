"""The framework apps' preforked parents end with the test module that started them, so
that their CPU and their runs' count in that module's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.framework_envs import close_preforked


@pytest.fixture(autouse=True, scope="module")
def _end_preforked_apps() -> Iterator[None]:
    yield
    close_preforked()
