"""Proportional set size (PSS) of a process tree, per process, named by its role.

PSS (`/proc/<pid>/smaps_rollup`) counts a page shared by n processes as 1/n in each, so
the sum over a tree is what the tree really costs the machine: pages a forkserver shares
with the workers it forked are counted once. Linux only.

A library or data file mapped by processes outside the tree too (another Python process
on the machine) has its pages split with them, so the tree's PSS drops while they run;
`anon_mb`, the anonymous part of PSS (heaps, Python objects, split only among the tree's
processes that share them by fork), does not depend on what else runs; nor does
`distinct_mb`, the physical pages the tree maps, each counted once: its PSS were it alone
on the machine (as in a pod of its own), read from /proc/<pid>/pagemap (needs root).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
_PAGE = os.sysconf("SC_PAGE_SIZE")
_PRESENT = 1 << 63
_PFN = (1 << 55) - 1


@dataclass(frozen=True)
class ProcessMemory:
    pid: int
    role: str  # main, forkserver, worker, resource_tracker, or the command's name
    pss_mb: float
    rss_mb: float
    anon_mb: float = 0.0  # Pss_Anon: the anonymous part of pss_mb


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in (_PROC / str(pid) / "task").glob("*"):
        try:
            found.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def _rollup_kb(pid: int) -> tuple[float, float, float]:
    """PSS, RSS and anonymous PSS in kB."""
    pss = rss = anon = 0.0
    for line in (_PROC / str(pid) / "smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            pss = float(line.split()[1])
        elif line.startswith("Rss:"):
            rss = float(line.split()[1])
        elif line.startswith("Pss_Anon:"):
            anon = float(line.split()[1])
    return pss, rss, anon


def _cmdline(pid: int) -> str:
    return (
        (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    )


def _parent(pid: int) -> int:
    return int((_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])


_MULTIPROCESSING_ROLES = (
    ("forkserver", "forkserver"),
    ("spawn", "worker"),  # the lone worker, started afresh
    ("resource_tracker", "resource_tracker"),
)


def _role(pid: int, parent_role: str | None) -> str:
    cmdline = _cmdline(pid)
    if parent_role is None:
        return "main"
    if parent_role == "forkserver":  # forked from it: they keep its command line
        return "worker"
    # The pool's processes, started by multiprocessing: `python -c 'from multiprocessing...'`.
    for module, role in _MULTIPROCESSING_ROLES:
        if f"from multiprocessing.{module} import" in cmdline:
            return role
    return (_PROC / str(pid) / "comm").read_text().strip()


def tree_pids(root: int) -> list[int]:
    """`root` first, then every descendant."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(_children(pid))
    return out


def tree_memory(root: int) -> list[ProcessMemory]:
    """PSS and RSS of `root` and every descendant, in MB; processes that exit while
    being read are left out."""
    out: list[ProcessMemory] = []
    stack: list[tuple[int, str | None]] = [(root, None)]
    while stack:
        pid, parent_role = stack.pop()
        try:
            role = _role(pid, parent_role)
            pss, rss, anon = _rollup_kb(pid)
        except OSError:
            continue
        out.append(ProcessMemory(pid, role, pss / 1024, rss / 1024, anon / 1024))
        stack.extend((child, role) for child in _children(pid))
    return out


def total_pss_mb(root: int) -> float:
    return sum(p.pss_mb for p in tree_memory(root))


def _frames(pid: int) -> set[int]:
    """Page frame numbers of the pages `pid` has resident (0s without root)."""
    frames: set[int] = set()
    with (
        (_PROC / str(pid) / "maps").open() as maps,
        (_PROC / str(pid) / "pagemap").open("rb") as pagemap,
    ):
        for line in maps:
            if line.rstrip().endswith("[vsyscall]"):
                continue
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            pagemap.seek(start // _PAGE * 8)
            entries = pagemap.read((end - start) // _PAGE * 8)
            frames.update(e & _PFN for (e,) in struct.iter_unpack("<Q", entries) if e & _PRESENT)
    return frames


def distinct_mb(pids: Iterable[int]) -> float | None:
    """MB of distinct physical pages the processes map; None where page frame numbers
    cannot be read (not root) or a process is gone."""
    frames: set[int] = set()
    try:
        for pid in pids:
            frames |= _frames(pid)
    except OSError:
        return None
    frames.discard(0)
    return len(frames) * _PAGE / 2**20 if frames else None
