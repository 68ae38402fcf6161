"""A CPU scorer's other revision (`_other_revision.py`: its next one in shadow, or the
previous release's after an upgrade) is scored in the batch's task
beside its current one: the job names it (`Job.others`), its results come back apart
(`Outcome.others`), under the evaluator's own name, and cross from a worker process with
which revision gave each result beside it, never by a name of their own."""

from __future__ import annotations

import pickle

from monitor.processors.evaluation._task import Batch, Job, Outcome, Settings, run
from monitor.records import RagRecord
from monitor.results import EvalResult
from tests.evaluation.test_evaluation_stage import CpuScorerStub


class Failing(CpuScorerStub):
    def score(self, record: RagRecord) -> EvalResult:
        return EvalResult(name=self.name, score=0.0, normalized=0.0, passed=False)


def _record(n: int) -> RagRecord:
    return RagRecord(request_id=f"r{n}", query="q", response="a", trace_id=f"{n + 1:032x}")


def test_a_job_scores_the_other_revisions_it_names_apart_under_their_own_names() -> None:
    current, old = {"e": CpuScorerStub("e")}, {"e": Failing("e")}
    jobs = [Job(("e",), record=_record(1), others=("e",)), Job(("e",), record=_record(2))]
    both, alone = run(Batch(jobs), current, Settings(), [], old)
    assert both.scored is not None and alone.scored is not None
    ((own, _),) = both.scored[0].values()
    ((previous, _),) = both.others_of(0).values()
    assert (own.name, own.passed) == ("e", True)
    assert (previous.name, previous.passed) == ("e", False)
    assert alone.others_of(0) == {} and alone.scored[0]["e"][0].passed


def test_an_outcome_crosses_processes_with_which_revision_gave_each_result() -> None:
    own = {"e": (EvalResult("e", passed=True, revision="new"), 0.25)}
    old = {"e": (EvalResult("e", passed=False, revision="old"), 0.5)}
    outcome = Outcome(None, [own, {}], [old, {}])
    assert pickle.loads(pickle.dumps(outcome)) == outcome
    # One with no other revision named reads back with none on any record.
    plain = pickle.loads(pickle.dumps(Outcome(None, [own])))
    assert plain.scored == [own] and plain.others_of(0) == {}
