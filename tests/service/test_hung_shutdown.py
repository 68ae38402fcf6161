"""SIGTERM ends a running `rag-monitor run` within `pipeline.shutdown_timeout_s` whatever its
threads do: an extraction or a scoring step that spins for ever (a scripted fault,
`harness/hangs.py`), in a worker process or, with `pipeline.processes: 0`, in a thread of
the monitor's own. What was accepted is either written or counted as abandoned in the
stopping line; nothing is lost silently. A record whose scoring hangs is written
unevaluated (`metadata.not_evaluated`); a trace whose extraction hangs is tried once more
in the monitor's process within what is left of the deadline, and given up (counted)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from harness.hangs import EXTRACTION, SCORING, sitecustomize
from harness.reliability import REPO, MonitorProcess, Trace, export_request, post, trace_ids
from harness.wait import wait_until

# The hung step spins on a core until the process ends: the deadline is what it costs.
SHUTDOWN_S = 1.0
STOPPED = re.compile(r"stopped; (\d+) sampled traces and records finished, (\d+) abandoned")


@pytest.mark.e2e
@pytest.mark.parametrize("step", [EXTRACTION, SCORING])
@pytest.mark.parametrize("processes", [0, 1])
def test_sigterm_ends_the_process_while_a_step_hangs(
    tmp_path: Path, processes: int, step: str
) -> None:
    site = sitecustomize(tmp_path / "site")
    config = {
        # Deadlines far past the test: the hang is still in work at SIGTERM.
        "pipeline": {
            "processes": processes,
            "shutdown_timeout_s": SHUTDOWN_S,
            "evaluation_timeout_s": 3600,
            "extraction_timeout_s": 3600,
        },
        "trace_assembly": {"late_spans_wait_s": 0},
    }
    path = os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")])
    monitor = MonitorProcess(tmp_path, config, env={"PYTHONPATH": path}).start()
    try:
        before = [Trace(t) for t in trace_ids(1, 3)]
        assert post(monitor.http_port, export_request(before)).status == 200
        want = {t.trace_id.hex() for t in before}
        monitor.wait_for(
            lambda: want <= {line["trace_id"] for line in monitor.results_lines()},
            what="the traces before the hang, scored",
        )
        inside = tmp_path / "inside"
        (hung,) = trace_ids(2, 1)
        assert post(monitor.http_port, export_request([Trace(hung, query=f"{step}{inside}")]))
        monitor.wait_for(inside.exists, what="the step to hang")
        children = _children(monitor.pid)
        after = [Trace(t) for t in trace_ids(3, 3)]
        assert post(monitor.http_port, export_request(after)).status == 200
        # A process that does not end raises here (its deadline, and room for a busy
        # machine).
        code = monitor.stop(timeout=SHUTDOWN_S + 60)
        log = monitor.log()
        assert code == 0, log[-4000:]
        stopped = STOPPED.search(log)
        assert stopped is not None, log[-4000:]
        lines = {line["trace_id"]: line for line in monitor.results_lines()}
        written = set(lines)
        assert want <= written
        if step == SCORING:
            # Its record, extracted, is written unevaluated, marked so.
            assert hung.hex() in lines, log[-4000:]
            line = lines[hung.hex()]
            assert line["not_evaluated"] == "shutdown_deadline", line
            assert line["results"] and all(
                r["error"] and r["passed"] is None for r in line["results"].values()
            ), line
        else:
            assert hung.hex() not in written
        # Every trace sent after the first three is written or counted as abandoned.
        unwritten = (step == EXTRACTION) + sum(t.trace_id.hex() not in written for t in after)
        assert int(stopped[2]) >= unwritten, log[-4000:]
        # No process of the monitor's outlives it (a worker spinning in the hang).
        wait_until(
            lambda: not any(_alive(pid) for pid in children), 30, "the monitor's children to end"
        )
    finally:
        monitor.kill()


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
