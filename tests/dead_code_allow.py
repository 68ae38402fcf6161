"""What the dead-code check (vulture over `monitor/`, `[tool.vulture]` in pyproject.toml, run
by tests/run.sh's lint step) reports that is not dead: each name once, with why. pydantic
validators and `model_config` are left out by the config itself.

Names marked "to review" are used only by tests, bench or nothing: their owners decide
whether they go. Vulture matches names, not places, so a name here covers every definition
of it; keep the list short and say where each one lives."""

from typing import Any

name: Any = None

_ = (
    # Hooks and signatures a library calls: OpenTelemetry's span and log record processors
    # (exporters/otlp_events.py), aiokafka's rebalance listener (receivers/kafka/
    # _rebalance.py), multiprocessing's context classes (pool/_processes.py), a protocol's
    # call (receivers/otlp/_wire.py), the TLS server-name callback (exporters/metrics_port.py).
    name.on_end,
    name.on_emit,
    name.force_flush,
    name.timeout_millis,
    name.on_partitions_revoked,
    name.on_partitions_assigned,
    name.Process,
    name.__call__,
    name.server_name,
    # Attributes set on a library's objects: onnxruntime's session options
    # (detector/pair_model.py), a logger (judge/client.py), litellm (judge/provider.py), the
    # OTLP response (receivers/otlp/_wire.py), a protobuf descriptor (spans/_lite.py).
    name.intra_op_num_threads,
    name.inter_op_num_threads,
    name.disabled,
    name.suppress_debug_info,
    name.rejected_spans,
    name.error_message,
    name.map_entry,
    # Fields read by name: config keys (config/_receivers.py), a convention's sources
    # (conventions/_entry.py, read field by field), a record's fields (records/__init__.py,
    # written to results lines), the build-info gauge kept registered (telemetry.py).
    name.auth_token_env,
    name.ssl_cafile,
    name.ssl_certfile,
    name.ssl_keyfile,
    name.request_input,
    name.tool_name,
    name.tool_result,
    name.expected_retrieved_context,
    name.latency_ms,
    name.build_info,
    # Imported for its side effect: the workers' scorers are built before the first record
    # (processors/evaluation/_preload.py).
    name.monitor,
    # Used by training/ (detector/pair_model.py).
    name.pair_encoder,
    # To review: used only by tests.
    name.bytes_bound,  # alerts/attribution/_attribution.py
    name.known_evaluators,  # evaluators/registry.py
    name.calls_per_record,  # evaluators/tlm.py
    name.exporting,  # exporters/otlp_events.py
    name.committable,  # receivers/kafka/_offsets.py
    name.put_many,  # processors/evaluation/_stage.py
    name.rules_built,  # processors/sampler.py
    name.CATEGORIES,  # detector/safety.py
    # To review: used nowhere.
    name.connections,  # receivers/otlp/_connections.py
    name.evidence_sentence,  # detector/contradiction.py (a field set, never read)
    name.slot_tokens,  # detector/slots.py (a field set, never read)
    name.PLACEHOLDERS,  # judge/templates.py
    name.UNTRUSTED,  # judge/templates.py
)
