"""The judge client's verdict cache: verdicts by question, the least recently used dropped
past the configured size (`judge.cache_size`); while a question is being asked, callers
with the same question wait for its answer instead of asking again."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from monitor.judge.answers import TokenLogprobs


def cache_key(evaluator: str, version: str, model: str, inputs: Mapping[str, str | None]) -> str:
    blob = json.dumps([evaluator, version, model, dict(sorted(inputs.items()))], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class CachedVerdict:
    value: Any
    explanation: str
    logprobs: TokenLogprobs | None


class VerdictCache:
    def __init__(self, size: int) -> None:
        self._size = size
        self._verdicts: OrderedDict[str, CachedVerdict] = OrderedDict()
        self._asking: dict[str, asyncio.Future[None]] = {}

    async def settled(self, key: str) -> CachedVerdict | None:
        """The cached verdict for `key`, once a call asking the same question ends."""
        leader = self._asking.get(key)
        if leader is not None:
            await asyncio.shield(leader)
        verdict = self._verdicts.get(key)
        if verdict is not None:
            self._verdicts.move_to_end(key)
        return verdict

    @contextmanager
    def asking(self, key: str) -> Iterator[None]:
        """The caller asks `key`'s question: others asking it meanwhile wait (`settled`)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._asking[key] = done
        try:
            yield
        finally:
            if self._asking.get(key) is done:
                del self._asking[key]
            done.set_result(None)

    def put(self, key: str, verdict: CachedVerdict) -> None:
        self._verdicts[key] = verdict
        while len(self._verdicts) > self._size:
            self._verdicts.popitem(last=False)

    def clear(self) -> None:
        self._verdicts.clear()
