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
