"""The C heap of the ingest process, tuned for request bodies of hundreds of kilobytes.

Every export request allocates a few buffers of its body's size (the socket reads, the
joined body, the protobuf parser's copy) and frees them when it is answered. With glibc's
defaults those buffers come from fresh memory each time: the freed top of the heap is
handed back to the kernel as soon as it exceeds about twice the largest body seen, and
the next request faults the same pages in again and has the kernel zero them — about a
quarter of the ingest process's CPU under a steady load of 512-span requests. Keeping up
to `TRIM_THRESHOLD` of freed heap per arena (and serving blocks up to
`MMAP_THRESHOLD` from the heap rather than from their own mappings) lets the next
request reuse those pages. It costs at most `TRIM_THRESHOLD` of resident memory per
arena that the process would otherwise give back between requests.
"""

from __future__ import annotations

import ctypes
import logging
import platform

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 * 1024 * 1024
TRIM_THRESHOLD = 8 * 1024 * 1024


def keep_freed_heap() -> bool:
    """Set the thresholds with glibc's `mallopt`; False (nothing changed) with another C
    library or when glibc refuses."""
    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if not done:
        log.debug("mallopt refused the heap thresholds; the C library's defaults stay")
    # What start-up freed (imports, configuration) goes back now: the threshold is for
    # the buffers of the requests to come, not for that.
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)
    return done
