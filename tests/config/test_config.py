"""Config: YAML + `${env:...}` + env overrides, Collector forms, durations, ranges; unknown
keys rejected and every problem names its key (and the variable behind it)."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import (
    MASK,
    Config,
    ConfigError,
    available_cpus,
    dump_yaml,
    effective_config,
    load_config,
    load_yaml,
    parse_duration,
)
from monitor.evaluators.registry import check_evaluators, known_evaluators, threshold_scale
from monitor.exporters.metrics_port import load_web_security
from tests.conftest import EXAMPLES, REPO

TESTDATA = REPO / "tests" / "testdata" / "config"


def _load(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> Config:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    config = load_config(path, environ={} if environ is None else environ)
    check_evaluators(config)
    return config


def _problems(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text, environ)
    return info.value.problems


def test_embedded_defaults() -> None:
    config = load_config(None, environ={})
    assert config.receivers.otlp.grpc.endpoint == "127.0.0.1:4317"
    assert config.receivers.otlp.http.endpoint == "127.0.0.1:4318"
    assert config.exporters.prometheus.endpoint == "0.0.0.0:9464"
    assert config.sampling.rate == 1.0
    assert [e.name for e in config.evaluators] == [
        "local_groundedness",
        "local_relevance",
        "local_retrieval",
        "local_safety",
    ]
    assert config.receivers.kafka.enabled is False


def test_the_cpus_are_probed_when_a_config_is_built_not_at_import() -> None:
    """`pipeline.processes` defaults to the usable CPUs, found when the default is needed."""
    refuse_probe = (
        "import os\n"
        "def probe(pid):\n"
        "    raise AssertionError('CPUs probed at import')\n"
        "os.sched_getaffinity = probe\n"
        "import monitor.config\n"
    )
    subprocess.run([sys.executable, "-c", refuse_probe], check=True)
    assert load_config(None, environ={}).pipeline.processes == available_cpus()
    assert Config().pipeline.processes == available_cpus()


def test_example_config_is_valid() -> None:
    config = load_config(EXAMPLES / "config.yaml", environ={})
    check_evaluators(config)
    assert config.alerts.rules[0].evaluator == "local_groundedness"


# -- the Collector's forms ---------------------------------------------------------------


def test_collector_style_file() -> None:
    config = load_config(
        TESTDATA / "collector_style.yaml",
        environ={"OTLP_TOKEN": "012345", "MY_POD_IP": "10.1.2.3"},
    )
    otlp = config.receivers.otlp
    assert otlp.grpc.enabled and otlp.grpc.endpoint == "10.1.2.3:4317"
    assert not otlp.http.enabled  # not listed under protocols
    assert otlp.auth_token == "012345"  # text stays text: not the octal number 5349
    assert config.trace_assembly.idle_timeout_s == 90
    assert config.judge.timeout_s == 2.5 and config.judge.backoff_base_s == 0.5
    assert config.alerts.rules[0].max_defect_rate == 0.1  # the default after `:-`
    assert parse_duration(config.alerts.rules[0].window) == 5400


@pytest.mark.parametrize(
    ("protocols", "grpc", "http"),
    [
        ("{grpc: {endpoint: '0.0.0.0:4317'}, http: {endpoint: '0.0.0.0:4318'}}", True, True),
        ("{http: {endpoint: '0.0.0.0:4318'}}", False, True),
        ("{grpc: }", True, False),  # listed without settings: enabled on the default endpoint
    ],
)
def test_a_listed_protocol_is_enabled_and_a_missing_one_disabled(
    tmp_path: Path, protocols: str, grpc: bool, http: bool
) -> None:
    config = _load(tmp_path, f"receivers:\n  otlp:\n    protocols: {protocols}\n")
    otlp = config.receivers.otlp
    assert (otlp.grpc.enabled, otlp.http.enabled) == (grpc, http)
    if grpc:
        assert otlp.grpc.endpoint in ("0.0.0.0:4317", "127.0.0.1:4317")
    if http:
        assert otlp.http.endpoint == "0.0.0.0:4318"


def test_both_forms_read_the_same() -> None:
    plain = Config.model_validate(
        {"receivers": {"otlp": {"grpc": {"endpoint": "0.0.0.0:4317"}, "http": {"enabled": False}}}}
    )
    collector = Config.model_validate(
        {"receivers": {"otlp": {"protocols": {"grpc": {"endpoint": "0.0.0.0:4317"}}}}}
    )
    assert plain == collector


def test_a_plain_env_override_applies_to_a_collector_style_file(tmp_path: Path) -> None:
    text = "receivers:\n  otlp:\n    protocols:\n      grpc: {endpoint: '127.0.0.1:4317'}\n"
    config = _load(tmp_path, text, {"RAG_MONITOR_RECEIVERS__OTLP__GRPC__ENDPOINT": "0.0.0.0:14317"})
    assert config.receivers.otlp.grpc.endpoint == "0.0.0.0:14317"
    assert not config.receivers.otlp.http.enabled


def _expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), path
    return first.removeprefix("# expect: ")


@pytest.mark.parametrize("path", sorted((TESTDATA / "bad").glob("*.yaml")), ids=lambda p: p.stem)
def test_bad_fixtures_name_key_and_problem(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each problem is found by what `check-config` runs: the schema, then the components'
    own checks (evaluators, the metrics port's web config)."""
    monkeypatch.chdir(REPO)  # fixtures name other fixtures relative to the checkout
    with pytest.raises(ConfigError) as info:
        config = load_config(path.relative_to(REPO), environ={})
        check_evaluators(config)
        if config.exporters.prometheus.web_config_file is not None:
            load_web_security(config.exporters.prometheus.web_config_file)
    expected = _expected(path)
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems


# -- the OTLP token ----------------------------------------------------------------------


def test_token_from_env(tmp_path: Path) -> None:
    text = "receivers:\n  otlp:\n    auth_token_env: OTLP_TOKEN\n"
    assert _load(tmp_path, text, {"OTLP_TOKEN": "s3cret"}).receivers.otlp.auth_token == "s3cret"
    assert _problems(tmp_path, text) == [
        "receivers.otlp.auth_token_env: environment variable OTLP_TOKEN is not set"
    ]
    assert _problems(tmp_path, text, {"OTLP_TOKEN": ""}) == [
        "receivers.otlp.auth_token: must be a non-empty token without spaces"
    ]


def test_token_by_reference_or_override_is_accepted_inline_is_refused(tmp_path: Path) -> None:
    by_reference = "receivers:\n  otlp:\n    auth_token: ${env:OTLP_TOKEN}\n"
    assert _load(tmp_path, by_reference, {"OTLP_TOKEN": "abc"}).receivers.otlp.auth_token == "abc"
    override = {"RAG_MONITOR_RECEIVERS__OTLP__AUTH_TOKEN": "abc"}
    assert _load(tmp_path, "", override).receivers.otlp.auth_token == "abc"
    (problem,) = _problems(tmp_path, "receivers:\n  otlp:\n    auth_token: abc\n")
    assert problem.startswith("receivers.otlp.auth_token: a token is not written into the config")
    assert "auth_token_env: <VARIABLE>" in problem and "abc" not in problem
    both = "receivers:\n  otlp:\n    auth_token_env: T\n    auth_token: ${env:T}\n"
    (problem,) = _problems(tmp_path, both, {"T": "abc"})
    assert problem.startswith(
        "receivers.otlp.auth_token: give auth_token_env or auth_token, not both"
    )


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        (
            "receivers: {otlp: {auth_token_env: NOPE, max_request_bytes: 0}}",
            [
                "receivers.otlp.auth_token_env: environment variable NOPE is not set",
                "receivers.otlp.max_request_bytes: must be greater than 0",
            ],
        ),
        (
            "receivers: {otlp: {auth_token_env: T, auth_token: '${env:T}', max_request_byte: 1}}",
            [
                "receivers.otlp.auth_token: give auth_token_env or auth_token, not both",
                "receivers.otlp.max_request_byte: unknown key",
            ],
        ),
        (
            "receivers: {otlp: {auth_token_env: NOPE, auth_token: '${env:T}'}}",
            [
                "receivers.otlp.auth_token: give auth_token_env or auth_token, not both",
                "receivers.otlp.auth_token_env: environment variable NOPE is not set",
            ],
        ),
        (
            "receivers: {otlp: {protocols: {grpc: }, grpc: {endpoint: x}, max_request_bytes: 0}}",
            [
                "receivers.otlp.protocols: give the receivers either as protocols.grpc",
                "receivers.otlp.grpc.endpoint: expected host:port",  # as written: plain
                "receivers.otlp.max_request_bytes: must be greater than 0",
            ],
        ),
        (
            "receivers: {otlp: {protocols: {}, route_atribute: x}}",
            [
                "receivers.otlp.protocols: expected a mapping with grpc, http or both",
                "receivers.otlp.route_atribute: unknown key",
            ],
        ),
        (
            "receivers: {otlp: {protocols: {thrift: , grpc: {endpoint: x}}, max_request_bytes: 0}}",
            [
                "receivers.otlp.protocols.thrift: unknown protocol (grpc, http)",
                "receivers.otlp.protocols.grpc.endpoint: expected host:port",
                "receivers.otlp.max_request_bytes: must be greater than 0",
            ],
        ),
        (
            "receivers: {otlp: {protocols: {http: 5}, max_request_bytes: 0}}",
            [
                "receivers.otlp.protocols.http: expected a mapping (e.g. endpoint)",
                "receivers.otlp.max_request_bytes: must be greater than 0",
            ],
        ),
    ],
)
def test_the_token_and_protocols_are_reported_with_the_other_problems_of_their_section(
    tmp_path: Path, yaml_text: str, expected: list[str]
) -> None:
    """A token named twice or from an unset variable, and the Collector's `protocols`
    written wrong, do not hide the rest of the section: each problem is reported at its
    own path, in one error."""
    problems = _problems(tmp_path, yaml_text + "\n", {"T": "abc"})
    assert len(problems) == len(expected), problems
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems)


# -- ${env:...} --------------------------------------------------------------------------


def test_env_references(tmp_path: Path) -> None:
    text = (
        "sampling:\n  rate: ${env:RATE}\n"
        "receivers:\n  kafka:\n    topics: ${env:TOPICS}\n"
        "    group_id: rag-${env:TEAM}-${env:STAGE:-dev}\n"
        "judge:\n  model: ${env:MODEL:-openai/gpt-4o-mini}\n  api_base: ${env:BASE:-null}\n"
        "alerts:\n  webhooks:\n    - url: http://hooks/$${env:LITERAL}\n"
    )
    env = {"RATE": "0.25", "TOPICS": "[a, b]", "TEAM": "search", "STAGE": "", "MODEL": ""}
    config = _load(tmp_path, text, env)
    assert config.sampling.rate == 0.25
    assert config.receivers.kafka.topics == ["a", "b"]
    assert config.receivers.kafka.group_id == "rag-search-dev"  # empty counts as unset for :-
    assert config.judge.model == "openai/gpt-4o-mini" and config.judge.api_base is None
    assert config.alerts.webhooks[0].url == "http://hooks/${env:LITERAL}"


def test_env_reference_problems_name_key_and_variable(tmp_path: Path) -> None:
    text = "sampling:\n  rate: ${env:RATE}\njudge:\n  model: ${env:NO_SUCH_MODEL}\n"
    assert _problems(tmp_path, text, {"RATE": "0.5"}) == [
        "judge.model: environment variable NO_SUCH_MODEL is not set (${env:NO_SUCH_MODEL})"
    ]
    (problem,) = _problems(tmp_path, text, {"RATE": "3", "NO_SUCH_MODEL": "m"})
    assert problem.startswith("sampling.rate: ") and problem.endswith("(set by ${env:RATE})")
    (malformed,) = _problems(tmp_path, "judge:\n  model: ${env:1BAD}\n")
    assert malformed == "judge.model: ${env:1BAD}: '1BAD' is not an environment variable name"


# -- RAG_MONITOR_* variables -------------------------------------------------------------


def test_env_overrides_yaml(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "sampling:\n  rate: 0.5\n",
        {
            "RAG_MONITOR_SAMPLING__RATE": "0.25",
            "RAG_MONITOR_RECEIVERS__KAFKA__TOPICS": "[a, b]",
            "RAG_MONITOR_EVALUATORS": "[{name: local_safety}]",
            "UNRELATED": "x",
        },
    )
    assert config.sampling.rate == 0.25
    assert config.receivers.kafka.topics == ["a", "b"]
    assert [e.name for e in config.evaluators] == ["local_safety"]


def test_flag_variables_are_not_config_keys() -> None:
    flags = {
        "RAG_MONITOR_LOG_LEVEL": "debug",
        "RAG_MONITOR_LOG_FORMAT": "json",
        "RAG_MONITOR_CONFIG": "/etc/rag-monitor/config.yaml",
    }
    assert load_config(None, environ=flags) == load_config(None, environ={})


def test_env_problem_names_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(
            None, environ={"RAG_MONITOR_SAMPLING__RATE": "3", "RAG_MONITOR_SAMPLNG__RATE": "1"}
        )
    text = "\n".join(info.value.problems)
    assert "sampling.rate" in text and "(set by RAG_MONITOR_SAMPLING__RATE)" in text
    # A misspelt section is reported, not ignored: `__` marks a config key.
    assert (
        "samplng: unknown key; did you mean 'sampling'? (set by RAG_MONITOR_SAMPLNG__RATE)" in text
    )


def test_a_config_key_variable_with_one_underscore_is_reported_not_ignored() -> None:
    environ = {
        "RAG_MONITOR_SAMPLING_RATE": "0.5",
        "RAG_MONITOR_RECEIVERS_OTLP_GRPC_ENDPOINT": "0.0.0.0:4317",
        # Variables that name no config key are not the config's: a judge's key, a flag.
        "RAG_MONITOR_JUDGE_KEY": "sk-secret",
        "RAG_MONITOR_LOG_LEVEL": "debug",
    }
    with pytest.raises(ConfigError) as info:
        load_config(None, environ=environ)
    assert sorted(info.value.problems) == [
        "RAG_MONITOR_RECEIVERS_OTLP_GRPC_ENDPOINT: not read; receivers.otlp.grpc.endpoint is "
        "set by RAG_MONITOR_RECEIVERS__OTLP__GRPC__ENDPOINT (two underscores between levels)",
        "RAG_MONITOR_SAMPLING_RATE: not read; sampling.rate is set by "
        "RAG_MONITOR_SAMPLING__RATE (two underscores between levels)",
    ]
    # Only the judge's key set: nothing is read from it, the defaults load unchanged.
    assert load_config(None, environ={"RAG_MONITOR_JUDGE_KEY": "sk-secret"}) == load_config(
        None, environ={}
    )


def test_variables_nothing_reads_are_named_with_the_nearest_name(tmp_path: Path) -> None:
    flags = ("RAG_MONITOR_LOG_LEVEL", "RAG_MONITOR_LOG_FORMAT", "RAG_MONITOR_CONFIG")
    environ = {
        "RAG_MONITOR_LOGLEVEL": "debug",
        "RAG_MONITOR_PIPELINE_WORKER": "3",
        "RAG_MONITOR_FOO": "1",
        # Read: a flag, a config key, one with one underscore (a problem of its own) and
        # the variables the file names.
        "RAG_MONITOR_LOG_LEVEL": "debug",
        "RAG_MONITOR_SAMPLING__RATE": "0.5",
        "RAG_MONITOR_JUDGE_KEY": "sk-secret",
        "RAG_MONITOR_TOKEN": "tok",
    }
    path = tmp_path / "c.yaml"
    path.write_text(
        "judge: {api_key_env: RAG_MONITOR_JUDGE_KEY}\n"
        "alerts: {webhooks: [{url: 'https://hooks.example/${env:RAG_MONITOR_TOKEN}'}]}\n"
    )
    told: list[str] = []
    config = load_config(path, environ=environ, on_unread=told.append, read_elsewhere=flags)
    assert config.sampling.rate == 0.5
    assert told == [
        "RAG_MONITOR_LOGLEVEL: not read (no flag or config key has this name); "
        "did you mean RAG_MONITOR_LOG_LEVEL?",
        "RAG_MONITOR_PIPELINE_WORKER: not read (no flag or config key has this name); "
        "did you mean RAG_MONITOR_PIPELINE__WORKERS?",
        "RAG_MONITOR_FOO: not read (no flag or config key has this name); the flags' "
        "variables are RAG_MONITOR_LOG_LEVEL, RAG_MONITOR_LOG_FORMAT, RAG_MONITOR_CONFIG; "
        "config keys are set by RAG_MONITOR_<SECTION>__<KEY>",
    ]
    # Told also when the config has problems, which are reported as before.
    told.clear()
    with pytest.raises(ConfigError):
        load_config(
            None, environ={**environ, "RAG_MONITOR_SAMPLING_RATE": "1"}, on_unread=told.append
        )
    assert [line.split(":")[0] for line in told] == [
        "RAG_MONITOR_LOGLEVEL",
        "RAG_MONITOR_PIPELINE_WORKER",
        "RAG_MONITOR_FOO",
        "RAG_MONITOR_LOG_LEVEL",  # no flags were given this time
        "RAG_MONITOR_JUDGE_KEY",  # nor a file naming these
        "RAG_MONITOR_TOKEN",
    ]


def test_a_tab_in_the_yaml_is_named_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text("sampling:\n\trate: 0.5\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert info.value.problems == [
        f"{path}: line 2: invalid YAML: a tab at column 1; YAML indents with spaces only"
    ]


# -- durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("10m", 600),
        ("1.5h", 5400),
        ("1h30m", 5400),
        ("1m30s", 90),
        ("500ms", 0.5),
        ("2.5s", 2.5),
        ("250us", 0.00025),
        ("1d", 86400),
        ("0", 0),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "1", "-1s", "1x", "1h 30m", "h", "1.5.5s", "s30"])
def test_not_durations(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration(text)


def test_duration_keys_take_numbers_or_go_durations(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "trace_assembly: {idle_timeout_s: 15}\n"
        "pipeline: {evaluation_timeout_s: 1m, shutdown_timeout_s: 0}\n"
        "alerts: {evaluation_interval_s: 500ms}\n"
        "receivers:\n  kafka: {session_timeout_ms: 45s, heartbeat_interval_ms: 3000,"
        " max_poll_interval_ms: 5m}\n",
        {"RAG_MONITOR_JUDGE__BREAKER_COOLDOWN_S": "1m30s"},
    )
    assert config.trace_assembly.idle_timeout_s == 15
    assert config.pipeline.evaluation_timeout_s == 60 and config.pipeline.shutdown_timeout_s == 0
    assert config.alerts.evaluation_interval_s == 0.5
    assert config.judge.breaker_cooldown_s == 90
    kafka = config.receivers.kafka
    assert (kafka.session_timeout_ms, kafka.heartbeat_interval_ms) == (45_000, 3_000)
    assert kafka.max_poll_interval_ms == 300_000


# -- ranges ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        ("sampling: {rate: 1.5}", "sampling.rate"),
        ("sampling: {rate: -0.1}", "sampling.rate"),
        ("sampling: {overrides: [{route: /x, rate: 2}]}", "sampling.overrides.0.rate"),
        ("evaluators: [{name: local_safety, sample_rate: 1.01}]", "evaluators.0.sample_rate"),
        (
            "evaluators: [{name: local_safety}, {name: local_relevance,"
            " escalate_from: local_safety, band: [0.2, 1.2]}]",
            "evaluators.1.band.1",
        ),
        (
            "alerts: {rules: [{name: r, category: violence, max_defect_rate: 1.5}]}",
            "alerts.rules.0.max_defect_rate",
        ),
        (
            "alerts: {rules: [{name: r, category: violence, max_defect_rate: 0.1, confidence: 1}]}",
            "alerts.rules.0.confidence",
        ),
        (
            "alerts: {rules: [{name: r, category: violence, max_defect_rate: 0.1,"
            " min_samples: 0}]}",
            "alerts.rules.0.min_samples",
        ),
        ("pipeline: {queue_size: 0}", "pipeline.queue_size"),
        ("pipeline: {workers: -1}", "pipeline.workers"),
        ("pipeline: {max_routes: 0}", "pipeline.max_routes"),
        ("pipeline: {evaluation_timeout_s: .inf}", "pipeline.evaluation_timeout_s"),
        ("pipeline: {shutdown_timeout_s: -1}", "pipeline.shutdown_timeout_s"),
        ("receivers: {otlp: {max_request_bytes: 0}}", "receivers.otlp.max_request_bytes"),
        ("receivers: {kafka: {max_poll_records: 0}}", "receivers.kafka.max_poll_records"),
        ("trace_assembly: {max_open_traces: 0}", "trace_assembly.max_open_traces"),
        ("trace_assembly: {idle_timeout_s: .nan}", "trace_assembly.idle_timeout_s"),
        ("budget: {max_judge_cost_usd_per_day: 0}", "budget.max_judge_cost_usd_per_day"),
        ("judge: {retries: -1}", "judge.retries"),
        ("judge: {cache_size: -1}", "judge.cache_size"),
        ("judge: {prices: {m: {input: -1}}}", "judge.prices.m.input"),
        ("judge: {backoff_base_s: 30s, backoff_max_s: 20s}", "judge.backoff_base_s"),
        (
            "receivers: {otlp: {grpc: {endpoint: 'localhost:99999'}}}",
            "receivers.otlp.grpc.endpoint",
        ),
    ],
)
def test_numbers_out_of_range_name_their_key(tmp_path: Path, yaml_text: str, key: str) -> None:
    problems = _problems(tmp_path, yaml_text + "\n")
    assert any(p.startswith(f"{key}: ") for p in problems), problems


@pytest.mark.parametrize(
    ("yaml_text", "keys"),
    [
        (
            "trace_assembly: {queue_size: 200, queue_bytes: 1000000}",
            ["trace_assembly.queue_size", "trace_assembly.queue_bytes"],
        ),
        ("receivers: {otlp: {queue_size: 200}}", ["receivers.otlp.queue_size"]),
    ],
)
def test_keys_that_bounded_nothing_are_refused_naming_what_bounds(
    tmp_path: Path, yaml_text: str, keys: list[str]
) -> None:
    problems = _problems(tmp_path, yaml_text + "\n")
    assert sorted(p.split(": ", 1)[0] for p in problems) == sorted(keys), problems
    assert all("pipeline.queue_size" in p for p in problems), problems


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        (
            "trace_assembly: {queue_size: 10, max_open_traces: 0, max_open_trace: 1}",
            [
                "trace_assembly.queue_size: removed: the trace stage assembles",
                "trace_assembly.max_open_traces: must be greater than 0",
                "trace_assembly.max_open_trace: unknown key",
            ],
        ),
        (
            "receivers: {otlp: {queue_size: 10, max_request_bytes: 0, max_request_byte: 1}}",
            [
                "receivers.otlp.queue_size: removed: it set trace_assembly.queue_size",
                "receivers.otlp.max_request_bytes: must be greater than 0",
                "receivers.otlp.max_request_byte: unknown key",
            ],
        ),
        (
            "alerts: {rules: [{name: r, category: violence, max_defect_rate: 1.5,"
            " confidence: 0.99, min_sample: 1}]}",
            [
                "alerts.rules.0.confidence: replaced by false_page_every",
                "alerts.rules.0.max_defect_rate: must be less than or equal to 1",
                "alerts.rules.0.min_sample: unknown key",
            ],
        ),
    ],
)
def test_a_removed_key_is_reported_with_the_other_problems_of_its_section(
    tmp_path: Path, yaml_text: str, expected: list[str]
) -> None:
    """A removed key does not hide the rest of its section: it, a bad value and an
    unknown key beside it are each reported at their own path, in one error."""
    problems = _problems(tmp_path, yaml_text + "\n")
    assert len(problems) == len(expected), problems
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems)


def test_every_evaluator_has_a_threshold_scale() -> None:
    for name in known_evaluators():
        scale = threshold_scale(name)
        assert scale is None or scale in ((0.0, 1.0), (1.0, 5.0)), name
    assert threshold_scale("groundedness") == (1.0, 5.0)
    assert threshold_scale("chunk_relevance") == (0.0, 1.0)
    assert threshold_scale("relevancy") is None  # YES/NO
    assert threshold_scale("violence") is None  # severity


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("{name: groundedness, threshold: 4}", None),
        ("{name: groundedness, threshold: 7}", "7 is outside groundedness's scale 1..5"),
        ("{name: chunk_relevance, threshold: 0.7}", None),
        ("{name: f1, threshold: 2}", "2 is outside f1's scale 0..1"),
        ("{name: relevancy, threshold: 0.5}", "relevancy gives its verdict without a threshold"),
        ("{name: local_groundedness, threshold: 0}", None),
        ("{name: local_groundedness, threshold: 1}", None),
    ],
)
def test_thresholds_on_the_native_scale(tmp_path: Path, entry: str, problem: str | None) -> None:
    text = f"judge: {{model: openai/gpt-4o-mini}}\nevaluators: [{entry}]\n"
    if problem is None:
        _load(tmp_path, text)
    else:
        assert _problems(tmp_path, text) == [f"evaluators.0.threshold: {problem}"]


# -- syntax and structure ----------------------------------------------------------------


def test_unknown_wrong_type_and_missing_are_all_named(tmp_path: Path) -> None:
    problems = _problems(
        tmp_path, "sampling:\n  rate: lots\n  colour: blue\nevaluators:\n  - sample_rate: 0.5\n"
    )
    text = "\n".join(problems)
    assert "sampling.colour: unknown key" in text
    assert "sampling.rate:" in text
    assert "evaluators.0.name: required value is missing" in text


def test_a_key_of_several_forms_is_named_as_the_file_writes_it(tmp_path: Path) -> None:
    """`baseline.reference` is a name or a `{pinned}` mapping: a problem names the key the
    file wrote and only the form it wrote, never pydantic's label for the form tried."""
    rule = "  - name: r{k}\n    evaluator: local_groundedness\n    baseline: {{reference: {ref}}}\n"
    refs = ["lastweek", "{pinnned: 2026-01-01/2026-01-08}", '{pinned: "2026-01-08/2026-01-01"}']
    text = "alerts:\n  rules:\n" + "".join(rule.format(k=k, ref=r) for k, r in enumerate(refs))
    assert _problems(tmp_path, text) == [
        "alerts.rules.0.baseline.reference: must be 'trailing' or 'last_week'",
        "alerts.rules.1.baseline.reference.pinned: required value is missing",
        "alerts.rules.1.baseline.reference.pinnned: unknown key; did you mean 'pinned'?",
        "alerts.rules.2.baseline.reference.pinned: '2026-01-08/2026-01-01' must span at least "
        "an hour, start before end",
    ]


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        (
            "receivers:\n  kafka:\n    enabled: true\n",
            "receivers.kafka.bootstrap_servers: required",
        ),
        ("evaluators:\n  - name: no_such_thing\n", "evaluators.0.name: unknown evaluator"),
        (
            "evaluators:\n  - name: local_safety\n  - name: local_safety\n",
            "evaluators: listed twice: local_safety",
        ),
        (
            "alerts:\n  rules:\n    - name: r\n      evaluator: local_groundedness\n"
            "      category: violence\n      max_defect_rate: 0.1\n",
            "alerts.rules.0.evaluator: exactly one of evaluator or category",
        ),
        (
            "evaluators:\n  - name: local_safety\nalerts:\n  rules:\n    - name: r\n"
            "      evaluator: local_groundedness\n      max_defect_rate: 0.1\n",
            "alerts.rules.0.evaluator: 'local_groundedness' is not configured",
        ),
        ("sampling:\n  overrides:\n    - rate: 0.5\n", "sampling.overrides.0.service"),
        ("redaction:\n  patterns: ['(']\n", "redaction.patterns: pattern 0 is not a valid regex"),
        ("sampling: [1, 2\n", "line 2: invalid YAML"),
        ("- just\n- a list\n", "(top level): expected a mapping"),
    ],
)
def test_cross_field_and_syntax_problems(tmp_path: Path, yaml_text: str, expected: str) -> None:
    problems = _problems(tmp_path, yaml_text)
    assert any(expected in p for p in problems), problems


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.yaml", environ={})
    assert "cannot read" in info.value.problems[0]


# -- YAML that cannot stall loading -----------------------------------------------------


def _alias_bomb(levels: int = 9, fanout: int = 10) -> str:
    """The billion-laughs shape: each level is `fanout` aliases of the one below."""
    lines = ['a0: &a0 ["lol"]']
    for level in range(1, levels + 1):
        aliases = ",".join([f"*a{level - 1}"] * fanout)
        lines.append(f"a{level}: &a{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def test_check_config_refuses_an_alias_bomb(tmp_path: Path, cli: list[str]) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    assert len(bomb.read_bytes()) < 600
    result = subprocess.run(
        [*cli, "check-config", str(bomb)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "YAML aliases expand to" in result.stderr and "alias bomb" in result.stderr


def test_anchors_aliases_and_merge_keys_within_the_budget_are_read(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "sampling:\n  overrides:\n    - &route {route: /checkout, rate: 0.5}\n    - *route\n"
        "    - {<<: *route, service: shop, rate: 0.25}\n",
    )
    assert [(o.service, o.route, o.rate) for o in config.sampling.overrides] == [
        (None, "/checkout", 0.5),
        (None, "/checkout", 0.5),
        ("shop", "/checkout", 0.25),
    ]


def test_an_alias_of_itself_is_refused(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "sampling: &s {overrides: [*s]}\n")
    assert any("alias" in p for p in problems), problems


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("sampling:\n  rate: 0.5\n  rate: 0.4\n", "line 3: duplicate key 'rate' in sampling"),
        ("sampling: {rate: 0.5, rate: 0.4}\n", "duplicate key 'rate' in sampling"),
        ("sampling: {}\nsampling: {}\n", "line 2: duplicate key 'sampling' (first on line 1)"),
    ],
)
def test_duplicate_keys_are_named(tmp_path: Path, yaml_text: str, expected: str) -> None:
    problems = _problems(tmp_path, yaml_text)
    assert any(expected in p for p in problems), problems


def test_yaml_problems_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    for text, problem in [
        (
            "sampling:\n  rate: " + "[" * 100_000 + "]" * 100_000 + "\n",
            "line 2: invalid YAML: nested too deeply",
        ),
        (
            "sampling:\n  rate: 0.5\n  rate: 0.4\n",
            "line 3: duplicate key 'rate' in sampling (first on line 2)",
        ),
        (_alias_bomb(), "YAML aliases expand to more than 100000 more values"),
    ]:
        path.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config(path, environ={})
        assert info.value.problems[0].startswith(f"{path}: {problem}"), info.value.problems


def test_a_twelve_megabyte_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    count = 0
    with path.open("w") as out:
        out.write("sampling:\n  rate: 0.5\n  overrides:\n")
        while out.tell() < 12_000_000:
            out.write(
                f"    - {{service: svc-{count:07d}, route: /api/orders/{count}, rate: 0.25}}\n"
            )
            count += 1
    config = load_config(path, environ={})
    assert len(config.sampling.overrides) == count
    assert config.sampling.overrides[-1].service == f"svc-{count - 1:07d}"


# -- the effective configuration ---------------------------------------------------------


def test_effective_config_fills_defaults_and_masks_secrets(tmp_path: Path) -> None:
    text = (
        "receivers:\n  otlp:\n    protocols: {http: }\n    auth_token_env: OTLP_TOKEN\n"
        "alerts:\n  webhooks:\n    - url: https://bot:pa55word@hooks.example/x\n"
        "      headers: {Authorization: 'Bearer ${env:HOOK_TOKEN}'}\n"
    )
    config = _load(tmp_path, text, {"OTLP_TOKEN": "tok-123", "HOOK_TOKEN": "hook-456"})
    shown = yaml.safe_dump(effective_config(config))
    for secret in ("tok-123", "hook-456", "pa55word"):
        assert secret not in shown
    data = yaml.safe_load(shown)
    assert data["receivers"]["otlp"]["auth_token"] == MASK
    assert data["receivers"]["otlp"]["auth_token_env"] == "OTLP_TOKEN"
    assert data["alerts"]["webhooks"][0]["headers"] == {"Authorization": MASK}
    assert data["alerts"]["webhooks"][0]["url"] == f"https://bot:{MASK}@hooks.example/x"
    assert data["receivers"]["otlp"]["grpc"]["enabled"] is False
    assert data["pipeline"]["workers"] == 4  # a default, filled in
    # Without its secrets the shown configuration loads back to the same one.
    del data["receivers"]["otlp"]["auth_token"]
    data["alerts"]["webhooks"][0] = config.alerts.webhooks[0].model_dump()
    assert Config.model_validate(data, context={"environ": {"OTLP_TOKEN": "tok-123"}}) == config


def test_an_evaluator_entry_is_shown_from_its_name_and_its_next_revision_from_until() -> None:
    """The keys both hold (`RevisionKeys`) come after each one's opening keys."""
    following = {"until": "2027-01-01", "threshold": 0.5}
    config = Config.model_validate(
        {"evaluators": [{"name": "local_groundedness", "next": following}]}
    )
    entry = effective_config(config)["evaluators"][0]
    assert list(entry)[:3] == ["name", "sample_rate", "threshold"]
    assert list(entry["next"])[:3] == ["until", "share", "threshold"]


_yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["yes", "No", "0x1F", "0o17", "1_000", "~", "2024-01-01", ".inf", "<<", "="]),
)
_yaml_data = st.recursive(
    _yaml_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6) | st.integers(0, 9), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_yaml_data, st.sampled_from([None, True, False]))
def test_the_loader_reads_what_the_safe_loader_reads(data: Any, flow: bool | None) -> None:
    text = yaml.safe_dump(data, default_flow_style=flow)
    assert load_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {a: 1, b: 2}\nmore: &m {b: 3, c: 4}\nx: {<<: [*b, *m], c: 5}\n",
        "x: &x [1, &y {k: v}, *y]\ny: *x\n",
        "a: !!str 5\nb: !!float 3\nc: !!int '7'\nd: !!binary aGVsbG8=\ne: !!null ''\n",
        "'quoted': \"1\"\nplain: 1.5e3\n",
        "--- \nonly: one\n...\n",
        "",
    ],
)
def test_anchors_merges_tags_and_quoting_read_as_the_safe_loader_reads_them(text: str) -> None:
    assert load_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: 1\n---\nb: 2\n", "line 2: expected a single YAML document"),
        ("a: *nowhere\n", "line 1: the YAML alias *nowhere names no anchor before it"),
        ("a: !!set {x: null}\n", "unsupported YAML tag"),
        ("a: !custom 5\n", "unsupported YAML tag '!custom'"),
        ("? [1, 2]\n: x\n", "line 1: a mapping or list used as a key"),
        ("a: {<<: 5}\n", "a merge key (<<) takes a mapping"),
        (
            "s:\n  - {k: 1}\n  - {k: 1, k: 2}\n",
            "line 3: duplicate key 'k' in s.1 (first on line 3)",
        ),
    ],
)
def test_yaml_a_config_cannot_hold_is_refused_naming_the_line(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_yaml(text)
    assert problem in info.value.problems[0], info.value.problems


def test_a_large_document_loads_without_garbage_collections_and_the_collector_is_restored() -> None:
    """A load creates a node and a value per scalar, which trigger collections that walk
    all of them again (hundreds for this document, a 12 MB file loading several times
    slower): none runs while it loads or is written, only the young generation's once the
    collector is back on, which it is afterwards, after a refused document too, while a
    caller that had it off finds it off."""
    text = "".join(f"- {{service: svc-{i}, rate: 0.25}}\n" for i in range(20_000))
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        loaded = load_yaml(text)
        assert len(loaded) == 20_000
        assert collections in ([], [0]), collections
        collections.clear()
        assert load_yaml(dump_yaml(loaded)) == loaded
        assert collections in ([], [0], [0, 0]), collections
        with pytest.raises(ConfigError):
            load_yaml("a: 1\na: 2\n")
    finally:
        gc.callbacks.remove(count)
    assert gc.isenabled()
    gc.disable()
    try:
        load_yaml("a: 1\n")
        assert not gc.isenabled()
    finally:
        gc.enable()
