"""Configuration: one YAML file, `${env:VAR}` references, `RAG_MONITOR_<SECTION>__<KEY>`
environment overrides.

A leaf package: it imports nothing of the pipeline. What only a component can judge — an
evaluator name, a judge's prompt, a threshold on a judge's native scale, the metrics port's
web config — is checked by that component after loading (`monitor.evaluators.
check_evaluators`, `monitor.exporters.metrics_port.load_web_security`, which `Service` and
`check-config` call).

The YAML is read by PyYAML's safe loader (libyaml's parser where installed) with bounds
(`_yaml.py`): duplicate keys, aliases that would expand past `MAX_ALIAS_EXPANSION` values
and nesting past `MAX_DEPTH` are refused before any value is built.
Unknown keys are rejected and every problem is reported as `path.to.key: what is wrong`
(`ConfigError.problems`). Defaults live in the models; rules that span several fields are
model validators. An empty file (or none) gives the embedded defaults: OTLP on loopback,
metrics on 0.0.0.0:9464, local evaluators only, every trace sampled.

The forms an OpenTelemetry Collector user writes are accepted as they are: the OTLP
receiver's `protocols: {grpc: ..., http: ...}`, Go durations (`1h30m`, `500ms`) and
`${env:VAR}` / `${env:VAR:-default}` references in values.

| file | job |
|---|---|
| `_fields.py` | the base `Section`, `ConfigError`, shared field types (durations, endpoints, rates, files, secrets) |
| `_receivers.py`, `_processing.py`, `_extraction.py`, `_evaluators.py`, `_outputs.py` | the sections, by the part of the pipeline they configure |
| `_root.py` | `Config`: all sections and the checks across them |
| `_extras.py` | which extra each feature that is off by default needs, and the problem when it is missing |
| `_yaml.py` | safe YAML reading (duplicate keys, alias budget, depth) |
| `_env.py` | `${env:...}` references and `RAG_MONITOR_*__*` overrides |
| `_loader.py` | `load_config` and the `key: problem` messages |
| `_masking.py` | `effective_config`: what `check-config` prints, secrets masked |
"""

from monitor.config._env import ENV_PREFIX
from monitor.config._evaluators import (
    DEFAULT_LOCAL_EVALUATORS,
    SHADOW_SHARE,
    TLM_PRESETS,
    EvaluatorConfig,
    Judge,
    NextRevision,
    Redaction,
    RedactionKind,
    Severity,
    TlmPreset,
    TlmWeights,
    TrustworthinessTlm,
)
from monitor.config._external import (
    EXTERNAL_PREFIX,
    GUARDRAIL_PREFIX,
    ExternalVerdicts,
    VerdictVocabulary,
    is_external,
)
from monitor.config._extraction import (
    SHIPPED_CONVENTIONS,
    AttributeSource,
    ConventionKind,
    ConventionMatch,
    ConventionPart,
    ConventionRagPrompt,
    EventSource,
    Extraction,
    MessageSource,
    UserConvention,
)
from monitor.config._extras import EXTRA_MODULES, missing_extra
from monitor.config._fields import (
    MASK,
    SECRET,
    ConfigError,
    Duration,
    Endpoint,
    Millis,
    Rate,
    ReadableFile,
    Seconds,
    SecretMarker,
    Section,
    is_loopback_host,
    mask_url,
    parse_duration,
)
from monitor.config._loader import load_config, validation_problems
from monitor.config._masking import effective_config
from monitor.config._outputs import (
    CONVERSATION_BUDGET,
    CONVERSATION_MAX_AGE,
    DEFAULT_RULES,
    SEVERITIES,
    WHERE_SUFFIX,
    AlertFleet,
    Alertmanager,
    Alerts,
    Exporters,
    OtlpExporter,
    PrometheusExporter,
    Webhook,
)
from monitor.config._processing import (
    AlwaysSample,
    Budget,
    Pipeline,
    RecordLimits,
    Sampling,
    SamplingOverride,
    TraceAssembly,
    available_cpus,
)
from monitor.config._receivers import (
    GrpcReceiver,
    HttpReceiver,
    KafkaConfig,
    OtlpReceiver,
    Receivers,
    ReceiverTls,
)
from monitor.config._root import Config
from monitor.config._rule_sections import (
    FALSE_PAGE_EVERY,
    AlertBaseline,
    AlertBoost,
    AlertBurnRate,
    AlertCohorts,
    AlertReference,
    AlertSlo,
    pinned_period,
)
from monitor.config._rules import (
    RULE_KEYS,
    RULE_KINDS,
    AbsoluteRule,
    AlertRule,
    CohortRule,
    JudgeChangedRule,
    RegressionRule,
    RuleBase,
    SloRule,
    alert_rule,
)
from monitor.config._yaml import (
    MAX_ALIAS_EXPANSION,
    MAX_DEPTH,
    dump_yaml,
    load_yaml,
    read_yaml_file,
)

__all__ = [
    "CONVERSATION_BUDGET",
    "CONVERSATION_MAX_AGE",
    "DEFAULT_LOCAL_EVALUATORS",
    "DEFAULT_RULES",
    "ENV_PREFIX",
    "EXTERNAL_PREFIX",
    "EXTRA_MODULES",
    "FALSE_PAGE_EVERY",
    "GUARDRAIL_PREFIX",
    "MASK",
    "MAX_ALIAS_EXPANSION",
    "MAX_DEPTH",
    "RULE_KEYS",
    "RULE_KINDS",
    "SECRET",
    "SEVERITIES",
    "SHADOW_SHARE",
    "SHIPPED_CONVENTIONS",
    "TLM_PRESETS",
    "WHERE_SUFFIX",
    "AbsoluteRule",
    "AlertBaseline",
    "AlertBoost",
    "AlertBurnRate",
    "AlertCohorts",
    "AlertFleet",
    "AlertReference",
    "AlertRule",
    "AlertSlo",
    "Alertmanager",
    "Alerts",
    "AlwaysSample",
    "AttributeSource",
    "Budget",
    "CohortRule",
    "Config",
    "ConfigError",
    "ConventionKind",
    "ConventionMatch",
    "ConventionPart",
    "ConventionRagPrompt",
    "Duration",
    "Endpoint",
    "EvaluatorConfig",
    "EventSource",
    "Exporters",
    "ExternalVerdicts",
    "Extraction",
    "GrpcReceiver",
    "HttpReceiver",
    "Judge",
    "JudgeChangedRule",
    "KafkaConfig",
    "MessageSource",
    "Millis",
    "NextRevision",
    "OtlpExporter",
    "OtlpReceiver",
    "Pipeline",
    "PrometheusExporter",
    "Rate",
    "ReadableFile",
    "ReceiverTls",
    "Receivers",
    "RecordLimits",
    "Redaction",
    "RedactionKind",
    "RegressionRule",
    "RuleBase",
    "Sampling",
    "SamplingOverride",
    "Seconds",
    "SecretMarker",
    "Section",
    "Severity",
    "SloRule",
    "TlmPreset",
    "TlmWeights",
    "TraceAssembly",
    "TrustworthinessTlm",
    "UserConvention",
    "VerdictVocabulary",
    "Webhook",
    "alert_rule",
    "available_cpus",
    "dump_yaml",
    "effective_config",
    "is_external",
    "is_loopback_host",
    "load_config",
    "load_yaml",
    "mask_url",
    "missing_extra",
    "parse_duration",
    "pinned_period",
    "read_yaml_file",
    "validation_problems",
]
