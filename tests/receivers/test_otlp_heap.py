"""The ingest process's C heap keeps freed body-sized buffers (`_heap.py`)."""

from __future__ import annotations

import platform

import pytest

from monitor.receivers.otlp._heap import keep_freed_heap


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_glibc_takes_the_heap_thresholds() -> None:
    assert keep_freed_heap()
    # Large blocks are still allocated and freed normally afterwards.
    blocks = [bytearray(600_000) for _ in range(8)]
    assert all(len(b) == 600_000 for b in blocks)
