"""Redaction: built-in detectors validated beyond their shape, overlaps resolved, config
choosing detectors and the phone region, and the quality bar on the labelled sample."""

from __future__ import annotations

import pytest

from harness.redaction_sample import SAMPLE, load, measure
from monitor.config import ConfigError, Redaction, load_config
from monitor.records.redaction import BUILT_IN, Redactor, iban_valid, luhn_valid, ssn_valid

# The sample holds at least this many labelled values of each built-in kind.
MIN_LABELS = 15


def _redactor(**config: object) -> Redactor:
    return Redactor(Redaction.model_validate({"enabled": True, **config}))


def test_sample_is_large_enough_and_has_every_kind() -> None:
    rows = load(SAMPLE)
    assert len(rows) >= 200
    kinds = [kind for _, labels in rows for kind, _, _ in labels]
    for kind in BUILT_IN:
        assert kinds.count(kind) >= MIN_LABELS, kind
    assert sum(1 for _, labels in rows if not labels) >= 80  # look-alikes


@pytest.mark.parametrize("kind", BUILT_IN)
def test_precision_and_recall_on_the_labelled_sample(kind: str) -> None:
    q = measure()
    mistakes = "\n".join(m for m in q.mistakes if f" {kind}:" in m)
    assert q.precision(kind) >= 0.98, mistakes
    assert q.recall(kind) >= 0.95, mistakes


def test_an_iban_is_redacted_whole_never_as_a_phone() -> None:
    r = _redactor()
    text = "Transfer to DE89 3704 0044 0532 0130 00 and call +49 30 901820."
    assert r.redact(text) == "Transfer to [REDACTED:iban] and call [REDACTED:phone]."


@pytest.mark.parametrize(
    "text",
    [
        "ISBN 978-3-16-148410-0",
        "Order #4155550123 shipped.",
        "Invoice no. 2024-000187",
        "Request id 123e4567-e89b-12d3-a456-426614174000",
        "We run version 10.0.19045.3570 and v1.2.3.4",
        "On 2024-03-15 at 14:30:05 it cost $1,299.99",
        "MAC 00:1A:2B:3C:4D:5E and std::vector",
        "Card 4111 1111 1111 1112 fails Luhn",
        "IBAN DE90 3704 0044 0532 0130 00 has a wrong checksum",
        "SSNs 000-12-3456, 666-45-6789 and 912-34-5678 cannot be issued",
    ],
)
def test_look_alikes_pass_through(text: str) -> None:
    assert _redactor().redact(text) == text


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("SSN 412-56-7890", "ssn"),
        ("from 203.0.113.45", "ipv4"),
        ("from 2001:db8:85a3::8a2e:370:7334", "ipv6"),
        ("card 3782 822463 10005", "card"),
        ("mail siobhan.o'brien@example.ie", "email"),
        ("call (212) 555-0147", "phone"),
    ],
)
def test_each_kind_is_named_in_its_placeholder(text: str, kind: str) -> None:
    redacted = _redactor().redact(text)
    assert redacted.endswith(f"[REDACTED:{kind}]"), redacted


def test_detectors_can_be_chosen() -> None:
    text = "jane@example.com, 203.0.113.45, +1 415-555-2671"
    only_email = _redactor(detectors=["email"])
    assert only_email.redact(text) == "[REDACTED:email], 203.0.113.45, +1 415-555-2671"
    assert _redactor(detectors=[]).redact(text) == text


def test_phone_region_reads_national_numbers() -> None:
    text = "UK callers: (020) 7946 0018"
    assert _redactor().redact(text) == text  # not a US number
    assert _redactor(phone_region="GB").redact(text) == "UK callers: [REDACTED:phone]"


def test_config_names_bad_detectors_and_regions(tmp_path: object) -> None:
    with pytest.raises(ConfigError) as bad:
        load_config(
            None,
            environ={
                "RAG_MONITOR_REDACTION__DETECTORS": "[email, passport]",
                "RAG_MONITOR_REDACTION__PHONE_REGION": "XX",
            },
        )
    text = "\n".join(bad.value.problems)
    assert "redaction.detectors.1" in text
    assert "redaction.phone_region" in text and "XX" in text


def test_user_patterns_counts_and_findings() -> None:
    counted: dict[str, int] = {}
    r = Redactor(
        Redaction(enabled=True, patterns=[r"ACCT-\d{6}"]),
        lambda kind, n: counted.__setitem__(kind, counted.get(kind, 0) + n),
    )
    text = "ACCT-123456 and ACCT-654321 belong to jane@example.com"
    assert (
        r.redact(text) == "[REDACTED:custom_0] and [REDACTED:custom_0] belong to [REDACTED:email]"
    )
    assert counted == {"custom_0": 2, "email": 1}
    assert [(f.kind, text[f.start : f.end]) for f in r.findings(text)] == [
        ("custom_0", "ACCT-123456"),
        ("custom_0", "ACCT-654321"),
        ("email", "jane@example.com"),
    ]


def test_disabled_redactor_changes_nothing_but_still_finds() -> None:
    r = Redactor(Redaction(enabled=False))
    assert r.redact("jane@example.com") == "jane@example.com"
    assert [f.kind for f in r.findings("jane@example.com")] == ["email"]


def test_checksums() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("GB29NWBK60161331926819") and not iban_valid("GB28NWBK60161331926819")
    assert not iban_valid("GB29NWBK6016133192681")  # wrong length for GB
    assert ssn_valid("412567890")
    assert not any(ssn_valid(s) for s in ("000123456", "666123456", "912345678", "412000000"))
