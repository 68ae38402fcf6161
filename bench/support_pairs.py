"""Training pairs for the support model: (claim, evidence, supported?) made without a model.

Raw material is the faithful and hallucinated responses of four data families with their
contexts; the pairs are built with the detector's own claim and evidence functions
(`bench/support_stage.py`), so the model is trained on what it will read.

- supported: each sentence of a faithful response with its evidence;
- unsupported, planted (the FactCC recipe, made harder): the same sentence with one error —
  a name, number or year replaced by another one *of the same context* (so every word of
  the claim is still in the context and only reading the pair can tell), or by one of
  another document; a negation added or removed; a word swapped for its opposite;
- unsupported, evidence removed: the same sentence against the context with the sentences
  that carry its specific words taken out (a related passage that does not state it);
- unsupported, written by a model: HaluEval's hallucinated answers, responses and summary
  sentences, and RAGTruth's annotated spans.

Every family keeps its measured rows apart (the 500 pairs of each HaluEval task that
`bench/train_detector.py` measures, and the QA rows of `halueval_qa_dev.jsonl`) unless
`include_measured` is set, which only the shipped model's training does.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import perturb
import train_detector
from support_stage import choose_evidence, claim_text, context_sentences

from monitor.detector.embedding import Embedder
from monitor.detector.text import DISCOURSE, REFERENCES, fold, sentences, strip_list_marker, tokens

FAMILIES = ("ragtruth", "halueval_qa", "halueval_dialog", "halueval_summ")
MEASURED_PAIRS = 500

_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b([A-Z][\w'\-]*(?:\s+[A-Z][\w'\-]*)*)")
_OPPOSITE_PAIRS = (
        ("increase", "decrease"), ("increased", "decreased"), ("increases", "decreases"),
        ("rise", "fall"), ("rose", "fell"), ("more", "less"), ("higher", "lower"),
        ("larger", "smaller"), ("largest", "smallest"), ("before", "after"),
        ("first", "last"), ("earlier", "later"), ("win", "lose"), ("won", "lost"),
        ("older", "younger"), ("oldest", "youngest"), ("north", "south"), ("east", "west"),
        ("above", "below"), ("maximum", "minimum"), ("always", "never"), ("allowed", "banned"),
        ("accepted", "rejected"), ("increase", "reduce"), ("positive", "negative"),
        ("male", "female"), ("open", "closed"), ("public", "private"), ("early", "late"),
        ("cheaper", "more expensive"), ("faster", "slower"), ("long", "short"),
        ("high", "low"), ("safe", "dangerous"), ("start", "end"), ("started", "ended"),
        ("husband", "wife"), ("father", "mother"), ("son", "daughter"), ("brother", "sister"),
)  # fmt: skip
_OPPOSITES = dict(pair for a, b in _OPPOSITE_PAIRS for pair in ((a, b), (b, a)))
_OPPOSITE = re.compile(
    r"\b(" + "|".join(sorted(map(re.escape, _OPPOSITES), key=len, reverse=True)) + r")\b"
)


@dataclass(frozen=True, slots=True)
class Source:
    """One row of raw material: a context, a question, and responses of known quality."""

    family: str
    group: str
    query: str
    contexts: tuple[str, ...]
    faithful: tuple[str, ...]
    # Sentences known to be unsupported (model-written hallucinations).
    hallucinated: tuple[str, ...]
    measured: bool


@dataclass(frozen=True, slots=True)
class Pair:
    claim: str
    evidence: str
    supported: bool
    kind: str
    family: str
    group: str


def _claims(text: str) -> list[str]:
    return [strip_list_marker(s) for s in sentences(text) if len(tokens(strip_list_marker(s))) >= 1]


def _overlaps(start: int, end: int, spans: list[dict]) -> bool:  # type: ignore[type-arg]
    return any(start < s["end"] and s["start"] < end for s in spans)


def ragtruth(path: Path) -> list[Source]:
    """RAGTruth rows: sentences overlapping an annotated span are hallucinated; the other
    sentences of a response are faithful only when the response has no span at all."""
    out = []
    for rec in train_detector._jsonl(path):
        contexts = tuple(c["content"] for c in rec["retrieved_context"])
        response, spans = rec["response"], rec["label"].get("spans") or []
        good, bad = [], []
        at = 0
        for s in sentences(response):
            start = response.find(s, at)
            at = start + len(s) if start >= 0 else at
            claim = strip_list_marker(s)
            if not tokens(claim):
                continue
            if start >= 0 and _overlaps(start, start + len(s), spans):
                bad.append(claim)
            elif not spans:
                good.append(claim)
        uri = rec["retrieved_context"][0].get("doc_uri", "")
        out.append(
            Source("ragtruth", uri.rsplit("/passage", 1)[0], rec["request"], contexts,
                   tuple(good), tuple(bad), True)
        )  # fmt: skip
    return out


def halueval_qa(folder: Path, dev: Path) -> list[Source]:
    measured = {
        json.loads(line)["retrieved_context"][0]["content"]
        for line in dev.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
    return [
        Source("halueval_qa", f"qa{i}", r["question"], (r["knowledge"],),
               (r["right_answer"],), (r["hallucinated_answer"],), r["knowledge"] in measured)
        for i, r in enumerate(train_detector._jsonl(folder / "dataset_halueval_qa.jsonl"))
    ]  # fmt: skip


def _measured_sample(task: str, n: int) -> set[int]:
    return set(random.Random(f"{train_detector.SEED}-{task}").sample(range(n), MEASURED_PAIRS))


def halueval_dialog(folder: Path) -> list[Source]:
    rows = list(train_detector._jsonl(folder / "dataset_halueval_dialogue.jsonl"))
    measured = _measured_sample("halueval_dialog", len(rows))
    return [
        Source("halueval_dialog", f"dialog{i}", r["dialogue_history"], (r["knowledge"],),
               tuple(_claims(r["right_response"])), tuple(_claims(r["hallucinated_response"])),
               i in measured)
        for i, r in enumerate(rows)
    ]  # fmt: skip


def halueval_summ(folder: Path) -> list[Source]:
    """Summary sentences; a hallucinated summary's sentences that the right summary also
    has are dropped (they are not the hallucination)."""
    rows = list(train_detector._jsonl(folder / "dataset_halueval_summarization.jsonl"))
    measured = _measured_sample("halueval_summ", len(rows))
    out = []
    for i, r in enumerate(rows):
        right = _claims(r["right_summary"])
        kept = {" ".join(tokens(s)).lower() for s in right}
        wrong = [
            s for s in _claims(r["hallucinated_summary"]) if " ".join(tokens(s)).lower() not in kept
        ]
        out.append(
            Source("halueval_summ", f"summ{i}", "Summarize the document.", (r["document"],),
                   tuple(right), tuple(wrong), i in measured)
        )  # fmt: skip
    return out


def load_sources(data: Path, halueval: Path) -> dict[str, list[Source]]:
    return {
        "ragtruth": ragtruth(data / "ragtruth_qa_dev.jsonl"),
        "halueval_qa": halueval_qa(halueval, data / "halueval_qa_dev.jsonl"),
        "halueval_dialog": halueval_dialog(halueval),
        "halueval_summ": halueval_summ(halueval),
    }


# --- planted errors -------------------------------------------------------------------------


def _replace(text: str, m: re.Match[str], new: str) -> str:
    return text[: m.start(1)] + new + text[m.end(1) :]


def _names(text: str) -> list[str]:
    out = []
    for s in sentences(text):
        out.extend(m.group(1) for m in _NAME.finditer(s))
    return out


def _is_name(text: str) -> bool:
    return not any(fold(w) in DISCOURSE or fold(w) in REFERENCES for w in text.split())


def swap_name(claim: str, rng: random.Random, context: str, pool: Sequence[str]) -> str | None:
    mine = [m for m in _NAME.finditer(claim) if _is_name(m.group(1))]
    if not mine:
        return None
    m = rng.choice(mine)
    old = set(m.group(1).lower().split())
    own = [
        n
        for n in _names(context)
        if _is_name(n) and not set(n.lower().split()) & old and n not in claim
    ]
    choices = own if own and rng.random() < 0.7 else list(pool)
    for _ in range(10):
        if not choices:
            return None
        new = rng.choice(choices)
        if _is_name(new) and not set(new.lower().split()) & old and new not in claim:
            return _replace(claim, m, new)
    return None


def swap_number(claim: str, rng: random.Random, context: str, pool: Sequence[str]) -> str | None:
    mine = [m for m in perturb.NUMBER.finditer(claim) if not perturb.YEAR.fullmatch(m.group(1))]
    if not mine:
        return None
    m = rng.choice(mine)
    old = m.group(1)
    own = [
        n.group(1)
        for n in perturb.NUMBER.finditer(context)
        if n.group(1) != old and not perturb.YEAR.fullmatch(n.group(1)) and n.group(1) not in claim
    ]
    if own and rng.random() < 0.6:
        return _replace(claim, m, rng.choice(own))
    value = float(old.replace(",", ""))
    factor = rng.choice((0.3, 0.5, 0.6, 0.75, 1.25, 1.5, 2.0, 3.0, 10.0))
    new_value = value * factor if value > 3 else value + rng.randint(2, 9)
    if "." in old:
        new = f"{new_value:.{len(old.split('.')[1])}f}"
    else:
        n = round(new_value)
        n = n if n != int(value) else n + 1
        new = f"{n:,}" if "," in old else str(n)
    return _replace(claim, m, new)


def swap_date(claim: str, rng: random.Random, context: str, pool: Sequence[str]) -> str | None:
    years = list(perturb.YEAR.finditer(claim))
    months = list(perturb.MONTH.finditer(claim))
    if years and (not months or rng.random() < 0.65):
        m = rng.choice(years)
        own = sorted({y for y in perturb.YEAR.findall(context) if y != m.group(1)})
        if own and rng.random() < 0.6:
            return _replace(claim, m, rng.choice(own))
        return _replace(claim, m, str(int(m.group(1)) + rng.choice((-20, -9, -3, -1, 1, 2, 4, 11))))
    if months:
        m = rng.choice(months)
        return _replace(claim, m, rng.choice([x for x in perturb.MONTHS if x != m.group(1)]))
    return None


def opposite(claim: str, rng: random.Random, context: str, pool: Sequence[str]) -> str | None:
    found = list(_OPPOSITE.finditer(claim))
    if not found:
        return None
    m = rng.choice(found)
    return _replace(claim, m, _OPPOSITES[m.group(1)])


PLANTED = {
    "name": swap_name,
    "number": swap_number,
    "date": swap_date,
    "negation": lambda claim, rng, context, pool: perturb.negation(claim, rng, pool),
    "opposite": opposite,
}
_SPECIFIC = re.compile(r"\d|\b[A-Z]")


def _specific_words(claim: str) -> set[str]:
    """Numbers and capitalised words past the first."""
    words = tokens(claim)
    return {w.lower() for w in words[1:] if w[0].isdigit() or w[0].isupper()} - {"i"}


def removed_evidence(text: str, claim: str, evidence: list[str], embedder: Embedder) -> str | None:
    """The claim's evidence once every context sentence sharing one of its specific words
    (names, numbers) is taken out; None when nothing specific or nothing related is left."""
    specific = _specific_words(claim)
    if not specific:
        return None
    rest = [s for s in evidence if not specific & {w.lower() for w in tokens(s)}]
    if len(rest) < 2 or len(rest) == len(evidence):
        return None
    chosen = choose_evidence([text], rest, embedder)[0]
    return chosen or None


def pairs_of(
    source: Source, rng: random.Random, pool: Sequence[str], embedder: Embedder, max_claims: int = 4
) -> list[Pair]:
    """Supported and unsupported pairs of one source (about as many of each)."""
    evidence = context_sentences(source.contexts)
    context = " ".join(source.contexts)
    faithful = list(source.faithful)
    rng.shuffle(faithful)
    faithful = faithful[:max_claims]
    texts: list[tuple[str, bool, str]] = [
        (claim_text(source.query, c), True, "faithful") for c in faithful
    ]
    for c in faithful:
        order = list(PLANTED)
        rng.shuffle(order)
        for kind in order:
            wrong = PLANTED[kind](c, rng, context, pool)
            if wrong is not None and wrong != c:
                texts.append((claim_text(source.query, wrong), False, kind))
                break
    bad = list(source.hallucinated)
    rng.shuffle(bad)
    texts.extend((claim_text(source.query, c), False, "written") for c in bad[:max_claims])
    chosen = choose_evidence([t for t, _, _ in texts], evidence, embedder)
    out = [
        Pair(t, e, ok, kind, source.family, source.group)
        for (t, ok, kind), e in zip(texts, chosen, strict=True)
        if e
    ]
    for c in faithful[:2]:
        text = claim_text(source.query, c)
        gone = removed_evidence(text, c, evidence, embedder)
        if gone is not None and rng.random() < 0.5:
            out.append(Pair(text, gone, False, "removed", source.family, source.group))
    return out


def _clean(claim: str, context: str) -> bool:
    """Whether every number and capitalised word of the claim (past the first) is in the
    context: a reference summary sentence that passes is safe to call supported."""
    present = {w.lower() for w in tokens(context)}
    return _specific_words(claim) <= present


def _part(sentence: str, rng: random.Random) -> str:
    """A sentence as an answer might restate it: whole, or one of its clauses."""
    clauses = [c.strip() for c in re.split(r",\s+|;\s+|\s+-\s+", sentence) if len(c.split()) >= 5]
    if len(clauses) >= 2 and rng.random() < 0.5:
        part = rng.choice(clauses)
        return part[0].upper() + part[1:].rstrip(".") + "."
    return sentence


def restated_pairs(
    source: Source, rng: random.Random, pool: Sequence[str], embedder: Embedder, n: int = 2
) -> list[Pair]:
    """Context sentences (or one of their clauses) restated as claims: supported as they
    are; unsupported with one planted error, or against the context without the sentences
    that carry their specific words."""
    evidence = context_sentences(source.contexts)
    candidates = [s for s in evidence if 8 <= len(s.split()) <= 40]
    if len(candidates) < 3:
        return []
    context = " ".join(source.contexts)
    out: list[Pair] = []
    for sentence in rng.sample(candidates, min(n, len(candidates))):
        claim = _part(sentence, rng)
        texts: list[tuple[str, bool, str]] = [(claim, True, "restated")]
        order = list(PLANTED)
        rng.shuffle(order)
        for kind in order:
            wrong = PLANTED[kind](claim, rng, context, pool)
            if wrong is not None and wrong != claim:
                texts.append((wrong, False, kind))
                break
        chosen = choose_evidence([t for t, _, _ in texts], evidence, embedder)
        out.extend(
            Pair(t, e, ok, kind, source.family, source.group)
            for (t, ok, kind), e in zip(texts, chosen, strict=True)
            if e
        )
        gone = removed_evidence(claim, claim, evidence, embedder)
        if gone is not None:
            out.append(Pair(claim, gone, False, "removed", source.family, source.group))
    return out


def build(
    sources: Sequence[Source],
    embedder: Embedder,
    seed: int,
    limit: int | None = None,
    include_measured: bool = False,
) -> list[Pair]:
    rng = random.Random(seed)
    usable = [s for s in sources if include_measured or not s.measured]
    rng.shuffle(usable)
    if limit is not None:
        usable = usable[:limit]
    pool = [n for s in usable[:3000] for n in _names(s.contexts[0][:600])]
    out: list[Pair] = []
    for s in usable:
        if s.family == "halueval_summ":
            # Reference summaries often state what the (cut) article does not; only their
            # sentences whose names and numbers are all in it are taken as supported.
            context = " ".join(s.contexts)
            s = dataclasses.replace(
                s,
                faithful=tuple(c for c in s.faithful if _clean(c, context)),
                hallucinated=(),
            )
        out.extend(pairs_of(s, rng, pool, embedder))
        out.extend(restated_pairs(s, rng, pool, embedder))
    return out
