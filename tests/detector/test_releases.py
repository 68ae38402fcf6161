"""What a release carries of its detector (`monitor/evaluators/releases.py`): the
manifest's digests are the shipped parameter files' (a refit without the release step
fails here), and a detector built from another parameter set (a previous release's, as an
upgrade that shadows itself scores it) gives that set's verdicts under that release's
revision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.config import EvaluatorConfig, Judge
from monitor.evaluators import releases
from monitor.evaluators.local import LocalGroundedness
from monitor.evaluators.revision import revision
from monitor.records import RagRecord
from monitor.shared.version import __version__


def test_the_manifest_names_this_release_and_the_digests_of_the_parameters_it_ships() -> None:
    """A refitted detector changes its verdicts: the release that ships it records its
    digests here, and where a release shipped the old ones, moves them to
    `releases/<that version>/` and names it `previous` (its own version bumped)."""
    from monitor.detector.groundedness import MODEL_PATH
    from monitor.detector.pair_model import HEAD_PATH

    assert releases.FILES == (MODEL_PATH.name, HEAD_PATH.name)
    assert releases.DETECTOR == MODEL_PATH.parent.resolve() == HEAD_PATH.parent.resolve()
    version, digests = releases.shipped()
    assert version == __version__
    assert digests == {name: releases.digest(releases.DETECTOR / name) for name in releases.FILES}
    carried = releases.previous()
    if carried is not None:
        assert carried.version != __version__
        old = (releases.digest(carried.model), releases.digest(carried.head))
        assert old != (digests[releases.FILES[0]], digests[releases.FILES[1]])


def test_a_manifest_naming_a_release_without_its_files_is_refused(tmp_path: Path) -> None:
    version, digests = releases.shipped()
    path = tmp_path / "releases.json"
    path.write_text(json.dumps({"version": version, "parameters": digests, "previous": "0.0.9"}))
    with pytest.raises(ValueError, match=r"release 0\.0\.9 lacks groundedness_model\.json"):
        releases.previous(path)
    path.write_text(json.dumps({"version": version, "parameters": digests, "previous": "../x"}))
    with pytest.raises(ValueError, match="previous is not a version"):
        releases.previous(path)


@pytest.mark.parametrize(
    ("query", "answer", "context"),
    [
        (
            "退款多久到账？",
            "退款会原路退回到您的支付账户，通常需要几个工作日。",
            "退款将在7个工作日内原路退回。",
        ),
        ("Когда вернут деньги？", "Деньги вернут через три дня.", "Деньги вернут через семь дней."),
    ],
)
def test_a_detector_built_from_a_previous_parameter_set_scores_with_it(
    tmp_path: Path, query: str, answer: str, context: str
) -> None:
    """A previous release's first-stage model (here this one's with its intercept moved):
    the same record scores lower with it than with this release's, and its revision names
    that release."""
    model = json.loads((releases.DETECTOR / releases.FILES[0]).read_text(encoding="utf-8"))
    model["intercept"] = float(model["intercept"]) + 3.0
    (tmp_path / releases.FILES[0]).write_text(json.dumps(model), encoding="utf-8")
    head = releases.DETECTOR / releases.FILES[1]
    entry = EvaluatorConfig(name="local_groundedness")
    old = entry.released("0.0.9", str(tmp_path / releases.FILES[0]), str(head))
    record = RagRecord.model_validate(
        {
            "request_id": "r1",
            "query": query,
            "response": answer,
            "retrieved_context": [{"content": context}],
        }
    )
    now, then = LocalGroundedness(entry).score(record), LocalGroundedness(old).score(record)
    assert now.score is not None and then.score is not None
    assert then.score < now.score
    assert revision(old, Judge()) == "0.0.9+" + revision(entry, Judge()).split("+")[1]
    assert revision(entry, Judge()).startswith(__version__ + "+")
