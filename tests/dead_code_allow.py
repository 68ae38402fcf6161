"""What the dead-code check (vulture over `monitor/`, `[tool.vulture]` in pyproject.toml, run
by tests/run.sh's lint step) reports that is not dead: each name once, with why. pydantic
validators and `model_config` are left out by the config itself.

Vulture matches names, not places, so a name here covers every definition
of it; keep the list short and say where each one lives."""

from typing import Any

name: Any = None

_ = (
    # Hooks and signatures a library calls: OpenTelemetry's span and log record processors
    # (exporters/otlp_events.py), aiokafka's rebalance listener (receivers/kafka/
    # _rebalance.py), multiprocessing's context classes (shared/processes.py), a protocol's
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
    # A package's lazy names, which Python's import system calls (PEP 562):
    # processors/evaluation/__init__.py.
    name.__getattr__,
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
    # The GenAI schema's server tool call parts carry what the provider's tool was given
    # and returned (extraction/_messages.py): part of the model, read by no reader yet.
    name.server_tool_call,
    name.server_tool_call_response,
    # Fields read by name: config keys (config/_receivers.py), a convention's sources
    # (conventions/_entry.py, read field by field), a record's fields (records/__init__.py,
    # written to results lines).
    name.auth_token_env,
    name.ssl_cafile,
    name.ssl_certfile,
    name.ssl_keyfile,
    name.request_input,
    name.tool_name,
    name.tool_result,
    name.expected_retrieved_context,
    name.latency_ms,
    # Imported for its side effect: the workers' scorers are built before the first record
    # (processors/evaluation/_preload.py).
    name.monitor,
    # Used by training/ (detector/pair_model.py).
    name.pair_encoder,
    # Read by tests and benches only, each for a reason of its own: the per-entry memory
    # bound docs/alerts.md states, held by a test (alerts/attribution/_attribution.py); the
    # registry's names, which the contract test holds docs/contract.md to (evaluators/
    # registry.py); a record's cost in judge calls, checked against the calls made
    # (evaluators/tlm.py); a batch in export, a condition tests wait on instead of sleeping
    # (exporters/otlp_events.py); the finished prefix's offset, which the offset tracker's
    # tests follow apart from the commit metadata (receivers/kafka/_offsets.py); the stage's
    # waiting intake, the one benches and tests feed it through, as the trace stage feeds it
    # with `take` and `room` (processors/evaluation/_stage.py); the rules a boosts change
    # rebuilt, a cost otherwise seen only in time (processors/sampler.py); the categories the
    # safety screen names (detector/safety.py); `functools.lru_cache`'s interface on the
    # caches that admit what recurs, which benches clear and tests hold to their bounds
    # (shared/recurring.py, detector/cjk.py).
    name.bytes_bound,
    name.known_evaluators,
    name.calls_per_record,
    name.exporting,
    name.committable,
    name.put_many,
    name.rules_built,
    name.CATEGORIES,
    name.currsize,
    name.cache_info,
    name.cache_clear,
)
