"""Every knob refused or honoured: each key of the configuration (the keys `docs/contract.md`
lists, `tests/project/test_contract.py` keeps the two equal) is set, alone, to values it
cannot honour, in a file that names every key at a good value; each must be refused with a
problem naming that key. Values of the wrong type, out of range, not finite, past the
ceilings every knob shares (a day for `*_s`, ten years for durations, 2**31 - 1 for whole
numbers, 4096 characters for text), empty text, and what each key means (a false-page
budget that pages by design, a boost that does not raise its rate, a URL that is no http
URL) are in one table; a key the table leaves out fails the test."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel

from monitor.cli.check_config import metrics_port
from monitor.config import Config, ConfigError, load_config
from monitor.evaluators.registry import evaluator_problems

# The trustworthiness options, every key at a good value.
TLM_GOOD: dict[str, Any] = {
    "preset": "low",
    "draws": 3,
    "temperature": 1.0,
    "reflection": True,
    "reflection_wordings": 1,
    "weights": {"consistency": 0.7, "reflection": 0.3},
    "agreement": "detector",
    "logprobs": False,
}

# A file naming every key at a good value (three rules: one per form).
GOOD: dict[str, Any] = {
    "receivers": {
        "otlp": {
            "grpc": {"enabled": True, "endpoint": "127.0.0.1:4317"},
            "http": {
                "enabled": True,
                "endpoint": "127.0.0.1:4318",
                "read_header_timeout_s": 10,
                "read_timeout_s": 30,
                "idle_timeout_s": 60,
                "max_connections": 100,
            },
            "tls": {"cert_file": "CERT", "key_file": "CERT", "client_ca_file": "CERT"},
            "auth_token_env": "TOKEN",
            "max_request_bytes": 1 << 20,
            "route_attribute": "http.route",
        },
        "kafka": {
            "enabled": False,
            "bootstrap_servers": ["kafka:9092"],
            "topics": ["otlp_spans"],
            "group_id": "rag-monitor",
            "group_instance_id": "pod-0",
            "encoding": "auto",
            "dead_letter_topic": "dead",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "PLAIN",
            "sasl_username": "monitor",
            "sasl_password_env": "KAFKA_PASSWORD",
            "ssl_cafile": "/etc/ssl/ca.pem",
            "ssl_certfile": "/etc/ssl/cert.pem",
            "ssl_keyfile": "/etc/ssl/key.pem",
            "session_timeout_ms": 10000,
            "heartbeat_interval_ms": 3000,
            "max_poll_interval_ms": 30000,
            "max_poll_records": 500,
            "auto_offset_reset": "earliest",
            "max_message_bytes": 1 << 20,
        },
    },
    "trace_assembly": {
        "idle_timeout_s": 10,
        "max_open_traces": 100,
        "max_open_bytes": 1 << 20,
        "log_events_wait_s": 5,
        "late_spans_wait_s": 4,
        "open_calls_wait_s": 120,
        "missing_parent_wait_s": 30,
    },
    "record_limits": {
        "query_chars": 1000,
        "document_chars": 1000,
        "context_chars": 10000,
        "response_chars": 1000,
        "max_documents": 10,
        "label_chars": 64,
    },
    "sampling": {
        "rate": 0.1,
        "overrides": [{"service": "shop", "route": "/ask", "rate": 0.5}],
        "always": {"negative_feedback": True, "error": True},
    },
    "budget": {
        "max_evaluations_per_minute": 60,
        "max_judge_tokens_per_hour": 100000,
        "max_judge_cost_usd_per_day": 5.0,
        "max_local_evaluations_per_minute": 6000,
    },
    "judge": {
        "model": "openai/gpt-4o-mini",
        "api_base": "http://127.0.0.1:8000/v1",
        "api_key_env": "JUDGE_KEY",
        "timeout_s": 30,
        "max_concurrency": 8,
        "retries": 3,
        "cache_size": 100,
        "breaker_failures": 5,
        "breaker_cooldown_s": 30,
        "backoff_base_s": 0.5,
        "backoff_max_s": 20,
        "prices": {"openai/gpt-4o-mini": {"input": 0.15, "output": 0.6}},
        "structured_output": "auto",
        "max_output_tokens": 512,
    },
    "redaction": {
        "enabled": False,
        "detectors": ["email"],
        "phone_region": "US",
        "patterns": ["ticket-[0-9]+"],
    },
    "evaluators": [
        {
            "name": "local_groundedness",
            "sample_rate": 1.0,
            "threshold": 0.5,
            "second_stage": False,
            "next": {
                "until": "2030-12-01T00:00:00Z",
                "share": 0.2,
                "threshold": 0.4,
                "second_stage": False,
            },
        },
        {
            "name": "groundedness",
            "model": "openai/gpt-4o-mini",
            "api_base": "http://127.0.0.1:8000/v1",
            "escalate_from": "local_groundedness",
            "band": [0.3, 0.7],
            "language": "auto",
        },
        {
            "name": "rubric",
            "rubric": "Is the answer polite?",
            "prompt": None,
            "next": {
                "until": "2030-12-01",
                "rubric": "Is the answer kind?",
                "prompt": None,
                "model": "openai/gpt-4o",
                "language": "en",
            },
        },
        {
            "name": "hate_unfairness",
            "severity_threshold": "medium",
            "next": {"until": "2030-12-01", "severity_threshold": "high"},
        },
        {
            "name": "trustworthiness_tlm",
            "tlm": copy.deepcopy(TLM_GOOD),
            "next": {"until": "2030-12-01", "tlm": {**copy.deepcopy(TLM_GOOD), "draws": 4}},
        },
    ],
    "alerts": {
        "rules": [
            {
                "name": "regression",
                "evaluator": "local_groundedness",
                "baseline": {
                    "window": "24h",
                    "min_samples": 500,
                    "season": "week",
                    "accept_after": "7d",
                    "reference": {"pinned": "2026-01-01T00:00:00Z/2026-01-08T00:00:00Z"},
                },
                "min_increase": 0.03,
                "test": "sequential",
                "measure": "verdicts",
                "window": "30m",
                "min_samples": 100,
                "false_page_every": "90d",
                "severity": "page",
                "boost": {"sample_rate": 0.5, "while_p_below": 0.05},
            },
            {"name": "canary", "evaluator": "local_groundedness", "cohorts": {"by": "version"}},
            {"name": "hate", "category": "hate_unfairness", "max_defect_rate": 0.01},
            {
                "name": "slo",
                "evaluator": "local_groundedness",
                "slo": {
                    "objective": 0.95,
                    "window": "28d",
                    # One row of each speed: a share of the budget, and a burn rate.
                    "burn_rates": [
                        {"budget": 0.02, "long": "1h", "short": "5m", "severity": "page"},
                        {"burn_rate": 2, "long": "3d", "short": "6h", "severity": "ticket"},
                    ],
                },
            },
        ],
        "severities": ["page", "ticket"],
        "false_page_every": "90d",
        "fleet": {
            "prometheus_url": "http://prometheus:9090",
            "selector": 'job="rag-monitor"',
            "query_interval_s": 15,
            "timeout_s": 5,
            "max_response_bytes": 1 << 20,
        },
        "alertmanager": {"url": "http://alertmanager:9093"},
        "evaluation_interval_s": 15,
        "state_file": "/var/lib/rag-monitor/alerts.state",
        "conversation_idle": "10m",
        "conversation_budget_bytes": 16 * 1024 * 1024,
        "trace_url": "http://tempo:3200/trace/{trace_id}",
    },
    "extraction": {
        "conventions": [
            {
                "name": "my-app",
                "kind": {
                    "attribute": "app.span.kind",
                    "values": {"llm": "model", "ask": "request"},
                },
                "match": {
                    "span_names": ["search"],
                    "attributes": ["app.hits"],
                    "role": "retrieval",
                },
                "input": [
                    {
                        "attribute": "app.request",
                        "encoding": "json",
                        "field": "question",
                        "event": "app.asked",
                        "role": "user",
                    }
                ],
                "output": [
                    {
                        "attribute": "app.response",
                        "encoding": "json",
                        "field": "answer",
                        "event": "app.answered",
                    }
                ],
                "documents": [
                    {
                        "attribute": "app.hits",
                        "encoding": "json",
                        "field": "hits",
                        "event": "app.hit",
                    }
                ],
                "model": [{"attribute": "app.llm", "encoding": "json", "field": "model"}],
                "input_tokens": [{"attribute": "app.usage", "encoding": "json", "field": "in"}],
                "output_tokens": [{"attribute": "app.usage", "encoding": "json", "field": "out"}],
                "conversation": [{"attribute": "app.session", "encoding": "text", "field": "id"}],
                "event_bodies": ["app.payload"],
                "marks": ["app."],
                "marked_names": ["app.ask"],
                "switch": "APP_TRACE_CONTENT=true",
                "joins_messages": True,
                "rag_prompts": [
                    {"header": "Context:", "line": True, "delimiter": "---", "question": "before"}
                ],
                "parts": [
                    {
                        "kind": "text",
                        "types": ["app_doc"],
                        "key": "appDoc",
                        "text": ["body"],
                        "name": ["source"],
                        "title": ["title"],
                        "id": ["doc_id"],
                        "data": ["bytes"],
                        "mime_type": ["mime"],
                        "uri": ["link"],
                        "file_id": ["file"],
                        "modality": "document",
                    }
                ],
                "placeholders": ["MASKED:"],
            },
            # A second, so that a name listed twice can be tried.
            {"name": "my-tools", "match": {"span_names": ["call_tool"], "role": "tool"}},
        ],
    },
    "external_verdicts": {
        "enabled": True,
        "services": ["shop"],
        "evaluators": ["external:relevance", "guardrail:pii"],
        "max_evaluators_per_service": 8,
        "max_labels_per_evaluator": 8,
        "max_label_chars": 32,
        "threshold": 0.6,
        "vocabularies": [
            {
                "name": "app-guard",
                "kind": "guardrail",
                "events": ["app.guard"],
                "span_key": "app.guard.name",
                "evaluator": ["app.guard.name"],
                "score": ["app.guard.score"],
                "label": ["app.guard.outcome"],
                "explanation": ["app.guard.why"],
                "category": ["app.guard.category"],
                "version": ["app.guard.version"],
                "error": ["app.guard.error"],
                "passing": ["ok"],
                "failing": ["bad"],
                "outcomes": {"deny": "blocked", "warn": "flagged", "allow": "passed"},
            }
        ],
    },
    "exporters": {
        "prometheus": {"endpoint": "127.0.0.1:9464", "web_config_file": "WEB", "debug_records": 5},
        "otlp": {"endpoint": "collector:4317", "protocol": "grpc", "signal": "spans"},
        "results_file": "/var/lib/rag-monitor/results.jsonl",
        "results_include_text": False,
        "include_explanations": False,
    },
    "pipeline": {
        "processes": 0,
        "queue_size": 100,
        "queue_bytes": 1 << 20,
        "workers": 4,
        "evaluation_timeout_s": 60,
        "extraction_timeout_s": 10,
        "shutdown_timeout_s": 20,
        "evaluate_suspect_records": False,
        "max_services": 50,
        "max_routes": 100,
        "max_versions": 20,
        "allowed_services": ["shop"],
        "allowed_routes": ["/ask"],
        "allowed_versions": ["1.0"],
        "label_idle_s": 600,
    },
    "audit": {
        "evaluator": "local_groundedness",
        "reference": "labels",
        "share": 0.05,
        "window": "24h",
        "min_audited": 30,
        "max_pending": 1000,
        "labels": {"file": "labels.jsonl", "http": True, "token_env": "TOKEN"},
        "anchors": {"enabled": True, "file": "CERT", "every": "6h", "alpha": 0.001},
    },
}
ENVIRON = {"TOKEN": "t0ken", "JUDGE_KEY": "k", "KAFKA_PASSWORD": "p"}

# Values wrong for every key of a kind.
NOT_A_FLAG = ["maybe", 2, [True]]
# "5" and "0.5" are numbers in quotes (the YAML writer quotes them).
NOT_A_COUNT = [-1, 1.5, 2**31, "many", "5", [1]]
NOT_A_NUMBER = [math.nan, math.inf, -1, "many", "0.5", [0.5]]
NOT_A_RATE = [-0.1, 1.5, math.nan, "half", "0.5"]
NOT_SECONDS = [-1, math.inf, 86_401, "25h", "9" * 400 + "s", "soon", [1]]
NOT_A_DURATION = ["0", "-1s", "3651d", "9" * 400 + "s", "30 minutes", 30]
NOT_TEXT = ["", "   ", "x" * 4097, [1]]
NOT_AN_ENDPOINT = ["", "127.0.0.1", ":4317", "127.0.0.1:99999", "127.0.0.1:port"]
NOT_A_URL = [
    "",
    "file:///etc/passwd",
    "javascript:alert(1)",
    "prometheus:9090",
    "//prometheus:9090",
    "http://",
    "http://prometheus:99999",
    "http://prometheus:0",
    "http://prometheus :9090",
    "ftp://prometheus:9090",
]
NOT_A_FILE = ["", "/no/such/file", "x" * 5000]
NOT_A_LIST_OF_TEXT = ["one", [""], [1], [["a"]]]
NOT_A_CHOICE = ["", "nope", 1]
# `*_ms` keys take text on purpose (`1500`, `1.5s`): a number in quotes is a duration.
NOT_MILLIS = [-1, 1.5, 2**31, "many", "1.5ms", [1]]

# key path (list indices as numbers) → the values it must refuse.
# The trustworthiness options' keys (on evaluators.4) → the values each must refuse.
TLM_BAD: dict[str, list[Any]] = {
    "evaluators.4.tlm.preset": [*NOT_A_CHOICE, "max"],
    "evaluators.4.tlm.draws": [*NOT_A_COUNT, 0, 21],
    "evaluators.4.tlm.temperature": [*NOT_A_NUMBER, 0, 2.5],
    "evaluators.4.tlm.reflection": NOT_A_FLAG,
    "evaluators.4.tlm.reflection_wordings": [*NOT_A_COUNT, 0, 3],
    "evaluators.4.tlm.weights.consistency": NOT_A_NUMBER,
    "evaluators.4.tlm.weights.reflection": NOT_A_NUMBER,
    "evaluators.4.tlm.agreement": [*NOT_A_CHOICE, "both"],
    "evaluators.4.tlm.logprobs": NOT_A_FLAG,
}

TABLE: dict[str, list[Any]] = {
    "receivers.otlp.grpc.enabled": NOT_A_FLAG,
    "receivers.otlp.grpc.endpoint": NOT_AN_ENDPOINT,
    "receivers.otlp.http.enabled": NOT_A_FLAG,
    "receivers.otlp.http.endpoint": NOT_AN_ENDPOINT,
    "receivers.otlp.http.read_header_timeout_s": [*NOT_SECONDS, 0, 0.05],
    "receivers.otlp.http.read_timeout_s": [*NOT_SECONDS, 0, 0.05],
    "receivers.otlp.http.idle_timeout_s": [*NOT_SECONDS, 0, 0.05],
    "receivers.otlp.http.max_connections": [*NOT_A_COUNT, 0],
    "receivers.otlp.tls.cert_file": NOT_A_FILE,
    "receivers.otlp.tls.key_file": NOT_A_FILE,
    "receivers.otlp.tls.client_ca_file": NOT_A_FILE,
    "receivers.otlp.auth_token": ["", "two words", "t0ken"],  # the last: written in the file
    "receivers.otlp.auth_token_env": [*NOT_TEXT, "UNSET_VARIABLE"],
    "receivers.otlp.max_request_bytes": [*NOT_A_COUNT, 0],
    "receivers.otlp.route_attribute": NOT_TEXT,
    "receivers.kafka.enabled": NOT_A_FLAG,
    "receivers.kafka.bootstrap_servers": NOT_A_LIST_OF_TEXT,
    "receivers.kafka.topics": NOT_A_LIST_OF_TEXT,
    "receivers.kafka.group_id": NOT_TEXT,
    "receivers.kafka.group_instance_id": NOT_TEXT,
    "receivers.kafka.encoding": NOT_A_CHOICE,
    "receivers.kafka.dead_letter_topic": NOT_TEXT,
    "receivers.kafka.security_protocol": [*NOT_A_CHOICE, "sasl_ssl"],
    "receivers.kafka.sasl_mechanism": NOT_TEXT,
    "receivers.kafka.sasl_username": NOT_TEXT,
    "receivers.kafka.sasl_password_env": NOT_TEXT,
    "receivers.kafka.ssl_cafile": NOT_TEXT,
    "receivers.kafka.ssl_certfile": NOT_TEXT,
    "receivers.kafka.ssl_keyfile": NOT_TEXT,
    # Below heartbeat_interval_ms, and above max_poll_interval_ms.
    "receivers.kafka.session_timeout_ms": [*NOT_MILLIS, 0, 3000, 30001],
    "receivers.kafka.heartbeat_interval_ms": [*NOT_MILLIS, 0, 10000],
    "receivers.kafka.max_poll_interval_ms": [*NOT_MILLIS, 0, 9999],
    "receivers.kafka.max_poll_records": [*NOT_A_COUNT, 0],
    "receivers.kafka.auto_offset_reset": [*NOT_A_CHOICE, "none"],
    "receivers.kafka.max_message_bytes": [*NOT_A_COUNT, 0],
    "trace_assembly.idle_timeout_s": [*NOT_SECONDS, 0],
    "trace_assembly.max_open_traces": [*NOT_A_COUNT, 0],
    "trace_assembly.max_open_bytes": [*NOT_A_COUNT, 0],
    "trace_assembly.log_events_wait_s": NOT_SECONDS,
    "trace_assembly.late_spans_wait_s": NOT_SECONDS,
    "trace_assembly.open_calls_wait_s": NOT_SECONDS,
    "trace_assembly.missing_parent_wait_s": NOT_SECONDS,
    "record_limits.query_chars": [*NOT_A_COUNT, 0],
    "record_limits.document_chars": [*NOT_A_COUNT, 0],
    "record_limits.context_chars": [*NOT_A_COUNT, 0],
    "record_limits.response_chars": [*NOT_A_COUNT, 0],
    "record_limits.max_documents": [*NOT_A_COUNT, 0],
    "record_limits.label_chars": [*NOT_A_COUNT, 31],
    "sampling.rate": NOT_A_RATE,
    "sampling.overrides.0.service": NOT_TEXT,
    "sampling.overrides.0.route": NOT_TEXT,
    "sampling.overrides.0.rate": NOT_A_RATE,
    "sampling.always.negative_feedback": NOT_A_FLAG,
    "sampling.always.error": NOT_A_FLAG,
    "budget.max_evaluations_per_minute": [*NOT_A_COUNT, 0],
    "budget.max_judge_tokens_per_hour": [*NOT_A_COUNT, 0],
    "budget.max_judge_cost_usd_per_day": [*NOT_A_NUMBER, 0],
    "budget.max_local_evaluations_per_minute": [*NOT_A_COUNT, 0],
    "judge.model": NOT_TEXT,
    "judge.api_base": NOT_A_URL,
    "judge.api_key_env": NOT_TEXT,
    "judge.timeout_s": [*NOT_SECONDS, 0.05],
    "judge.max_concurrency": [*NOT_A_COUNT, 0],
    "judge.retries": NOT_A_COUNT,
    "judge.cache_size": NOT_A_COUNT,
    "judge.breaker_failures": [*NOT_A_COUNT, 0],
    "judge.breaker_cooldown_s": [*NOT_SECONDS, 0],
    "judge.backoff_base_s": [*NOT_SECONDS, 0, 21],  # the last: above backoff_max_s
    "judge.backoff_max_s": [*NOT_SECONDS, 0, 0.1],  # the last: below backoff_base_s
    "judge.prices": ["cheap", {"m": {"input": -1}}, {"m": {"in": 1}}, {"m": {"input": math.nan}}],
    "judge.structured_output": [*NOT_A_CHOICE, True],
    "judge.max_output_tokens": [*NOT_A_COUNT, 0],
    "redaction.enabled": NOT_A_FLAG,
    "redaction.detectors": ["email", ["names"], [1]],
    "redaction.phone_region": [*NOT_TEXT, "ZZ", "united states"],
    "redaction.patterns": [*NOT_A_LIST_OF_TEXT, ["(unclosed"]],
    "evaluators.0.name": [*NOT_TEXT, "local_groundednes", "groundedness_v9"],
    "evaluators.0.sample_rate": NOT_A_RATE,
    "evaluators.0.threshold": [*NOT_A_NUMBER, 1.5],
    "evaluators.3.severity_threshold": [*NOT_A_CHOICE, "severe"],
    "evaluators.1.model": NOT_TEXT,
    "evaluators.2.prompt": ["x" * 65537, [1]],
    "evaluators.1.escalate_from": [*NOT_TEXT, "local_groundednes", "groundedness"],
    "evaluators.1.band": [[0.7, 0.3], [0, 2], [0.1], "0.3-0.7", [math.nan, 0.5]],
    "evaluators.2.rubric": ["", "x" * 65537, [1]],
    "evaluators.1.api_base": NOT_A_URL,
    "evaluators.1.language": [*NOT_A_CHOICE, "fr", "zh-CN"],
    **TLM_BAD,
    "evaluators.0.second_stage": NOT_A_FLAG,
    "evaluators.0.next.until": ["", "soon", 5, [1]],
    "evaluators.0.next.share": [0, *NOT_A_RATE],
    "evaluators.0.next.threshold": [*NOT_A_NUMBER, 1.5],
    "evaluators.0.next.second_stage": NOT_A_FLAG,
    "evaluators.3.next.severity_threshold": [*NOT_A_CHOICE, "severe"],
    "evaluators.2.next.model": NOT_TEXT,
    "evaluators.2.next.prompt": ["x" * 65537, [1]],
    "evaluators.2.next.rubric": ["", "x" * 65537, [1]],
    # A language the evaluator has no template in (rubric is written in en only).
    "evaluators.2.next.language": [*NOT_A_CHOICE, "zh", "auto"],
    # The next revision's tlm options are the entry's own kind (checked above).
    **{
        key.replace("evaluators.4.tlm.", "evaluators.4.next.tlm."): values
        for key, values in TLM_BAD.items()
    },
    "alerts.rules.0.name": [*NOT_TEXT, "two words", "x" * 129],
    "alerts.rules.0.evaluator": [*NOT_TEXT, "local_groundednes", "groundedness_v9"],
    "alerts.rules.2.category": [*NOT_TEXT, "hate"],
    "alerts.rules.2.max_defect_rate": NOT_A_RATE,
    "alerts.rules.0.baseline.window": [*NOT_A_DURATION, "30m"],  # not longer than window
    "alerts.rules.0.baseline.min_samples": [*NOT_A_COUNT, 0],
    # The last: a short baseline learns no hour-by-hour season.
    "alerts.rules.0.baseline.season": [*NOT_A_CHOICE, "month", "Week", True],
    # Shorter than baseline.window (24h): a rise must last a baseline window to be normal.
    "alerts.rules.0.baseline.accept_after": [*NOT_A_DURATION, "1h", "23h"],
    "alerts.rules.0.baseline.reference.pinned": [
        *NOT_TEXT,
        1,
        "2026-01-01T00:00:00Z",  # no end
        "2026-01-01T00:00:00Z - 2026-01-08T00:00:00Z",
        "last week/now",
        "2026-02-30T00:00:00Z/2026-03-08T00:00:00Z",  # no such day
        "2026-01-08T00:00:00Z/2026-01-01T00:00:00Z",  # ends before it starts
        "2026-01-01T00:00:00Z/2026-01-01T00:30:00Z",  # under an hour
        "2026-01-01T00:00:00Z/2026-01-08T00:00:00Z/2026-01-15T00:00:00Z",
    ],
    "alerts.rules.1.cohorts.by": [*NOT_A_CHOICE, "service"],
    "alerts.rules.0.min_increase": [*NOT_A_NUMBER, 0, 1],
    "alerts.rules.0.test": [*NOT_A_CHOICE, "cusum"],
    "alerts.rules.0.measure": [*NOT_A_CHOICE, "score"],
    "alerts.rules.0.window": [*NOT_A_DURATION, "24h"],  # not shorter than the baseline
    "alerts.rules.0.min_samples": [*NOT_A_COUNT, 0],
    # A budget that pages by design, one past any use, one that is no number at all.
    "alerts.rules.0.false_page_every": [*NOT_A_DURATION, "1ns", "1ms", "0.5s", "1s", "59m"],
    "alerts.rules.0.severity": [*NOT_TEXT, "two words"],
    # The base rate is sampling.rate (0.1) × the evaluator's sample_rate (1.0).
    "alerts.rules.0.boost.sample_rate": [*NOT_A_RATE, 0, 0.05, 0.1],
    "alerts.rules.0.boost.while_p_below": [*NOT_A_NUMBER, 0, 1],
    # No objective at all (0, 1), none at all, and one where no row can ever fire (the
    # rows' burn rates 13.44 and 2 times an error budget of 0.6 are above 1).
    "alerts.rules.3.slo.objective": [*NOT_A_NUMBER, 0, 1, 1.5, 0.4, None],
    # The last: shorter than the second row's long window (3d).
    "alerts.rules.3.slo.window": [*NOT_A_DURATION, "2d"],
    "alerts.rules.3.slo.burn_rates.0.budget": [*NOT_A_NUMBER, 0, 1.5, None],
    "alerts.rules.3.slo.burn_rates.1.burn_rate": [*NOT_A_NUMBER, 0, None],
    # Not longer than its short window (5m), longer than the SLO's window (28d).
    "alerts.rules.3.slo.burn_rates.0.long": [*NOT_A_DURATION, "5m", "1m", "29d"],
    # Not shorter than its long window (1h).
    "alerts.rules.3.slo.burn_rates.0.short": [*NOT_A_DURATION, "1h", "2h"],
    "alerts.rules.3.slo.burn_rates.0.severity": [*NOT_TEXT, "two words", "x" * 129],
    "alerts.false_page_every": [*NOT_A_DURATION, "1ns", "1ms", "0.5s", "1s", "59m"],
    # The good file's rules name both (a row of its SLO rule is a ticket).
    "alerts.severities": ["page", [], [1], ["two words"], ["page"]],
    "alerts.fleet.prometheus_url": NOT_A_URL,
    "alerts.fleet.selector": ["job=rag-monitor", 'job="a"}', '{job="a"}', 'job="a" or up'],
    "alerts.fleet.query_interval_s": [*NOT_SECONDS, 0, 0.1, 301],
    "alerts.fleet.timeout_s": [*NOT_SECONDS, 0, 61],
    "alerts.fleet.max_response_bytes": [*NOT_A_COUNT, 0, 1024],
    "alerts.alertmanager.url": NOT_A_URL,
    "alerts.webhooks.0.url": NOT_A_URL,
    "alerts.webhooks.0.headers": ["X-Key: k", ["X-Key"], {"X-Key": 1}],
    "alerts.evaluation_interval_s": [*NOT_SECONDS, 0, 0.1, 301],
    "alerts.state_file": NOT_TEXT,
    # Past 6h a conversation is handed on for its age, however busy: the idle time is moot.
    "alerts.conversation_idle": [*NOT_A_DURATION, "7h", "1d"],
    # Past 32 MiB the state file would not load within the chart's 512 MiB.
    "alerts.conversation_budget_bytes": [*NOT_A_COUNT, 0, 1024, 64 * 1024 * 1024],
    # No `{trace_id}` (or misspelt), or no http(s) link once it is filled in.
    "alerts.trace_url": [
        *NOT_TEXT,
        "http://tempo:3200/trace/",
        "http://tempo:3200/trace/{traceid}",
        *(url + "/{trace_id}" for url in NOT_A_URL),
    ],
    "extraction.conventions.1.name": [
        *NOT_TEXT,
        "two words",
        "a/b",
        "genai",  # a shipped convention's
        "my-app",  # the other convention's
    ],
    "extraction.conventions.0.kind.attribute": NOT_TEXT,
    "extraction.conventions.0.kind.values": [
        "model",
        ["model"],
        {},
        {"llm": "llm"},
        {"llm": 1},
        {"llm": ["model"]},
    ],
    "extraction.conventions.0.match.span_names": NOT_A_LIST_OF_TEXT,
    "extraction.conventions.0.match.attributes": NOT_A_LIST_OF_TEXT,
    "extraction.conventions.0.match.role": [*NOT_A_CHOICE, "retriever", "llm"],
    **{
        f"extraction.conventions.0.{part}.0.{key}": values
        for part in (
            "input",
            "output",
            "documents",
            "model",
            "input_tokens",
            "output_tokens",
            "conversation",
        )
        # The last encodings: a shipped convention's own, and `indexed`, whose attributes
        # are `<attribute>.N.<field>` entries and so no object to take `field` from.
        for key, values in (
            ("attribute", NOT_TEXT),
            ("encoding", [*NOT_A_CHOICE, "yaml", "JSON", "genkit", "indexed"]),
            ("field", NOT_TEXT),
        )
    },
    # Events carry messages, answers and documents; a message event names its role.
    **{
        f"extraction.conventions.0.{part}.0.event": NOT_TEXT
        for part in ("input", "output", "documents")
    },
    "extraction.conventions.0.input.0.role": [*NOT_A_CHOICE, "human", "model"],
    "extraction.conventions.0.event_bodies": NOT_A_LIST_OF_TEXT,
    "extraction.conventions.0.marks": NOT_A_LIST_OF_TEXT,
    "extraction.conventions.0.marked_names": NOT_A_LIST_OF_TEXT,
    "extraction.conventions.0.switch": [[1], {"a": 1}],
    "extraction.conventions.0.joins_messages": NOT_A_FLAG,
    # A header on a line of its own, and a delimiter line, are compared stripped.
    "extraction.conventions.0.rag_prompts.0.header": ["", "   ", " Context:", [1]],
    "extraction.conventions.0.rag_prompts.0.line": NOT_A_FLAG,
    "extraction.conventions.0.rag_prompts.0.delimiter": ["", " --- ", "-\n-", [1]],
    "extraction.conventions.0.rag_prompts.0.question": [*NOT_A_CHOICE, "after"],
    # A native part shape: its kind, how it is known, and where each value is.
    "extraction.conventions.0.parts.0.kind": [*NOT_A_CHOICE, "document", "image"],
    "extraction.conventions.0.parts.0.types": NOT_A_LIST_OF_TEXT,
    "extraction.conventions.0.parts.0.key": NOT_TEXT,
    **{
        f"extraction.conventions.0.parts.0.{key}": NOT_A_LIST_OF_TEXT
        for key in ("text", "name", "title", "id", "data", "mime_type", "uri", "file_id")
    },
    "extraction.conventions.0.parts.0.modality": NOT_TEXT,  # an open set, as the schema's
    "extraction.conventions.0.placeholders": NOT_A_LIST_OF_TEXT,
    "external_verdicts.enabled": NOT_A_FLAG,
    "external_verdicts.services": NOT_A_LIST_OF_TEXT,
    "external_verdicts.evaluators": [*NOT_A_LIST_OF_TEXT, ["relevance"], ["local_groundedness"]],
    "external_verdicts.max_evaluators_per_service": [*NOT_A_COUNT, 0, 257],
    "external_verdicts.max_labels_per_evaluator": [*NOT_A_COUNT, 0, 257],
    "external_verdicts.max_label_chars": [*NOT_A_COUNT, 7, 257],
    "external_verdicts.threshold": NOT_A_RATE,
    "external_verdicts.vocabularies.0.name": [*NOT_TEXT, "two words", "a/b"],
    "external_verdicts.vocabularies.0.kind": [*NOT_A_CHOICE, "judge"],
    "external_verdicts.vocabularies.0.events": NOT_A_LIST_OF_TEXT,
    "external_verdicts.vocabularies.0.span_key": NOT_TEXT,
    **{
        f"external_verdicts.vocabularies.0.{key}": NOT_A_LIST_OF_TEXT
        for key in (
            "evaluator",
            "score",
            "label",
            "explanation",
            "category",
            "version",
            "error",
            "passing",
            "failing",
        )
    },
    "external_verdicts.vocabularies.0.outcomes": [
        "deny",
        ["deny"],
        {"deny": "refused"},
        {"deny": 1},
    ],
    "exporters.prometheus.endpoint": NOT_AN_ENDPOINT,
    "exporters.prometheus.web_config_file": NOT_A_FILE,
    "exporters.prometheus.debug_records": [*NOT_A_COUNT, 10001],
    "exporters.otlp.endpoint": [
        "",
        "collector",
        "collector:99999",
        "file:///tmp/x",
        "http://collector:99999",
    ],
    "exporters.otlp.protocol": [*NOT_A_CHOICE, "http/json"],
    "exporters.otlp.signal": [*NOT_A_CHOICE, "metrics"],
    "exporters.results_file": NOT_TEXT,
    "exporters.results_include_text": NOT_A_FLAG,
    "exporters.include_explanations": NOT_A_FLAG,
    "pipeline.processes": [-1, 1.5, "many", 10_000],  # more than the CPUs
    "pipeline.queue_size": [*NOT_A_COUNT, 0],
    "pipeline.queue_bytes": [*NOT_A_COUNT, 0],
    "pipeline.workers": [*NOT_A_COUNT, 0, 1025],
    "pipeline.evaluation_timeout_s": [*NOT_SECONDS, 0.5],
    "pipeline.extraction_timeout_s": [*NOT_SECONDS, 0.5],
    "pipeline.shutdown_timeout_s": NOT_SECONDS,
    "pipeline.evaluate_suspect_records": NOT_A_FLAG,
    "pipeline.max_services": [*NOT_A_COUNT, 0],
    "pipeline.max_routes": [*NOT_A_COUNT, 0],
    "pipeline.max_versions": [*NOT_A_COUNT, 0],
    "pipeline.allowed_services": NOT_A_LIST_OF_TEXT,
    "pipeline.allowed_routes": NOT_A_LIST_OF_TEXT,
    "pipeline.allowed_versions": NOT_A_LIST_OF_TEXT,
    "pipeline.label_idle_s": [*NOT_SECONDS, 0.5],
    "audit.evaluator": [*NOT_TEXT, "local_groundednes"],
    "audit.reference": [*NOT_TEXT, "groundednes", "local_groundedness"],
    "audit.share": [*NOT_A_RATE, 0],
    "audit.window": NOT_A_DURATION,
    "audit.min_audited": [*NOT_A_COUNT, 1],
    "audit.max_pending": [*NOT_A_COUNT, 0],
    "audit.labels.file": NOT_TEXT,
    "audit.labels.http": NOT_A_FLAG,
    "audit.labels.token_env": [*NOT_TEXT, "UNSET_VARIABLE"],
    "audit.anchors.enabled": NOT_A_FLAG,
    "audit.anchors.file": NOT_A_FILE,
    "audit.anchors.every": NOT_A_DURATION,
    "audit.anchors.alpha": [*NOT_A_NUMBER, 0, 0.5],
}
# Keys that exclude another the good file sets: that one is left out with them.
EXCLUDES = {
    "receivers.otlp.auth_token": "receivers.otlp.auth_token_env",
    "alerts.webhooks": "alerts.fleet",
}
# Sections the good file leaves out for a key it sets (webhooks are refused with a fleet),
# put in with the keys under them.
ADDS = {
    "alerts.webhooks": [
        {"url": "https://hooks.example/page", "headers": {"X-Key": "${env:JUDGE_KEY}"}}
    ],
}


def _leaves(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key of the configuration that holds a value rather than a section."""
    keys = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if get_origin(annotation) is list:
            annotation = get_args(annotation)[0]
        if get_origin(annotation) is Annotated:  # a union with its discriminator (a rule)
            annotation = get_args(annotation)[0]
        # A form of a union may be annotated (a tagged form of `baseline.reference`).
        inner = [
            get_args(a)[0] if get_origin(a) is Annotated else a
            for a in (annotation, *get_args(annotation))
            if a is not type(None)
        ]
        # Each form of an entry that takes several (an alert rule's kinds) adds its keys.
        sections = [a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)]
        if sections and get_origin(annotation) in (None, Union, type(int | None)):
            for section in sections:
                keys += [k for k in _leaves(section, f"{prefix}{name}.") if k not in keys]
        else:
            keys.append(prefix + name)
    return keys


def _unindexed(path: str) -> str:
    return ".".join(part for part in path.split(".") if not part.isdigit())


def _dump(data: dict[str, Any]) -> str:
    return yaml.dump(data, Dumper=yaml.CSafeDumper, width=1 << 20)


class _Files:
    """Writes a config file, the certificate and web config it names written once. The
    sections equal to GOOD's are written as GOOD's were dumped, each once: a file is its
    sections dumped one after the other in the order `yaml.dump` sorts them, and a bad
    value changes one or two of them."""

    def __init__(self, tmp_path: Path) -> None:
        self._cert, self._web = tmp_path / "cert.pem", tmp_path / "web.yml"
        self._cert.write_text("not read here")
        self._web.write_text("basic_auth_users: {}\n")
        self._path = tmp_path / "monitor.yaml"
        self._good = {name: _dump({name: section}) for name, section in GOOD.items()}

    def write(self, data: dict[str, Any]) -> Path:
        text = "".join(
            self._good[name]
            if name in GOOD and _same(data[name], GOOD[name])
            else _dump({name: data[name]})
            for name in sorted(data)
        )
        text = text.replace("CERT", str(self._cert)).replace("WEB", str(self._web))
        self._path.write_text(text)
        return self._path


def _same(a: Any, b: Any) -> bool:
    """Equal, of the same types and written alike all the way down (`True == 1`, `1 == 1.0`,
    `-0.0 == 0.0`)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and repr(a) == repr(b)


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    return _Files(tmp_path).write(data)


def _load(path: Path) -> Config:
    """As `check-config` loads a file, in one pass (a judge's credentials aside: litellm's
    own checks, tested with the judges)."""
    return load_config(
        path, environ=ENVIRON, evaluator_check=evaluator_problems, checks=(metrics_port,)
    )


def _names(problem: str, key: str) -> bool:
    """Whether `problem` is about `key`: it names the key, or (a check across keys) a key
    beside it and says the key's name."""
    where, _, what = problem.partition(": ")
    parent, leaf = key.rpartition(".")[::2]
    return (
        where == key
        or where.startswith(key + ".")
        or (where.startswith(parent + ".") and leaf in what)
    )


def _with(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    *parents, key = path.split(".")
    for prefix, excluded in EXCLUDES.items():
        if path == prefix or path.startswith(prefix + "."):
            _drop(data, excluded)
    for prefix, section in ADDS.items():
        if path.startswith(prefix + "."):
            *above, name = prefix.split(".")
            node_: Any = data
            for part in above:
                node_ = node_[int(part)] if part.isdigit() else node_[part]
            node_[name] = copy.deepcopy(section)
    node: Any = data
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[key] = value
    return data


def _drop(data: dict[str, Any], path: str) -> None:
    *parents, key = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    del node[key]


def test_the_good_file_names_every_key_and_loads(tmp_path: Path) -> None:
    config = _load(_write(tmp_path, GOOD))
    assert config.alerts.fleet is not None
    assert {_unindexed(key) for key in TABLE} == set(_leaves(Config))


def test_every_bad_value_is_refused_naming_its_key(tmp_path: Path) -> None:
    accepted, unnamed = [], []
    files = _Files(tmp_path)
    for key, values in TABLE.items():
        for value in values:
            path = files.write(_with(GOOD, key, value))
            try:
                _load(path)
            except ConfigError as refused:
                if not any(_names(p, key) for p in refused.problems):
                    unnamed.append((key, value, refused.problems))
            else:
                accepted.append((key, value))
    assert not accepted, f"accepted: {accepted}"
    assert not unnamed, f"refused without naming the key: {unnamed}"
