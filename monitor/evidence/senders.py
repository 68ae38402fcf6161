"""Who sent a history's verdicts, and which senders stand apart from the others: the screen
that keeps one sender's forged verdicts out of what a regression rule measures of its
own dispersion (`history.History`).

A sender (`monitor.records.sender_key`: the client's address, the `service.instance.id`
and a digest of the resource's attributes) that
sends a share of a service's verdicts all failing in one hour and all passing in the next
leaves the service's rate as it was and makes its hours swing: the dispersion of verdicts
without a conversation (`kappa`) and the clustering nobody declared (`excess`) follow,
and a real rise pages many times later. Senders of one service share its traffic, so
within one bucket each sender's rate is the others' up to its own noise.

**Who is one sender**: what the sender does not choose alone. The client's address the
receiver saw (OTLP over HTTP and gRPC) comes first: the senders screened against each other
are addresses, all instance ids sent from one address counted as that address's, so that a
forger that writes a new `service.instance.id` every few hours is still one sender. Within
one address (a collector or a gateway all traffic passes), its keys are screened against
each other too (the refinement): the instance id and the resource's digest tell apart apps
that set no id; keys with the same resource cannot be told apart and are one sender. A key with no address (a record given as a
record, Kafka's records, which carry no client address; a unix socket's path) is its own
sender: there the sender chooses its key, and only the judging of a new key from its
first buckets stands against a forger that changes it.

**The screen**: over the newest `SCREEN_BUCKETS` buckets (the history's), each sender's
rate in each bucket is compared with the volume-weighted median of the other senders'
rates there, `z^2 = (x_s - m)^2 / (v (1 / n_s + 1 / n_m))` (`v` the bucket's variance per
verdict, `n_m` the verdicts of the sender holding the median); a sender's index is its
mean `z^2` over the buckets it sent in. Honest senders' indexes are about the design
effect of their own conversations, the same for all of them; a sender is **flagged** when
its index is more than `flag_bar(k)` times the volume-weighted median of the indexes (the
median taken as 1 at least) over the `k` buckets it sent in, and it sent less than half of
the screened verdicts (the service is what most of it sends; a sender holding more than half of a bucket is that
bucket's reference, its deviation 0). `flag_bar(k)` is
the larger of `FLAG_RATIO` (six buckets and more) and the bar the mean of `k` honest `z^2`
passes with probability `FIRST_BUCKETS_P` (fewer), so a new key is judged
from its first bucket rather than after hours of forging. A flagged sender's verdicts still
count in the rate judged; they are left out of the level's, the season's, kappa's and the
excess's inputs, and expected at their own rate while they send (`History`, `flagged.py`). A sender that stays under the flag moves kappa by at most about its share
times `FLAG_RATIO` times the honest senders' index.

**Keys that keep sending**: a key is followed once it sent `ADMIT_VERDICTS` (a
Misra-Gries count of `MAX_CANDIDATES` keys not followed yet); until then its verdicts are
counted in its address's pool (the address alone; `REST` for a key of no address), a
sender of the screen. A forger that writes a new instance id into every trace is screened
as its address's pool. `MAX_SENDERS` keys are followed; a key idle over the screen's
buckets gives its place up, and a key that sent more than the unflagged followed key that
sent least over the newest `RECENT_BUCKETS` takes its place, the old key's buckets joining
its address's retired row (`_retired`), screened as one sender: honest pods that take new
ids in a rolling deploy stay the reference their next generation is compared with.

**When it cannot screen** (`blind`): one key holds nearly all the verdicts (one address,
and nothing beneath it differs), or most were counted in a pool in place of keys of their
own. The assumptions: one service's senders write under few steady keys at a time; a
service with one sender has no one to compare it with (nothing is flagged).
"""

from __future__ import annotations

import ipaddress
import math
from array import array
from collections.abc import Iterator
from functools import lru_cache
from statistics import NormalDist
from typing import Any

from monitor.evidence.window import saved_number

SCREEN_BUCKETS = 24
MAX_SENDERS = 16
# Rows a screen holds at most: the keys followed, their addresses' pools and retired rows
# (the keys that gave their places up), `REST` and the retired row of no address.
MAX_ROWS = 3 * MAX_SENDERS + 2
# Keys not followed yet, and about how many verdicts each sent (`Senders._candidate`).
MAX_CANDIDATES = 4 * MAX_SENDERS
# Verdicts a key sends before the screen follows it as a sender of its own.
ADMIT_VERDICTS = 8.0
# Buckets a key's place is weighed by when a new key wants it (`Senders._place`).
RECENT_BUCKETS = 2
# Why a screen cannot tell a history's senders apart (`Senders.blind`).
ONE_SENDER = "one_sender"
FULL = "full"
# What each reason means, as a log line says it.
BLIND_TEXT = {
    ONE_SENDER: "every verdict comes under one sender key (one client address, and nothing "
    "the spans carry beneath it, instance id or resource attributes, differs between senders)",
    FULL: "most verdicts come under keys the screen cannot follow (more senders than it "
    "follows, or a new instance id in every trace), counted together as their address",
}
# The share of the screen's verdicts one key holds when the others are too few to judge it by.
ONE_SENDER_SHARE = 0.99
FLAG_RATIO = 4.0
# How often an honest sender's first buckets pass their bar (`flag_bar`).
FIRST_BUCKETS_P = 1e-3
_FIRST_BUCKETS_Z = NormalDist().inv_cdf(1 - FIRST_BUCKETS_P)
# Where the senders past `MAX_SENDERS` (and verdicts of no known sender) are counted.
REST = ""
# Longest sender key kept (the record's parts are cut like labels already).
MAX_KEY_CHARS = 256
# Fields of a sender's bucket: verdicts, their defect values' sum and squares' sum, and
# the verdicts without a conversation with their defect values' sum.
_N, _D, _Q, _SN, _SD = range(5)
FIELDS = 5
# The least variance per verdict a bucket is taken to have (a bucket of no defects).
_MIN_VARIANCE = 1e-4

# What a bucket's flagged senders sent: (all verdicts, their defects, those without a
# conversation, their defects), and every sender's verdicts there.
Flagged = tuple[float, float, float, float, float]


class Senders:
    """The senders of one history's newest `SCREEN_BUCKETS` buckets (see the module
    docstring): `MAX_SENDERS` of them, and `REST`; `flagged` holds the senders the last
    `screen` flagged."""

    def __init__(self) -> None:
        # The keys followed, their addresses' pools (the address alone) and `REST`.
        self._sums: dict[str, array[float]] = {}
        self._index = array("q", [-1] * SCREEN_BUCKETS)
        self.flagged: frozenset[str] = frozenset()
        # The addresses the last `screen` flagged as a whole.
        self._flagged_addresses: frozenset[str] = frozenset()
        # Keys not followed yet: about how many verdicts each sent (`_candidate`).
        self._candidates: dict[str, float] = {}
        # Each bucket's verdicts counted in a pool or `REST` in place of a key of their own.
        self._pooled = array("d", bytes(8 * SCREEN_BUCKETS))

    def flags(self, sender: str | None) -> bool:
        """Whether verdicts of `sender` arriving now are a flagged sender's: the key they
        are counted under was flagged (their own, or their address's pool while their key
        is not followed), or their address as a whole was."""
        key = _key_of(sender)
        address = address_of(key)
        counted = key if key in self._sums else (address or REST)
        if counted in self.flagged:
            return True
        return address is not None and address in self._flagged_addresses

    def add(
        self,
        index: int,
        sender: str | None,
        samples: float,
        defects: float,
        squares: float,
        solo: bool,
    ) -> tuple[int, Flagged] | None:
        """Verdicts of `sender` in bucket `index` (`solo`: without a conversation). Returns
        the bucket this one displaces from the screen, with what its flagged senders sent
        (None: none displaced)."""
        slot = index % SCREEN_BUCKETS
        held = self._index[slot]
        if held > index:
            return None  # older than the screen holds
        out = None
        if held != index:
            out = self._retire(slot)
            self._index[slot] = index
        key = _key_of(sender)
        sums = self._sums.get(key)
        if sums is None:
            placed = self._place(key, samples)
            if placed != key:
                self._pooled[slot] += samples
            sums = self._sums.get(placed)
            if sums is None:
                sums = self._sums[placed] = _empty()
        row = slot * FIELDS
        sums[row + _N] += samples
        sums[row + _D] += defects
        sums[row + _Q] += squares
        if solo:
            sums[row + _SN] += samples
            sums[row + _SD] += defects
        return out

    def _retire(self, slot: int) -> tuple[int, Flagged] | None:
        """Empties `slot`: the bucket it held and what its flagged senders sent (None:
        none held)."""
        index = self._index[slot]
        if index < 0:
            return None
        flagged = self._flagged_in(slot)
        row = slot * FIELDS
        for sums in self._sums.values():
            for k in range(FIELDS):
                sums[row + k] = 0.0
        self._pooled[slot] = 0.0
        return index, flagged

    def _place(self, key: str, samples: float) -> str:
        """Where verdicts of a key not followed yet are counted: the key itself once it
        sent `ADMIT_VERDICTS` and the screen follows fewer than `MAX_SENDERS` keys (idle
        ones forgotten), or it sent more than the lightest key followed (which leaves its
        place, its buckets joining its pool); else its pool (`_pool`). So a sender that
        writes a new key into every trace is screened as its address's pool, and honest
        pods that take new keys in a rolling deploy are followed again within minutes."""
        pool = self._pool(key)
        if key == pool:
            return key
        count = self._candidate(key, samples)
        if count < ADMIT_VERDICTS:
            return pool
        followed = [k for k in self._sums if _is_followed(k)]
        if len(followed) >= MAX_SENDERS:
            for idle in [k for k in followed if not any(self._sums[k])]:
                del self._sums[idle]
            followed = [k for k in self._sums if _is_followed(k)]
        if len(followed) >= MAX_SENDERS:
            movable = [k for k in followed if k not in self.flagged]
            if not movable:
                return pool
            lightest = min(movable, key=self._recent)
            if self._recent(lightest) >= count:
                return pool
            self._retire_key(lightest)
        self._candidates.pop(key, None)
        return key

    def _pool(self, key: str) -> str:
        """Where a key's verdicts are counted while it is not followed: its address alone
        (at most `MAX_SENDERS` addresses' pools, idle ones forgotten); else `REST`."""
        address = address_of(key)
        if address is None:
            return REST
        if address in self._sums:
            return address
        pools = [k for k in self._sums if k != REST and _is_pool(k)]
        if len(pools) >= MAX_SENDERS:
            for idle in [k for k in pools if not any(self._sums[k])]:
                del self._sums[idle]
            pools = [k for k in self._sums if k != REST and _is_pool(k)]
        return address if len(pools) < MAX_SENDERS else REST

    def _candidate(self, key: str, samples: float) -> float:
        """About how many verdicts `key` sent while not followed: a Misra-Gries summary of
        `MAX_CANDIDATES` keys, so keys that each send a trace or two are forgotten while
        a sender's steady key reaches `ADMIT_VERDICTS` (0: not held)."""
        held = self._candidates
        if key in held:
            held[key] += samples
            return held[key]
        if len(held) >= MAX_CANDIDATES:
            cut = min(samples, min(held.values()))
            for k in list(held):
                held[k] -= cut
                if held[k] <= 0:
                    del held[k]
            samples -= cut
        if samples > 0 and len(held) < MAX_CANDIDATES:
            held[key] = samples
            return samples
        return 0.0

    def _recent(self, key: str) -> float:
        """What `key` sent in the newest `RECENT_BUCKETS` buckets."""
        newest = max(self._index)
        sums = self._sums[key]
        return sum(
            sums[slot * FIELDS + _N]
            for slot, index in enumerate(self._index)
            if index > newest - RECENT_BUCKETS
        )

    def _retire_key(self, key: str) -> None:
        """`key` stops being followed, its place taken by a key that sends more now: its
        buckets join its address's retired row (`_retired`), screened as one sender: the
        older generations of pods that take new keys in a rolling deploy stay the honest
        reference the newer ones are compared with."""
        sums = self._sums.pop(key)
        retired = _retired(address_of(key))
        into = self._sums.get(retired)
        if into is None:
            for idle in [k for k, row in self._sums.items() if k.endswith("/") and not any(row)]:
                del self._sums[idle]
            if sum(k.endswith("/") for k in self._sums) >= MAX_SENDERS:
                retired = _retired(None)
            into = self._sums.get(retired)
            if into is None:
                into = self._sums[retired] = _empty()
        for i, value in enumerate(sums):
            into[i] += value

    def blind(self) -> str | None:
        """Why the screen cannot tell this history's senders apart now (None: it can, or
        nothing was sent): `ONE_SENDER`, one key holds `ONE_SENDER_SHARE` of the screen's
        verdicts (one address, and nothing its senders send beneath it differs); `FULL`,
        half the verdicts or more were counted in a pool or `REST` in place of keys of
        their own (more keys than the screen follows, or keys that each send a trace or
        two)."""
        slots = [slot for slot, index in enumerate(self._index) if index >= 0]
        volumes = [sum(sums[slot * FIELDS + _N] for slot in slots) for sums in self._sums.values()]
        total = sum(volumes)
        if total <= 0:
            return None
        if 2 * sum(self._pooled[slot] for slot in slots) >= total:
            return FULL
        return ONE_SENDER if max(volumes) >= ONE_SENDER_SHARE * total else None

    def _flagged_in(self, slot: int) -> Flagged:
        row = slot * FIELDS
        n = d = sn = sd = total = 0.0
        whole = self._flagged_addresses
        for key, sums in self._sums.items():
            total += sums[row + _N]
            if key in self.flagged or (whole and address_of(key) in whole):
                n += sums[row + _N]
                d += sums[row + _D]
                sn += sums[row + _SN]
                sd += sums[row + _SD]
        return n, d, sn, sd, total

    def flagged_at(self, index: int) -> Flagged | None:
        """What the flagged senders sent in bucket `index` (None: not screened)."""
        slot = index % SCREEN_BUCKETS
        return self._flagged_in(slot) if self.flagged and self._index[slot] == index else None

    def flagged_sums(self) -> Iterator[tuple[int, Flagged]]:
        """(bucket index, what the flagged senders sent there) of the buckets screened."""
        if not self.flagged:
            return
        for slot, index in enumerate(self._index):
            if index >= 0:
                yield index, self._flagged_in(slot)

    def screen(self) -> None:
        """Flags the senders that stand apart (see the module docstring): addresses
        against each other, then the keys of one address against each other."""
        by_address: dict[str, list[str]] = {}
        for key in self._sums:
            group = address_of(key) or (REST if key.endswith("/") else key)
            by_address.setdefault(group, []).append(key)
        grouped = {
            address: self._sums[keys[0]] if len(keys) == 1 else _total(self._sums, keys)
            for address, keys in by_address.items()
        }
        addresses = self._flag(grouped)
        flagged = {key for a in addresses for key in by_address[a]}
        self._flagged_addresses = frozenset(a for a in addresses if address_of(a) is not None)
        for keys in by_address.values():
            if len(keys) > 1 and keys[0] not in flagged:
                flagged |= self._flag({key: self._sums[key] for key in keys})
        self.flagged = frozenset(flagged)

    def _flag(self, sums_of: dict[str, array[float]]) -> set[str]:
        """The senders of `sums_of` that stand apart from the others there."""
        scores: dict[str, list[float]] = {key: [] for key in sums_of}
        volume = dict.fromkeys(sums_of, 0.0)
        for slot, index in enumerate(self._index):
            if index < 0:
                continue
            row = slot * FIELDS
            present = [
                (key, sums[row + _N], sums[row + _D] / sums[row + _N])
                for key, sums in sums_of.items()
                if sums[row + _N] > 0
            ]
            if len(present) < 2:
                continue
            n_all = sum(n for _, n, _ in present)
            x_all = sum(sums[row + _D] for sums in sums_of.values()) / n_all
            q_all = sum(sums[row + _Q] for sums in sums_of.values()) / n_all
            variance = max(_MIN_VARIANCE, q_all - x_all * x_all)
            ordered = sorted(present, key=lambda p: p[2])
            for key, n, x in present:
                volume[key] += n
                if 2 * n > n_all:
                    # Most of the bucket: the reference the others stand apart from, not
                    # one of them (with two senders, the one that differs is the smaller).
                    scores[key].append(0.0)
                    continue
                others = [p for p in ordered if p[0] != key]
                median, n_median = _weighted_median(others)
                scores[key].append((x - median) ** 2 / (variance * (1 / n + 1 / n_median)))
        indexes = {
            key: (sum(s) / len(s), volume[key]) for key, s in scores.items() if s and volume[key]
        }
        total = sum(v for _, v in indexes.values())
        if not indexes or total <= 0:
            return set()
        ordered_indexes = sorted(((k, v, i) for k, (i, v) in indexes.items()), key=lambda p: p[2])
        honest = max(1.0, _weighted_median(ordered_indexes)[0])
        return {
            key
            for key, (index, v) in indexes.items()
            if index > flag_bar(len(scores[key])) * honest and v < total / 2
        }

    # -- the state file -------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """`{"index": the bucket each slot holds, "senders": {sender: [[slot, n, d, q, sn,
        sd], ...]}}`, the slots a sender sent in only."""
        senders = {}
        for key, sums in self._sums.items():
            rows = [
                [slot, *(round(v, 6) for v in sums[slot * FIELDS : (slot + 1) * FIELDS])]
                for slot in range(SCREEN_BUCKETS)
                if sums[slot * FIELDS + _N] > 0
            ]
            if rows:
                senders[key] = rows
        return {"index": list(self._index), "senders": senders}

    def restore(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            raise TypeError("senders: an object expected")
        index, senders = raw["index"], raw["senders"]
        if not isinstance(index, list) or len(index) != SCREEN_BUCKETS:
            raise ValueError(f"senders: index is not a list of {SCREEN_BUCKETS}")
        for slot, i in enumerate(index):
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError("senders: an index is not an integer")
            if i != -1 and (i < 0 or i % SCREEN_BUCKETS != slot):
                raise ValueError("senders: an index is not of its slot")
        if not isinstance(senders, dict) or len(senders) > MAX_ROWS:
            raise ValueError(f"senders: not an object of at most {MAX_ROWS} senders")
        sums_of: dict[str, array[float]] = {}
        for key, rows in senders.items():
            if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
                raise ValueError("senders: a sender is not a short text")
            if not isinstance(rows, list) or len(rows) > SCREEN_BUCKETS:
                raise ValueError("senders: a sender's buckets are not a list")
            sums = _empty()
            for row in rows:
                if not isinstance(row, list) or len(row) != FIELDS + 1:
                    raise ValueError(f"senders: a bucket is [slot, {FIELDS} numbers]")
                slot = row[0]
                if isinstance(slot, bool) or not isinstance(slot, int):
                    raise TypeError("senders: a slot is not an integer")
                if not 0 <= slot < SCREEN_BUCKETS:
                    raise ValueError("senders: a slot out of range")
                for k, value in enumerate(row[1:]):
                    sums[slot * FIELDS + k] = saved_number(value, nonnegative=True)
            sums_of[key] = sums
        self._index = array("q", index)
        self._sums = sums_of
        self._candidates = {}
        self._pooled = array("d", bytes(8 * SCREEN_BUCKETS))
        self.screen()


@lru_cache(maxsize=1024)
def address_of(key: str) -> str | None:
    """The client's address a sender key starts with (`monitor.records.sender`: the
    address, then the instance id after a `/`; None: the key holds none). Remembered for
    the keys last asked: it is asked for every verdict the screen reads, of a few keys."""
    head = key.partition("/")[0]
    try:
        ipaddress.ip_address(head)
    except ValueError:
        return None
    return head


def _key_of(sender: str | None) -> str:
    """The key `sender`'s verdicts are screened under: cut to `MAX_KEY_CHARS`, without a
    trailing `/` (which marks a retired row: a record's own metadata cannot write one)."""
    return REST if sender is None else sender[:MAX_KEY_CHARS].rstrip("/")


def _is_pool(key: str) -> bool:
    """Whether `key` is where keys not followed are counted: an address alone, or `REST`."""
    return key == REST or address_of(key) == key


def _retired(address: str | None) -> str:
    """The row of an address's keys that gave their places up (a key ending in `/`, which
    `monitor.records.sender_key` never writes)."""
    return f"{address or ''}/"


def _is_followed(key: str) -> bool:
    return not key.endswith("/") and not _is_pool(key)


def flag_bar(buckets: int) -> float:
    """How many times the honest senders' index a sender's index over `buckets` buckets
    must pass to be flagged: `FLAG_RATIO`, or the mean of `buckets` honest `z^2` (a
    chi-square over `buckets`, Wilson and Hilferty's cube) at `FIRST_BUCKETS_P`, the
    larger."""
    k = max(1, buckets)
    spread = 2 / (9 * k)
    cube = (1 - spread + _FIRST_BUCKETS_Z * math.sqrt(spread)) ** 3
    return max(FLAG_RATIO, cube)


def _empty() -> array[float]:
    return array("d", bytes(8 * FIELDS * SCREEN_BUCKETS))


def _total(sums_of: dict[str, array[float]], keys: list[str]) -> array[float]:
    out = _empty()
    for key in keys:
        for i, value in enumerate(sums_of[key]):
            out[i] += value
    return out


def _weighted_median(points: list[tuple[str, float, float]]) -> tuple[float, float]:
    """The weighted median of `(key, weight, value)` points sorted by value, and the weight
    of the point holding it."""
    half = sum(w for _, w, _ in points) / 2
    seen = 0.0
    for _, weight, value in points:
        seen += weight
        if seen >= half:
            return value, weight
    return math.nan, 0.0


def screen_bytes(row_overhead: int) -> int:
    """The most bytes a `Senders` takes: its senders, their addresses' pools and `REST`,
    each a key of up to `MAX_KEY_CHARS` and its buckets' sums, and its candidates, each a
    key and a count; each row with `row_overhead` bytes beside."""
    rows = MAX_ROWS * (MAX_KEY_CHARS + 8 * FIELDS * SCREEN_BUCKETS + row_overhead)
    return rows + MAX_CANDIDATES * (MAX_KEY_CHARS + 8 + row_overhead)
