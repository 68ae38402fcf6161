"""The results the README and the contract quote are what the code gives today: the
bundled examples are replayed with the defaults and each quoted score and explanation is
compared with the line the replay wrote."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, REPO

# A quoted result: `"<evaluator>": {"score": S, ... "explanation": "E", ...}` (E may end in …).
_QUOTED = re.compile(
    r'"(?P<evaluator>[a-z_]+)": \{"score": (?P<score>[-0-9.]+), "normalized": [-0-9.]+,'
    r'.*?"explanation": "(?P<explanation>[^"]*)"',
    re.S,
)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("replay") / "results.jsonl"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "replay",
            str(EXAMPLES / "records.jsonl"),
            "--output",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    return {line["request_id"]: line for line in lines}


def _quoted_results(path: Path) -> list[tuple[str, str, float, str]]:
    """(request id, evaluator, score, explanation) of every JSON results example in `path`."""
    quoted = []
    for block in re.findall(r"```json\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
        request = re.search(r'"request_id": "([^"]+)"', block)
        if request is None:
            continue
        for match in _QUOTED.finditer(block):
            quoted.append(
                (
                    request.group(1),
                    match.group("evaluator"),
                    float(match.group("score")),
                    match.group("explanation"),
                )
            )
    return quoted


@pytest.mark.parametrize("doc", ["README.md", "docs/contract.md"])
def test_quoted_results_are_what_a_replay_gives(doc: str, replayed: dict[str, Any]) -> None:
    quoted = _quoted_results(REPO / doc)
    assert quoted, f"{doc} quotes no results"
    for request_id, evaluator, score, explanation in quoted:
        result = replayed[request_id]["results"][evaluator]
        digits = len(str(score).split(".")[1])
        assert round(result["score"], digits) == score, (doc, request_id, evaluator)
        shown = explanation.removesuffix("…")
        assert result["explanation"].startswith(shown), (doc, request_id, evaluator)


IDENTITY = ("request_id", "trace_id", "time", "service", "version", "route")


@pytest.mark.parametrize("doc", ["README.md", "docs/contract.md"])
def test_quoted_records_carry_every_identity_field_as_replayed(
    doc: str, replayed: dict[str, Any]
) -> None:
    """The quoted results line starts with the record's identity, `version` included, in
    the order the replay wrote it (fields it leaves out come later, in order too)."""
    blocks = re.findall(r"```json\n(.*?)```", (REPO / doc).read_text(encoding="utf-8"), re.S)
    quoted = [b for b in blocks if '"request_id"' in b and '"results"' in b]
    assert quoted, f"{doc} quotes no results line"
    for block in quoted:
        head = json.loads(block.split('"results"')[0].rstrip().rstrip(",") + "}")
        assert list(head)[: len(IDENTITY)] == list(IDENTITY), (doc, head)
        written = replayed[head["request_id"]]
        assert list(head) == [field for field in written if field in head], (doc, head)
        # The time is when the line was written; the rest is the record's.
        assert all(head[f] == written[f] for f in IDENTITY if f != "time"), doc


def readme_metric_lines() -> list[str]:
    """The `rag_monitor_*` sample lines the README's quick start quotes from /metrics
    (`tests/service/test_cli.py` scrapes them after `send-sample`)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^\s*(rag_monitor_[a-z_]+\{.*\} [0-9.]+)$", text, re.M)


def test_the_readme_quotes_metric_lines_with_every_label() -> None:
    """Every label `evaluations_total` has, `version` included (the values are checked
    against a real scrape in test_cli's send-sample test)."""
    from monitor.telemetry import create_telemetry

    labels = set(create_telemetry().counter("evaluations")._labelnames)
    lines = readme_metric_lines()
    assert len(lines) == 2, lines
    for line in lines:
        assert line.startswith("rag_monitor_evaluations_total{"), line
        assert set(re.findall(r'([a-z_]+)="', line)) == labels, line
