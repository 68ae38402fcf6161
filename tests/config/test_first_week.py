"""A new user's first week with the shipped kit (issue 104): what `check-config` must
say of a config before it runs — a misspelt severity the routing would send to the wrong
team, a literal secret in a webhook header, a shadow revision whose time has passed, every
problem of a file in one run — and what it says of credentials."""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from monitor.cli.check_config import check_config
from monitor.config import SEVERITIES, ConfigError, load_config
from monitor.evaluators.registry import evaluator_problems
from tests.deploy.test_deploy_alertmanager import SEVERITIES as ROUTED


def _problems(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> list[str]:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ=environ or {}, evaluator_check=evaluator_problems)
    return info.value.problems


def _checked(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[int, str, str]:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    code = check_config(path, ())
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- severities -------------------------------------------------------------------------


def test_the_default_severities_are_the_ones_the_shipped_routing_routes() -> None:
    """tests/deploy/test_deploy_alertmanager.py routes each through the real amtool."""
    assert set(SEVERITIES) == set(ROUTED)


def test_a_misspelt_severity_is_refused_naming_the_nearest(tmp_path: Path) -> None:
    problems = _problems(
        tmp_path,
        "alerts:\n  rules:\n"
        "    - {name: a, evaluator: local_groundedness, baseline: {}, severity: pgae}\n"
        "    - name: b\n      evaluator: local_groundedness\n"
        "      slo: {objective: 0.7, burn_rates: [{burn_rate: 2, long: 1h, short: 5m,"
        " severity: tikcet}]}\n",
    )
    assert [p.split(":", 1)[0] for p in problems] == [
        "alerts.rules.0.severity",
        "alerts.rules.1.slo.burn_rates.0.severity",
    ], problems
    assert (
        "'pgae' is not a severity the routing knows (page, ticket); did you mean 'page'?"
        in (problems[0])
    )
    assert "did you mean 'ticket'?" in problems[1]


def test_a_severity_of_your_own_routing_is_listed_in_alerts_severities(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "alerts:\n  severities: [page, ticket, critical]\n  rules:\n"
        "    - {name: a, evaluator: local_groundedness, baseline: {}, severity: critical}\n"
    )
    assert load_config(path, environ={}).alerts.rules[0].severity == "critical"


# -- secrets in webhook headers ---------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["Bearer 0123456789abcdef0123", "key-written-here", "令牌-سر-0123456789"]
)
def test_a_literal_header_value_is_refused(tmp_path: Path, value: str) -> None:
    problems = _problems(
        tmp_path,
        "alerts:\n  webhooks:\n    - url: https://hooks.example/page\n"
        f"      headers: {{Authorization: '{value}'}}\n"
        "  rules: [{name: a, evaluator: local_groundedness, baseline: {}, severity: pgae}]\n",
    )
    assert problems[0].startswith(
        "alerts.webhooks.0.headers.Authorization: a header value is not written into the "
        "config file"
    ), problems
    assert "${env:<VARIABLE>}" in problems[0]
    assert not any(value in p for p in problems)  # the secret is never echoed
    # The rest of the file is still checked in the same run.
    assert any(p.startswith("alerts.rules.0.severity: 'pgae'") for p in problems), problems


def test_a_header_from_the_environment_is_taken(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "alerts:\n  webhooks:\n    - url: https://hooks.example/page\n"
        "      headers: {Authorization: 'Bearer ${env:HOOK_TOKEN}', X-Key: '${env:HOOK_KEY}'}\n"
    )
    environ = {"HOOK_TOKEN": "t" * 32, "HOOK_KEY": "k" * 32}
    (hook,) = load_config(path, environ=environ).alerts.webhooks
    assert hook.headers == {"Authorization": "Bearer " + "t" * 32, "X-Key": "k" * 32}


# -- a shadow whose time has passed -----------------------------------------------------

REVISION = """
evaluators:
  - name: local_groundedness
    %s: {until: %s, threshold: 0.6}
"""


def test_check_config_refuses_a_shadow_whose_time_has_passed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _checked(tmp_path, capsys, REVISION % ("next", "2020-01-01T00:00:00Z"))
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line.startswith("evaluators.0.next.until: 2020-01-01T00:00:00+00:00 has passed")


def test_a_shadow_ahead_is_taken_and_a_previous_revision_is_refused_naming_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`evaluators[].previous` is gone (docs/alerts.md, "Evaluator changes"): a file that
    still sets it fails saying why and what to write instead."""
    code, _, err = _checked(tmp_path, capsys, REVISION % ("next", "2999-01-01T00:00:00Z"))
    assert code == 0, err
    code, _, err = _checked(tmp_path, capsys, REVISION % ("previous", "2999-01-01T00:00:00Z"))
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line.startswith("evaluators.0.previous: removed: the previous revision scoring")
    assert "score the new revision in shadow before the switch: next:" in line


def test_run_starts_with_a_shadow_whose_time_has_passed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A restart after `until` runs on: the shadow is left out, with a warning."""
    from monitor.evaluators.factory import BuildContext
    from monitor.processors.evaluation._revisions import other_revisions

    path = tmp_path / "c.yaml"
    path.write_text(REVISION % ("next", "2020-01-01T00:00:00Z"))
    config = load_config(path, environ={})
    with caplog.at_level(logging.WARNING, logger="monitor"):
        scorers, cpu = other_revisions(config, BuildContext(), now=2e9)
    assert (scorers, cpu) == ({}, [])
    (record,) = [r for r in caplog.records if "next revision" in r.getMessage()]
    assert record.levelno == logging.WARNING and "scores in shadow no more" in record.getMessage()


# -- credentials ------------------------------------------------------------------------

OTLP = """
receivers:
  otlp:
    auth_token_env: RAG_MONITOR_TEST_OTLP_TOKEN
    grpc: {endpoint: '%s:4317'}
    http: {endpoint: '%s:4318'}
"""
LONG = "0123456789abcdef0123456789abcdef"


def _warnings(err: str) -> list[str]:
    return [line[len("warning: ") :] for line in err.splitlines() if line.startswith("warning: ")]


@pytest.mark.parametrize(("host", "warned"), [("0.0.0.0", ["grpc", "http"]), ("127.0.0.1", [])])
def test_a_token_over_plain_http_off_loopback_is_warned_of(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    host: str,
    warned: list[str],
) -> None:
    monkeypatch.setenv("RAG_MONITOR_TEST_OTLP_TOKEN", LONG)
    code, out, err = _checked(tmp_path, capsys, OTLP % (host, host))
    assert code == 0, err
    plain = [w for w in _warnings(err) if "over plain" in w]
    assert [w.split(".")[2] for w in plain] == warned, err
    for line in plain:
        assert f"on {host}, reachable from other hosts" in line and "receivers.otlp.tls" in line
    assert LONG not in out + err


@pytest.mark.parametrize("token", ["x", "短い令牌", "0123456789abcde"])
def test_a_token_too_short_to_be_a_secret_is_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    monkeypatch.setenv("RAG_MONITOR_TEST_OTLP_TOKEN", token)
    monkeypatch.setenv("RAG_MONITOR_TEST_LABEL_TOKEN", token)
    text = (OTLP % ("127.0.0.1", "127.0.0.1")) + (
        "evaluators: [{name: local_groundedness}]\n"
        "audit: {evaluator: local_groundedness, reference: labels,"
        " labels: {http: true, token_env: RAG_MONITOR_TEST_LABEL_TOKEN}}\n"
        "exporters: {prometheus: {endpoint: '127.0.0.1:9464'}}\n"
    )
    code, _, err = _checked(tmp_path, capsys, text)
    assert code == 0, err
    short = [w for w in _warnings(err) if "too short to be a secret" in w]
    assert [w.split(":")[0] for w in short] == [
        "receivers.otlp.auth_token_env",
        "audit.labels.token_env",
    ], err
    assert f"the token is {len(token)} characters" in short[0]


def test_a_label_token_over_plain_http_is_warned_of_and_the_summary_is_true(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_MONITOR_TEST_LABEL_TOKEN", LONG)
    text = (
        "evaluators: [{name: local_groundedness}]\n"
        "audit: {evaluator: local_groundedness, reference: labels,"
        " labels: {http: true, token_env: RAG_MONITOR_TEST_LABEL_TOKEN}}\n"
    )
    code, out, err = _checked(tmp_path, capsys, text)  # the default endpoint, 0.0.0.0:9464
    assert code == 0, err
    (plain,) = [w for w in _warnings(err) if "over plain HTTP" in w]
    assert plain.startswith("audit.labels.token_env: label senders present the bearer token")
    (summary,) = [line for line in out.splitlines() if "/audit/labels" in line]
    assert "RAG_MONITOR_TEST_LABEL_TOKEN only, loopback senders included" in summary
    assert "or on loopback" not in out


# -- every problem in one run -----------------------------------------------------------

TYPOS = """
evaluatorz: [{name: local_groundedness}]
alerts:
  evaluation_interval: 15
  rules:
    - name: hallucination_regression
      evaluator: local_groundedness
      baseline: {window: 24hh}
      severity: pgae
audit:
  evaluator: local_groundedness
  reference: labels
  labels: {http: true, tokn_env: RAG_MONITOR_TEST_LABEL_TOKEN}
evaluators:
  - name: local_groundedness
    next: {until: 2020-01-01, threshold: 0.6}
"""
FIXED = """
alerts:
  evaluation_interval_s: 15
  rules:
    - name: hallucination_regression
      evaluator: local_groundedness
      baseline: {window: 24h}
      severity: page
audit:
  evaluator: local_groundedness
  reference: labels
  labels: {http: true, token_env: RAG_MONITOR_TEST_LABEL_TOKEN}
evaluators:
  - name: local_groundedness
    next: {until: 2999-01-01, threshold: 0.6}
"""


def test_every_problem_of_a_file_comes_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unknown keys and wrong values in several sections, and what only a section (or the
    whole config) that validates can be checked for — a severity, the label senders'
    credential, a shadow's time: all of them at once, nothing about the defaults put in
    place of what is wrong; the file with all of them fixed passes."""
    monkeypatch.setenv("RAG_MONITOR_TEST_LABEL_TOKEN", LONG)
    code, _, err = _checked(tmp_path, capsys, TYPOS)
    assert code == 1
    assert sorted(line.split(":", 1)[0] for line in err.strip().splitlines()) == [
        "alerts.evaluation_interval",
        "alerts.rules.0.baseline.window",
        "alerts.rules.0.severity",
        "audit.labels.http",
        "audit.labels.tokn_env",
        "evaluators.0.next.until",
        "evaluatorz",
    ], err
    code, _, err = _checked(tmp_path, capsys, FIXED)
    assert code == 0, err


def test_a_key_found_wrong_is_not_blamed_again_for_its_default(tmp_path: Path) -> None:
    """Checked again without a wrong key, the default in its place says nothing more of
    it (nor of the keys under it): one problem per mistake."""
    problems = _problems(
        tmp_path,
        "audit: {evaluator: local_groundedness, reference: labels, labels: {http: 2}}\n"
        "alerts: {rules: [{name: a, evaluator: local_groundedness, baseline: {}, "
        "severity: pgae}], evaluation_interval_s: 0}\n",
    )
    assert sorted(p.split(":", 1)[0] for p in problems) == [
        "alerts.evaluation_interval_s",
        "alerts.rules.0.severity",
        "audit.labels.http",
    ], problems


def test_a_variable_not_set_does_not_hide_the_other_problems(tmp_path: Path) -> None:
    """A reference to a variable that is not set is one problem among the file's others,
    reported once: not again as the key it left missing (a required URL) or as the text."""
    problems = _problems(
        tmp_path,
        "sampling: {rate: '0.5'}\n"
        "alerts:\n"
        "  alertmanager: {url: '${env:AM_URL}'}\n"
        "  webhooks: [{url: '${env:HOOK_URL}', headers: {Authorization: 'Bearer ${env:TOK}'}}]\n"
        "  rules: [{name: a, evaluator: local_groundedness, baseline: {}, severity: pgae}]\n",
        environ={},
    )
    assert sorted(p.split(":", 1)[0] for p in problems) == [
        "alerts.alertmanager.url",
        "alerts.rules.0.severity",
        "alerts.webhooks.0.headers.Authorization",
        "alerts.webhooks.0.url",
        "sampling.rate",
    ], problems
    assert (
        "environment variable AM_URL is not set"
        in problems[[p.split(":", 1)[0] for p in problems].index("alerts.alertmanager.url")]
    )


def test_rules_without_the_context_rule_are_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's first rule copied alone: groundedness skips records that lost their
    documents, so nothing would page on them. check-config warns, naming the rule to add;
    with it, or on an evaluator that needs no context, it says nothing."""
    regression = (
        "alerts:\n  rules:\n"
        "    - {name: hallucination, evaluator: local_groundedness, baseline: {window: 24h}}\n"
    )
    code, _, err = _checked(tmp_path, capsys, regression)
    assert code == 0
    (line,) = [line for line in err.splitlines() if "without their context" in line]
    assert line.startswith(
        "warning: alerts.rules: no rule pages when records reach "
        "local_groundedness without their context"
    )
    assert "measure: no_context" in line
    guarded = regression + (
        "    - {name: ctx, evaluator: local_groundedness, measure: no_context, baseline: {}}\n"
    )
    code, _, err = _checked(tmp_path, capsys, guarded)
    assert code == 0 and "without their context" not in err, err
    relevance = "alerts:\n  rules:\n    - {name: r, evaluator: local_relevance, baseline: {}}\n"
    code, _, err = _checked(tmp_path, capsys, relevance)
    assert code == 0 and "without their context" not in err, err


def test_the_summary_says_what_a_context_rule_watches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """check-config's line for the default context rule names the share it watches, not a
    defect rate (which its evaluator's other rule watches)."""
    code, out, _ = _checked(tmp_path, capsys, "")
    assert code == 0
    assert "# alert context_missing_regression: share of records without context up by " in out
    assert "# alert hallucination_regression: defect rate up by " in out


def test_a_rule_name_in_chinese_is_refused_saying_which_letters(tmp_path: Path) -> None:
    """幻觉回归 is letters to its writer: the refusal says ASCII letters, not "letters"."""
    (problem,) = _problems(
        tmp_path,
        "alerts:\n  rules:\n    - {name: 幻觉回归, evaluator: local_groundedness, baseline: {}}\n"
        "    - {name: ctx, evaluator: local_groundedness, measure: no_context, baseline: {}}\n",
    )
    assert problem.startswith("alerts.rules.0.name: must be 1 to 128 ASCII letters (A-Z, a-z)")


def test_a_token_in_the_clear_is_warned_of_in_the_run_that_finds_typos(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user's first config, with a misspelt key, a misspelt severity and the OTLP
    token on 0.0.0.0 without TLS: one run says all of it (the warnings after the problems),
    each once, and nothing about the defaults put in place of the wrong keys (no missing
    context rule: the rule whose severity is wrong is still the user's)."""
    monkeypatch.setenv("RAG_MONITOR_TEST_OTLP_TOKEN", "短い")
    text = (OTLP % ("0.0.0.0", "0.0.0.0")) + (
        "exporters: {prometheus: {endpiont: '127.0.0.1:9464'}}\n"
        "alerts:\n  rules:\n"
        "    - {name: h, evaluator: local_groundedness, baseline: {}, severity: pgae}\n"
        "    - {name: 幻觉, evaluator: local_groundedness, measure: no_context, baseline: {}}\n"
    )
    code, _, err = _checked(tmp_path, capsys, text)
    assert code == 1
    problems = [line.split(":", 1)[0] for line in err.splitlines() if "warning: " not in line]
    assert sorted(problems) == [
        "alerts.rules.0.severity",
        "alerts.rules.1.name",
        "exporters.prometheus.endpiont",
    ], err
    assert sorted(w.split(":", 1)[0] for w in _warnings(err)) == [
        "receivers.otlp.auth_token_env",
        "receivers.otlp.grpc.endpoint",
        "receivers.otlp.http.endpoint",
    ], err
    assert err.index("warning: ") > max(err.index(p) for p in problems)
    assert "短い" not in err


def test_run_logs_what_check_config_warns_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sidecar started without check-config (the README's first command, a pod) on a
    token over plain HTTP off loopback says so in its log at start, once per line."""
    import monitor.__main__ as cli

    def started(main: Coroutine[Any, Any, int]) -> int:
        main.close()
        return 0

    monkeypatch.setattr(cli, "_run_loop", started)
    monkeypatch.setenv("RAG_MONITOR_TEST_OTLP_TOKEN", LONG)
    path = tmp_path / "c.yaml"
    path.write_text(OTLP % ("0.0.0.0", "0.0.0.0"))
    assert cli.main(["run", "--config", str(path)]) == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "over plain" in line]
    assert [line.split("config: ", 1)[1].split(":")[0] for line in said] == [
        "receivers.otlp.grpc.endpoint",
        "receivers.otlp.http.endpoint",
    ], err
    assert all("WARNING" in line for line in said) and LONG not in err
