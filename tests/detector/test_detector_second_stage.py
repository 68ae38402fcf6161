"""The detector's second stage: which records reach it, what it does to their score, what it
ships, and that it is loaded only when a record needs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from monitor.detector import score_groundedness
from monitor.detector.groundedness import first_stage, in_band
from monitor.detector.pair_model import (
    FEATURES,
    HEAD_PATH,
    TOKENIZER_PATH,
    encoder_path,
    load_pair_model,
)
from training import probe_families

REPO = Path(__file__).resolve().parents[2]
SHEET = (
    "The Harbour Line ferry leaves the east pier every 40 minutes. The crossing takes 25 "
    "minutes in calm weather. Bicycles travel free of charge, but dogs must stay on a lead."
)


def _records() -> list[tuple[str, list[str], str]]:
    out = []
    for r in probe_families.build(sheets=1, families=probe_families.DEV_FAMILIES):
        contexts = [str(c["content"]) for c in r["retrieved_context"]]  # type: ignore[attr-defined]
        out.append((str(r["request"]), contexts, str(r["response"])))
    return out


def test_a_record_in_the_band_is_rescored_from_its_weakest_pairs() -> None:
    for query, contexts, response in _records():
        first = first_stage(query, contexts, response)
        if first.decided or not first.pairs or not in_band(first.verdict.score):
            continue
        verdict = score_groundedness(query, contexts, response, second_stage=True)
        model = load_pair_model()
        weakest = float(model.supported(first.pairs).min())
        assert verdict.rescored
        assert verdict.score == pytest.approx(model.head.combine(first.verdict.score, weakest))
        low, high = model.head.band
        assert low <= verdict.score <= high
        # The explanation is the first stage's: the second stage changes the score only.
        assert verdict.unsupported == first.verdict.unsupported
        assert verdict.contradictions == first.verdict.contradictions
        return
    pytest.fail("no development-family record falls in the band")


def test_records_outside_the_band_or_decided_keep_the_first_stage_score() -> None:
    seen = 0
    for query, contexts, response in _records()[:60]:
        first = first_stage(query, contexts, response)
        if first.decided or not in_band(first.verdict.score):
            verdict = score_groundedness(query, contexts, response, second_stage=True)
            assert not verdict.rescored
            assert verdict.score == first.verdict.score
            seen += 1
    assert seen
    only_first = score_groundedness(
        "q", [SHEET], "The crossing takes 25 minutes.", second_stage=False
    )
    assert not only_first.rescored


def test_the_pair_model_reads_a_swapped_direction_as_less_supported() -> None:
    model = load_pair_model()
    evidence = "The Harbour Line ferry leaves the east pier every 40 minutes."
    same, swapped = model.supported(
        [
            ("The ferry leaves from the east pier every 40 minutes.", evidence),
            ("The ferry leaves from the west pier every 40 minutes.", evidence),
        ]
    )
    assert 0.0 <= swapped < same <= 1.0
    rows = model.features([("a claim", "its evidence")])
    assert rows.shape == (1, FEATURES) and np.isfinite(rows).all()
    assert model.supported([]).shape == (0,)


def test_the_shipped_files_fit_the_size_budget_and_load_once() -> None:
    total = sum(p.stat().st_size for p in (HEAD_PATH, TOKENIZER_PATH, encoder_path()))
    assert total <= 30 * 1024 * 1024
    assert load_pair_model() is load_pair_model()


def test_the_encoder_is_not_loaded_until_a_record_needs_it() -> None:
    script = (
        "import sys\n"
        "from monitor.detector import score_groundedness\n"
        "v = score_groundedness('When?', ['The bridge opened in 1937.'], 'It opened in 1937.')\n"
        "assert not v.rescored, v\n"
        "print('onnxruntime' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_second_stage_is_off_unless_the_evaluator_asks_for_it() -> None:
    from monitor.config import Config, ConfigError, EvaluatorConfig
    from monitor.evaluators.local import LocalGroundedness
    from monitor.evaluators.registry import check_evaluators

    assert not LocalGroundedness(EvaluatorConfig(name="local_groundedness")).second_stage
    on = LocalGroundedness(EvaluatorConfig(name="local_groundedness", second_stage=True))
    assert on.second_stage
    config = Config.model_validate(
        {"evaluators": [{"name": "local_relevance", "second_stage": True}]}
    )
    with pytest.raises(ConfigError, match="only local_groundedness takes second_stage"):
        check_evaluators(config)
