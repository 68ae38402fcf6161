"""Property-based fuzzing of the input edges the lead owns: record normalisers, config loader.

Whatever arrives, the outcome is a RagRecord or a RecordError/ConfigError naming the
problem: never another exception, never a hang.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from monitor.config import ConfigError, load_config
from monitor.records import RagRecord, RecordError, parse_record

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
KEYS = st.sampled_from(
    [
        "request",
        "response",
        "retrieved_context",
        "question",
        "context",
        "answer",
        "ground_truth",
        "messages",
        "userText",
        "dataList",
        "responseContent",
        "trace_id",
        "request_id",
        "feedback",
        "history",
        "query",
        "role",
        "content",
        "citations",
        "input_tokens",
        "latency_ms",
    ]
)
SHAPED = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(JSON, SHAPED))
def test_any_json_becomes_a_record_or_a_named_error(data: object) -> None:
    try:
        record = parse_record(data)
    except RecordError as exc:
        assert exc.reason in {"not_object", "no_response", "invalid_field", "unknown_shape"}
        assert exc.detail
    else:
        assert isinstance(record, RagRecord) and record.response is not None
        json.dumps(record.model_dump())


SECTIONS = st.sampled_from(
    [
        "receivers",
        "trace_assembly",
        "sampling",
        "budget",
        "judge",
        "redaction",
        "evaluators",
        "alerts",
        "exporters",
        "pipeline",
        "otlp",
        "kafka",
        "rate",
        "overrides",
        "rules",
        "name",
    ]
)
CONFIG_TREE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 100)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(SECTIONS, children, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tree=CONFIG_TREE)
@example(tree={"evaluators": [[]]})  # an entry that is no mapping and no name
@example(tree={"evaluators": [{"name": ["local_groundedness"]}]})
def test_any_yaml_tree_loads_or_names_its_problems(tmp_path: Path, tree: object) -> None:
    import yaml

    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(tree))
    try:
        load_config(path, environ={})
    except ConfigError as exc:
        assert exc.problems and all(": " in p for p in exc.problems)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=200))
def test_any_text_file_loads_or_names_its_problems(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(text)
    try:
        load_config(path, environ={})
    except ConfigError as exc:
        assert exc.problems
