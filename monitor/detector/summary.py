"""The record-level summary of a response's sentence checks: shares and counts of what the
context lacks, similarities to the evidence, conflicts (the features `analyse` hands the
groundedness model, before the contradiction counts)."""

from __future__ import annotations

import numpy as np

from monitor.detector.sentences import SentenceCheck


def summarise(checks: list[SentenceCheck]) -> np.ndarray:
    """The first 21 features of `features.FEATURE_NAMES`, in that order, from the checks of
    a response's sentences (an abstaining sentence counts only as an abstention)."""
    claims = [c for c in checks if not c.abstains]
    # The integer counts in one pass (an integer sum is the same in any order); sums of
    # floats stay `sum` over the claims in order.
    content = unsupported = unsupported_context = numbers = bad_numbers = bigrams = 0
    entities = soft = rare = novel = mismatches = conflicts = 0
    for c in claims:
        content += c.content
        unsupported += len(c.unsupported)
        unsupported_context += c.unsupported_context
        numbers += c.numbers
        bad_numbers += len(c.unsupported_numbers)
        bigrams += c.bigrams
        entities += len(c.unsupported_entities)
        soft += c.soft_unsupported
        rare += c.rare_unsupported
        novel += c.novel_bigrams
        mismatches += c.negation_mismatch
        conflicts += c.conflicts
    specific = sum(c.specific_unsupported for c in claims)
    sims = [c.similarity for c in claims if c.content]
    # The counts' logarithms in one call (numpy's log1p, element by element), and the mean
    # as `np.mean` computes it (numpy's sum, divided by the count): numpy's overhead on
    # scalars is most of this function's time otherwise.
    counts = (unsupported, bad_numbers, entities, soft, content, rare, specific)
    logs = np.log1p(np.array(counts, dtype=np.float64)).tolist()
    values = (
        unsupported_context / content if content else 0.0,
        unsupported / content if content else 0.0,
        logs[0],
        max((c.unsupported_share for c in claims), default=0.0),
        logs[1],
        bad_numbers / numbers if numbers else 0.0,
        logs[2],
        novel / bigrams if bigrams else 0.0,
        min(sims, default=1.0),
        float(np.add.reduce(np.array(sims, dtype=np.float64))) / len(sims) if sims else 1.0,
        logs[3],
        float(mismatches),
        1.0 if len(claims) < len(checks) else 0.0,
        logs[4],
        logs[5],
        logs[6],
        float(conflicts),
        max((c.specific_unsupported for c in claims), default=0.0),
        max((c.soft_unsupported / c.content for c in claims if c.content), default=0.0),
        specific / content if content else 0.0,
        min((c.similarity for c in claims if c.specific_unsupported >= 1), default=1.0),
    )
    return np.asarray(values, dtype=np.float64)
