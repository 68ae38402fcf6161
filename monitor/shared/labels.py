"""Label values that come from untrusted input (service, version, route), bounded in length
and in number, with the slots following traffic.

`bounded_label` cuts a value too long for a label (a `LabelCap` also repairs what UTF-8
cannot carry, `monitor.shared.utf8`); `shown_label` replaces the characters a
pager, terminal or browser would act on rather than show. `LabelCap` decides which values of one
label hold a series: at most `limit` at once (besides an allow-list), taken by the values
that carry traffic — a heavy-hitters policy:

- every lookup of a value counts one, and counts decay exponentially with time constant
  `DECAY_S`: a value's weight is about its lookups in the last `DECAY_S` seconds;
- a value holding a slot has its weight kept exactly; the others are counted in a
  count-min sketch (`_Sketch`: a fixed table, whatever the number of values);
- a value without a slot takes a free one, or the slot of the value seen least recently
  if that one has been idle `idle_s`, or the slot of the weakest holder when its excess
  in the sketch (its count beyond the average cell, i.e. beyond what chance gives a value
  never seen) is at least `PROMOTE_MIN`, twice the weakest holder's weight, and `SIGMAS`
  times the spread of the cells;
- otherwise it reads as `other`.

The guarantee (docs/contract.md): a value looked up r >= 1 times a second, while values
looked up once each are sprayed at up to r**2 * 200,000 a second, takes a slot within 60 s
and keeps it while it keeps sending (unless steadier values hold every slot). The bound
is in the spray's rate because it must be: a value seen r times a second stands out from
S one-shot values a second in W counters only after about SIGMAS**2 * S / (r**2 * W)
seconds (the spread of a cell grows with the square root of the spray, the value's
excess linearly with r), and no table of fixed size escapes a bound growing with S.
200,000 a second is more than one monitor takes in: its ingest and these lookups share
one interpreter, and each costs microseconds of it. Values seen once
never take a slot from a holder with steady traffic: their excess stays at chance, under
`SIGMAS` spreads and under twice the holder's weight.

Counting per lookup, not per record: a record is looked up at several stages, a factor
the real service and the spray share, so it cancels out of the bound.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
import unicodedata
from array import array
from collections.abc import Callable, Collection

from monitor.shared.utf8 import repaired

OVERFLOW = "other"
_HASH_CHARS = 16

# Weights decay by e every DECAY_S seconds: a value's weight is about its lookups in the
# last DECAY_S seconds.
DECAY_S = 30.0
# What a value without a slot needs to take the weakest holder's: an excess (see _Sketch)
# of at least PROMOTE_MIN decayed lookups, twice the weakest holder's weight, and SIGMAS
# times the spread of a cell (what the excess of a value seen once may reach by chance).
PROMOTE_MIN = 8.0
SIGMAS = 4.0
# The count-min sketch: two rows of 2**SKETCH_BITS float32 cells, each indexed by a part
# of one 64-bit hash (2 MB in all). Allocated only once the slots are full.
SKETCH_BITS = 18
# The weights are kept scaled by e**((t - t0) / DECAY_S), so that decay costs nothing per
# lookup; past this exponent every weight is rescaled and t0 moved to now.
_RESCALE_EXPONENT = 50.0
# How long the weakest holder found stays the one compared against.
_WEAKEST_TTL_S = 1.0


# A model server that serves a file names the model by the file's path (llama.cpp:
# `/models/SmolLM2-135M-Instruct-Q8_0.gguf`): the file's name, less these, is the model.
_MODEL_FILE_SUFFIXES = (".gguf", ".ggml", ".bin", ".safetensors", ".onnx", ".pt", ".pth")
_PATH_STARTS = ("/", "./", "../", "~/", "\\")


def model_name(model: str | None) -> str | None:
    """A model's label: `model` as given (`openai/gpt-4o`, `meta-llama/Llama-3.1-8B`),
    except a file's path (absolute or relative, or naming a model file), which gives the
    file's stem (`/models/SmolLM2-135M-Instruct-Q8_0.gguf` → `SmolLM2-135M-Instruct-Q8_0`)."""
    if not model:
        return model
    lowered = model.lower()
    is_path = model.startswith(_PATH_STARTS) or (len(model) > 2 and model[1:3] in (":\\", ":/"))
    if not is_path and not lowered.endswith(_MODEL_FILE_SUFFIXES):
        return model
    name = model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    for suffix in _MODEL_FILE_SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name or model


def bounded_label(value: str, max_chars: int) -> str:
    """`value`, or, when it is longer than `max_chars`, its first characters, `…` and a
    hash of the whole value, `max_chars` in all: two long values that share a prefix stay
    apart, and the same value is always cut the same way."""
    if len(value) <= max_chars:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    keep = max(max_chars - _HASH_CHARS - 1, 0)
    return f"{value[:keep]}…{digest[:_HASH_CHARS]}"


# Unicode categories no label value shows: controls (NUL, newline, escape, DEL), format
# characters (bidi overrides, zero-width), lone surrogates, line and paragraph separators.
_UNSHOWN = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def shown_label(value: str) -> str:
    """`value` with each character of `_UNSHOWN` replaced by U+FFFD: a label value a page
    carries reads as it is shown, never reordered, split or cut short by what it holds."""
    if value.isprintable():  # the common case, without a look at each character
        return value
    return "".join("\ufffd" if unicodedata.category(c) in _UNSHOWN else c for c in value)


class _Slot:
    __slots__ = ("seen", "weight")

    def __init__(self, seen: float, weight: float) -> None:
        self.seen = seen
        self.weight = weight  # scaled, see _RESCALE_EXPONENT


class _Sketch:
    """Decayed lookup counts of the values without a slot, in the caller's scaled units: a
    count-min sketch of two rows of float32 cells (no conservative update, so
    that every cell holds, on average, exactly `mass / width`), with the sum of the cells'
    squares kept beside it, so that how far one cell strays from that average is known."""

    def __init__(self, bits: int) -> None:
        self._bits = bits
        self._width = 1 << bits
        self._cells = array("f", bytes(4 * 2 * self._width))
        self.mass = 0.0  # added to each row (scaled)
        self._squares = 0.0  # of every cell, in double precision

    def add(self, value: str, amount: float) -> float:
        """Count `amount` for `value`; returns its excess: its least cell less the average
        cell, what `value` has had beyond what a value never seen would show."""
        h, mask, width, cells = hash(value), self._width - 1, self._width, self._cells
        # One cell a row, from two parts of the 64-bit hash.
        i0 = h & mask
        i1 = width + ((h >> self._bits) & mask)
        c0, c1 = cells[i0], cells[i1]
        cells[i0] = c0 + amount
        cells[i1] = c1 + amount
        n0, n1 = cells[i0], cells[i1]  # as stored (float32)
        self._squares += n0 * n0 - c0 * c0 + n1 * n1 - c1 * c1
        self.mass += amount
        return min(n0, n1) - self.mass / width

    def spread(self) -> float:
        """The standard deviation of a cell: what one value's excess may be by chance."""
        mean = self.mass / self._width
        return math.sqrt(max(self._squares / len(self._cells) - mean * mean, 0.0))

    def rescale(self, factor: float) -> None:
        self._cells = array("f", (cell * factor for cell in self._cells))
        self._squares = math.fsum(cell * cell for cell in self._cells)
        self.mass *= factor


class LabelCap:
    """Bounded values of one label that comes from untrusted input (see the module
    docstring). Thread-safe; a value holding a slot is looked up without the lock.

    `max_chars`: longer values are cut first (`bounded_label`; `cut` is told).
    `folded` is told each lookup that reads as `other`; `on_evict` hooks are told each
    value that loses its slot (its series are removed, so that one coming back starts
    afresh), `on_admit` hooks each value that takes one. `sketch_bits`: the sketch's
    width (tests narrow it, with the spray slowed alike: its cells see the same rate).
    """

    def __init__(
        self,
        limit: int,
        *,
        allowed: Collection[str] = (),
        idle_s: float = 600.0,
        max_chars: int = 128,
        clock: Callable[[], float] = time.monotonic,
        folded: Callable[[], None] | None = None,
        cut: Callable[[], None] | None = None,
        sketch_bits: int = SKETCH_BITS,
    ) -> None:
        self.limit = limit
        self.allowed = frozenset(allowed)
        self.idle_s = idle_s
        self.max_chars = max_chars
        self._clock = clock
        self._folded = folded
        self._cut = cut
        self._slots: dict[str, _Slot] = {}
        self._t0 = clock()
        self._no_stale_before = -math.inf  # no slot can be stale before this time
        self._sketch_bits = sketch_bits
        self._sketch: _Sketch | None = None
        self._weakest: tuple[str, float] | None = None  # (value, when it was found)
        self._evict_hooks: list[Callable[[str], None]] = []
        self._admit_hooks: list[Callable[[str], None]] = []
        self._lock = threading.Lock()

    def on_evict(self, hook: Callable[[str], None]) -> None:
        """Call `hook(value)` (outside the lock) when `value` loses its slot."""
        self._evict_hooks.append(hook)

    def on_admit(self, hook: Callable[[str], None]) -> None:
        """Call `hook(value)` (outside the lock, after the `on_evict` hooks of the value
        it displaced) when `value` takes a slot."""
        self._admit_hooks.append(hook)

    def holds(self, value: str) -> bool:
        return value in self.allowed or value in self._slots

    def __call__(self, value: str) -> str:
        if len(value) > self.max_chars:
            value = bounded_label(value, self.max_chars)
            if self._cut is not None:
                self._cut()
        # A label value the exposition could not encode would fail every scrape.
        value = repaired(value)
        if value in self.allowed:
            return value
        now = self._clock()
        slot = self._slots.get(value)
        if slot is not None:
            slot.seen = now
            exponent = (now - self._t0) / DECAY_S
            if exponent > _RESCALE_EXPONENT:
                with self._lock:
                    slot.weight += self._unit(now)
            else:
                slot.weight += math.exp(exponent)
            return value
        with self._lock:
            evicted = self._admit(value, now)
        if evicted is None:
            return self._fold()
        if evicted:
            for hook in self._evict_hooks:
                hook(evicted)
        for hook in self._admit_hooks:
            hook(value)
        return value

    def _admit(self, value: str, now: float) -> str | None:
        """Under the lock: give `value` a slot if it may have one. Returns the value it
        took the slot of ("" for a free slot), or None when it reads as `other`."""
        slots = self._slots
        unit = self._unit(now)
        slot = slots.get(value)
        if slot is not None:  # taken meanwhile by another thread
            slot.seen = now
            slot.weight += unit
            return ""
        if len(slots) < self.limit:
            slots[value] = _Slot(now, unit)
            return ""
        if now >= self._no_stale_before:
            oldest = min(slots, key=lambda v: slots[v].seen)
            if now - slots[oldest].seen >= self.idle_s:
                return self._replace(oldest, value, _Slot(now, unit))
            self._no_stale_before = slots[oldest].seen + self.idle_s
        if self._sketch is None:
            self._sketch = _Sketch(self._sketch_bits)
        estimate = self._sketch.add(value, unit)
        # The three bars, cheapest first: a sprayed value seldom clears the first.
        if estimate < PROMOTE_MIN * unit or estimate < SIGMAS * self._sketch.spread():
            return None
        weakest = self._weakest_holder(now)
        if estimate < 2.0 * slots[weakest].weight:
            return None
        return self._replace(weakest, value, _Slot(now, estimate))

    def _replace(self, old: str, value: str, slot: _Slot) -> str:
        del self._slots[old]
        self._slots[value] = slot
        self._weakest = None
        return old

    def _weakest_holder(self, now: float) -> str:
        """The holder with the least weight, found again at most every `_WEAKEST_TTL_S`
        (a weight only grows, in scaled units, between two searches)."""
        found = self._weakest
        if found is None or found[0] not in self._slots or now - found[1] >= _WEAKEST_TTL_S:
            slots = self._slots
            found = self._weakest = (min(slots, key=lambda v: slots[v].weight), now)
        return found[0]

    def _unit(self, now: float) -> float:
        """One lookup at `now`, in scaled units; rescales everything when the scale has
        grown past `_RESCALE_EXPONENT`."""
        exponent = (now - self._t0) / DECAY_S
        if exponent > _RESCALE_EXPONENT:
            factor = math.exp(-exponent)
            for slot in self._slots.values():
                slot.weight *= factor
            if self._sketch is not None:
                self._sketch.rescale(factor)
            self._t0 = now
            exponent = 0.0
        return math.exp(exponent)

    def _fold(self) -> str:
        if self._folded is not None:
            self._folded()
        return OVERFLOW
