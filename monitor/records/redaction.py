"""Redaction of personal data before text leaves the process: judge prompts, the text a
results line carries (`exporters.results_include_text`) and `/debug/records`.

Built-in detectors (`redaction.detectors`, default all), each validated beyond its shape:

| kind | found by | validated by |
|---|---|---|
| `iban` | two letters, two digits, then the country's BBAN length, optionally in groups | ISO 13616: country length and the mod-97 checksum |
| `card` | 13–19 digits, optionally grouped by spaces or dashes | Luhn check digit and an issuer prefix with a length that issuer uses |
| `ssn` | US SSN `AAA-GG-SSSS` (or nine digits right after "SSN") | area not 000, 666 or 900–999, group not 00, serial not 0000, known advertising numbers excluded |
| `email` | address pattern with a dotted domain and a letter TLD | — |
| `ipv4`, `ipv6` | dotted quads / colon-hex groups | `ipaddress`; dotted quads labelled as versions or section numbers are left alone |
| `phone` | `phonenumbers.PhoneNumberMatcher` (national numbers read in `redaction.phone_region`) | `phonenumbers` validity (leniency VALID); an unformatted run of digits only after a word such as phone, call or mobile |

Phone and card numbers labelled as something else ("order #", "invoice no.", "ISBN",
"tracking", "ticket", "policy", ...) are left alone.

Each `redaction.patterns` regex is its own kind (`custom_0`, `custom_1`, ...). Findings
never overlap: the longest match wins, then the kind listed first above (IPv6 before IPv4), so an IBAN is
never partly replaced as a phone number. Each finding becomes `[REDACTED:<kind>]`.
Names and street addresses are not detected: without a language model, patterns cannot
tell them from ordinary words at a useful precision (monitor/judge/README.md, "Redaction").
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from monitor.config import Redaction

BUILT_IN = ("iban", "card", "ssn", "email", "ipv6", "ipv4", "phone")  # also the tie-break order

# ISO 13616 registry: IBAN length per country code.
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
    "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
    "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27,
    "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip

# An email address is found from its `@` (`_emails`): its local part is the run of
# `_LOCAL` characters before it, from the first letter or digit where one may start (not
# after a word character, `.`, `+` or `-`: `_NOT_BEFORE`), its domain `_DOMAIN` after it.
# A pattern for the whole address was searched again from each `'` or `%` of a long local
# part, a quadratic cost in a run of them.
_LOCAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+'-")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_NOT_BEFORE = re.compile(r"[\w.+\-]")
_DOMAIN = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w\-])")
_CARD = re.compile(r"(?<![\w\-.])\d(?:[ \-]?\d){12,18}(?![\w\-]|\.\d)")
_IBAN_START = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]{2})(\d{2})(?=[ \-]?[A-Za-z0-9])")
_SSN = re.compile(r"(?<![\w\-])(\d{3})([\- ])(\d{2})\2(\d{4})(?![\w\-]|\.\d)")
_SSN_BARE = re.compile(
    r"\b(?:SSN|SS#|social security(?: number| no\.?)?)\s*+(?:is|:|#|no\.?)?\s*+(\d{9})\b", re.I
)
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
# A whole run of hex digits, colons and dots (two colons at least: `_ipv6s` checks), each
# run read once: three quantifiers over those characters, colons between, took a run of
# colons apart every way.
_IPV6 = re.compile(r"(?<![\w:.%])\[?[0-9A-Fa-f:.]++(?:%\w++)?\]?")
# Words that label a number as something other than a phone or card number.
_LABELLED_OTHERWISE = (
    r"\b(?:order|invoice|isbn|issn|tracking|ref|reference|ticket|case|po|sku|serial|part|"
    r"item|booking|confirmation|receipt|policy|claim|patent|model|version|build{extra})"
    r"\s*+(?:#|no\.?|number|nr\.?|id|code)?\s*+(?:is|was)?\s*+[:#=]?\s*+$"
)
_NOT_A_PHONE = re.compile(_LABELLED_OTHERWISE.format(extra="|account|acct"), re.I)
_NOT_A_CARD = re.compile(_LABELLED_OTHERWISE.format(extra=""), re.I)
# A bare run of digits is only taken for a phone number when a word nearby says it is one.
_PHONE_WORDS = re.compile(
    r"\b(?:phone|tel|telephone|mobile|cell|call|text|sms|fax|dial|ring|contact|reach|"
    r"whatsapp|number|no\.|nr|handy|voicemail)\b",
    re.I,
)
_NOT_AN_ADDRESS = re.compile(
    r"(?:\bv|\bversion|\bver\.?|\brelease|\bbuild|\bfirmware|\bsection|\bsec\.|§|"
    r"\bchapter|\bclause|\brule|\bstep|\bfigure|\bfig\.|\btable|\bitem|\boid)\s*$",
    re.I,
)
_SSN_ADVERTISED = frozenset({"078051120", "219099999"})


@dataclass(frozen=True, slots=True)
class Finding:
    """Personal data of `kind` at `text[start:end]`."""

    kind: str
    start: int
    end: int


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _issuer_length_ok(digits: str) -> bool:
    """An issuer identification prefix that uses this card length (major networks)."""
    n = len(digits)
    two, four, six = int(digits[:2]), int(digits[:4]), int(digits[:6])
    if digits[0] == "4":  # Visa
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:  # Mastercard
        return n == 16
    if two in (34, 37):  # American Express
        return n == 15
    if four == 6011 or 644 <= int(digits[:3]) <= 649 or two == 65 or 622126 <= six <= 622925:
        return 16 <= n <= 19  # Discover
    if 3528 <= four <= 3589:  # JCB
        return 16 <= n <= 19
    if two in (36, 38, 39) or 300 <= int(digits[:3]) <= 305:  # Diners Club
        return 14 <= n <= 19
    if two == 62:  # UnionPay
        return 16 <= n <= 19
    if two == 50 or 56 <= two <= 69:  # Maestro
        return 12 <= n <= 19
    return False


def iban_valid(compact: str) -> bool:
    """ISO 13616: known country, its length, and remainder 1 of the rearranged number mod 97."""
    code = compact[:2]
    if IBAN_LENGTHS.get(code) != len(compact) or not compact[2:4].isdigit():
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


def ssn_valid(digits: str) -> bool:
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return False
    return digits not in _SSN_ADVERTISED


class Redactor:
    """Finds personal data in text and replaces it with `[REDACTED:<kind>]`.

    `on_redact(kind, count)` is told how many findings of each kind a `redact` call
    replaced (the judge client counts them in `rag_monitor_redactions_total{kind}`)."""

    def __init__(
        self, config: Redaction, on_redact: Callable[[str, int], None] | None = None
    ) -> None:
        self.enabled = config.enabled
        self._region = config.phone_region
        detectors: set[str] = set(config.detectors)
        self._kinds: list[str] = [kind for kind in BUILT_IN if kind in detectors]
        self._custom = [(f"custom_{i}", re.compile(p)) for i, p in enumerate(config.patterns)]
        self._on_redact = on_redact
        self._order: dict[str, int] = {kind: i for i, kind in enumerate(self._kinds)}
        for i, (kind, _) in enumerate(self._custom):
            self._order[kind] = len(self._kinds) + i

    def __call__(self, text: str) -> str:
        return self.redact(text)

    def redact(self, text: str) -> str:
        """`text` with every finding replaced (unchanged when redaction is disabled)."""
        if not self.enabled or not text:
            return text
        findings = self.findings(text)
        if not findings:
            return text
        parts, last, counts = [], 0, dict[str, int]()
        for f in findings:
            parts += [text[last : f.start], f"[REDACTED:{f.kind}]"]
            last = f.end
            counts[f.kind] = counts.get(f.kind, 0) + 1
        parts.append(text[last:])
        if self._on_redact is not None:
            for kind, count in counts.items():
                self._on_redact(kind, count)
        return "".join(parts)

    def findings(self, text: str) -> list[Finding]:
        """Non-overlapping findings in text order (regardless of `enabled`)."""
        candidates: list[Finding] = []
        scanners: dict[str, Callable[[str], Iterator[tuple[int, int]]]] = {
            "email": _emails,
            "phone": self._phones,
            "card": _cards,
            "iban": _ibans,
            "ssn": _ssns,
            "ipv4": _ipv4s,
            "ipv6": _ipv6s,
        }
        for kind in self._kinds:
            candidates += [Finding(kind, s, e) for s, e in scanners[kind](text)]
        for kind, pattern in self._custom:
            candidates += [
                Finding(kind, m.start(), m.end())
                for m in pattern.finditer(text)
                if m.end() > m.start()
            ]
        # Longest first, then by kind order: a whole IBAN beats a phone number inside it.
        candidates.sort(key=lambda f: (f.start - f.end, self._order[f.kind], f.start))
        chosen: list[Finding] = []
        for f in candidates:
            if all(f.end <= c.start or f.start >= c.end for c in chosen):
                chosen.append(f)
        return sorted(chosen, key=lambda f: f.start)

    def _phones(self, text: str) -> Iterator[tuple[int, int]]:
        if sum(ch.isdigit() for ch in text) < 7:
            return
        # The redaction extra; only the phone detector needs it (the config checks it is there).
        import phonenumbers

        matcher = phonenumbers.PhoneNumberMatcher(
            text, self._region, leniency=phonenumbers.Leniency.VALID
        )
        for match in matcher:
            before = text[max(0, match.start - 32) : match.start]
            if _NOT_A_PHONE.search(before):
                continue
            if match.raw_string.isdigit() and not _PHONE_WORDS.search(before):
                continue
            yield match.start, match.end


def _emails(text: str) -> Iterator[tuple[int, int]]:
    """Each address, leftmost first, none overlapping: each `@`'s local part is read back
    to the previous `@` or address at most, so every character is read a bounded number
    of times."""
    end = 0  # where the last address ended (the next starts there at the earliest)
    at = text.find("@")
    while at >= 0:
        floor = end
        start = at
        while start > floor and text[start - 1] in _LOCAL:
            start -= 1
        first = next((i for i in range(start, at) if _may_start(text, i, start)), None)
        domain = _DOMAIN.match(text, at + 1) if first is not None else None
        if first is not None and domain is not None:
            yield first, domain.end()
            end = domain.end()
            at = text.find("@", end)
        else:
            end = max(end, at + 1)
            at = text.find("@", at + 1)


def _may_start(text: str, i: int, run_start: int) -> bool:
    """Whether an address's local part may start at `i` of a run of `_LOCAL` characters
    starting at `run_start`."""
    if text[i] not in _ALNUM:
        return False
    if i == 0:
        return True
    before = text[i - 1]
    return before in "'%" if i > run_start else _NOT_BEFORE.match(before) is None


def _cards(text: str) -> Iterator[tuple[int, int]]:
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if not (_issuer_length_ok(digits) and luhn_valid(digits)):
            continue
        if _NOT_A_CARD.search(text[max(0, m.start() - 32) : m.start()]):
            continue
        yield m.start(), m.end()


def _ibans(text: str) -> Iterator[tuple[int, int]]:
    for m in _IBAN_START.finditer(text):
        country = m.group(1).upper()
        length = IBAN_LENGTHS.get(country)
        if length is None:
            continue
        # Consume exactly the country's length, allowing one space or dash between characters.
        pos, chars = m.end(), [country, m.group(2)]
        count = 4
        while count < length and pos < len(text):
            ch = text[pos]
            if ch.isascii() and ch.isalnum():
                chars.append(ch.upper())
                count += 1
                pos += 1
            elif ch in " -" and pos + 1 < len(text) and text[pos + 1].isalnum():
                pos += 1
            else:
                break
        if count != length or (pos < len(text) and text[pos].isalnum()):
            continue
        if iban_valid("".join(chars)):
            yield m.start(), pos


def _ssns(text: str) -> Iterator[tuple[int, int]]:
    for m in _SSN.finditer(text):
        if ssn_valid(m.group(1) + m.group(3) + m.group(4)):
            yield m.start(), m.end()
    for m in _SSN_BARE.finditer(text):
        if ssn_valid(m.group(1)):
            yield m.start(1), m.end(1)


def _ipv4s(text: str) -> Iterator[tuple[int, int]]:
    for m in _IPV4.finditer(text):
        try:
            ipaddress.IPv4Address(m.group(0))
        except ValueError:
            continue
        if _NOT_AN_ADDRESS.search(text[max(0, m.start() - 12) : m.start()]):
            continue
        yield m.start(), m.end()


def _ipv6s(text: str) -> Iterator[tuple[int, int]]:
    if text.count(":") < 2:
        return
    for m in _IPV6.finditer(text):
        start, end = m.start(), m.end()
        candidate = m.group(0)
        if candidate.count(":") < 2:
            continue
        if candidate.startswith("["):
            candidate, start = candidate[1:], start + 1
        if candidate.endswith("]"):
            candidate, end = candidate[:-1], end - 1
        while candidate and candidate[-1] in ".:" and not candidate.endswith("::"):
            candidate, end = candidate[:-1], end - 1
        if not any(ch.isdigit() for ch in candidate):
            continue
        try:
            ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        yield start, end
