"""Every metric the monitor exports, declared once: name, type, labels, help (and buckets).

Code registers a metric by its name alone (`Telemetry.counter("late_spans")`, `.gauge`,
`.histogram`), on first use, with what this table says; `tests/project/test_contract.py`
fails while a name the code asks for, a row of this table or a row of the contract's
metric table (`docs/contract.md`, "Metrics") lacks its counterpart, or their types or
labels differ. Names are without the `rag_monitor_` prefix and a counter's `_total`.
Adding a metric is one row here (and its row in the contract); labels are one string,
space-separated. A row `at_start` is registered with the registry, so its family is on
`/metrics` before its first event; the others when a component first asks for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DURATION_BUCKETS", "METRICS", "SCORE_BUCKETS", "Metric"]

Kind = Literal["counter", "gauge", "histogram"]

SCORE_BUCKETS = tuple(round(0.1 * i, 1) for i in range(1, 11))
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()
    # Registered when the registry is made, so that `/metrics` lists it before its first
    # event (dashboards and `absent()` rules read the families every pipeline has).
    at_start: bool = False


def counter(name: str, labels: str, help: str, *, at_start: bool = False) -> Metric:
    return Metric(name, "counter", tuple(labels.split()), help, at_start=at_start)


def gauge(name: str, labels: str, help: str, *, at_start: bool = False) -> Metric:
    return Metric(name, "gauge", tuple(labels.split()), help, at_start=at_start)


def histogram(
    name: str, labels: str, help: str, buckets: tuple[float, ...], *, at_start: bool = False
) -> Metric:
    return Metric(name, "histogram", tuple(labels.split()), help, buckets, at_start)


_ROWS = (
    # -- intake --------------------------------------------------------------------------
    counter("spans_received", "receiver", "Spans accepted by a receiver.", at_start=True),
    counter(
        "otlp_discarded",
        "receiver signal",
        "OTLP items accepted and not used, by signal: metrics, and log records that are not GenAI events.",
    ),
    counter(
        "records_rejected",
        "receiver reason",
        "Input rejected as malformed, by reason.",
        at_start=True,
    ),
    counter(
        "http_connections_closed",
        "reason",
        "OTLP/HTTP connections closed by the monitor, or cut by their client in the middle of a request, by reason.",
    ),
    gauge("kafka_lag", "topic partition", "Messages behind the high watermark.", at_start=True),
    counter(
        "kafka_stage_calls_expired",
        "call",
        "Calls of the Kafka consumer thread into the trace stage that the event loop did not start within half of max_poll_interval_ms; withdrawn unrun.",
    ),
    # -- the trace stage -----------------------------------------------------------------
    gauge("open_traces", "", "Traces buffered by trace assembly."),
    gauge("open_trace_bytes", "", "Approximate bytes of the spans buffered by trace assembly."),
    counter(
        "traces_assembled", "trigger", "Traces released by trace assembly, by what released them."
    ),
    counter(
        "late_spans",
        "service outcome",
        "Spans that came after their trace's root, by service and outcome: joined (within trace_assembly.late_spans_wait_s) or what had released their trace.",
    ),
    counter(
        "traces_unsampled",
        "service",
        "Traces and records no evaluator samples, finished without extraction.",
    ),
    counter(
        "traces_not_rag",
        "service reason",
        'Sampled traces that gave no record, by service and reason: indexing, embedding_only, health_check (traces that ask nothing), unrecognised (no model call, retrieval or rag.* attribute recognised: logged); also counted in dropped_total{reason="not_rag"}.',
    ),
    counter("records", "service source", "RAG records entering the pipeline.", at_start=True),
    counter(
        "records_context_source",
        "service context_source",
        "Records entering the pipeline by where their context came from: retrieval_span, tool_result, convention, structure, prompt, record, none.",
        at_start=True,
    ),
    counter(
        "records_truncated",
        "part",
        "Records cut to record_limits, by part (query, context, documents).",
        at_start=True,
    ),
    counter(
        "records_incomplete",
        "service missing",
        "Records lacking a part some evaluators need.",
        at_start=True,
    ),
    counter(
        "records_suspect",
        "service reason",
        "Records whose extraction looks wrong (extraction_suspect), by reason; not evaluated unless pipeline.evaluate_suspect_records.",
    ),
    counter(
        "records_context_doubtful",
        "service reason",
        "Records whose documents were split out of the prompt with a sign of a wrong split (context_doubt), by service and reason; still evaluated.",
    ),
    counter(
        "records_partly_read",
        "service reason",
        "Records built from a trace some of whose attribute values could not be read (nested too deeply, not a valid value): read as text or left out, by reason.",
    ),
    counter(
        "label_overflow",
        "label",
        "Lookups of a service, version or route value that found no slot and read as 'other' (a record is looked up at several stages).",
    ),
    counter(
        "label_values_cut",
        "label",
        "Service, version or route values longer than record_limits.label_chars, cut to a prefix and a hash: each record built with one, and each lookup of one from a trace that gave no record.",
        at_start=True,
    ),
    # -- sampling and evaluation ---------------------------------------------------------
    counter(
        "sampling_decisions",
        "service evaluator decision",
        "Per-evaluator sampling decisions.",
        at_start=True,
    ),
    gauge(
        "sampling_rate",
        "service evaluator",
        "The rate each evaluator samples each service at now: its base rate, or the boost an alert rule raised while its evidence builds.",
    ),
    counter(
        "sampling_boost_refused",
        "service evaluator",
        "Evaluations a boost asked for beyond the base rate that a budget refused, leaving its room to the base sample (also counted as sampling_decisions_total{decision=over_budget}).",
    ),
    counter(
        "evaluations",
        "service version route evaluator outcome",
        "Evaluations by outcome; fail carries the trace id as an exemplar.",
        at_start=True,
    ),
    counter(
        "evaluations_skipped",
        "service evaluator reason",
        "Evaluations not run because the record lacks the evaluator's input (reason: no_query, no_context, no_response), or is in a language the embedded evaluator cannot read (reason: unsupported_language).",
        at_start=True,
    ),
    counter(
        "evaluations_unsupported_language",
        "service evaluator language",
        "Records an embedded evaluator gave no verdict because they are in a script it was not measured on (language: the script, e.g. thai, arabic, hangul; monitor/records/scripts.py).",
    ),
    histogram(
        "evaluation_score",
        "service evaluator",
        "Normalised evaluation scores (1 = good).",
        SCORE_BUCKETS,
        at_start=True,
    ),
    histogram(
        "evaluation_duration_seconds",
        "evaluator",
        "Time spent in one evaluator call.",
        DURATION_BUCKETS,
        at_start=True,
    ),
    counter(
        "safety_evaluations",
        "service version category severity",
        "Safety verdicts by harm category and severity.",
        at_start=True,
    ),
    counter(
        "guardrail_verdicts",
        "service version route guardrail category verdict",
        "An app's own guardrail verdicts read from its traces (guardrail: guardrail:<name>), by risk category and verdict (blocked, flagged, passed).",
    ),
    counter(
        "external_verdicts_refused",
        "service reason",
        "An app's own verdicts (evaluation results, guardrail verdicts) in its traces not taken, by reason (own, unreadable, no_record, service_not_allowed, evaluator_not_allowed, too_many_evaluators, too_many_labels, too_long).",
    ),
    counter(
        "shadow_revision_evaluations",
        "evaluator revision outcome",
        "Verdicts of evaluators' next revisions scoring in shadow (evaluators[].next) on records their evaluator also judged, by revision and outcome: for the alert rules' offset before the switch, never counted as the service's.",
    ),
    gauge(
        "evaluator_revision_info",
        "evaluator revision",
        "Always 1; the revision of each evaluator this process runs (what decides its verdicts), to join onto its evaluations (`alerts.fleet` does).",
        at_start=True,
    ),
    gauge("queue_depth", "stage", "Items waiting in a pipeline stage.", at_start=True),
    counter("dropped", "stage reason", "Items dropped, by stage and reason.", at_start=True),
    counter(
        "records_not_evaluated",
        "reason",
        "Records written to the sinks unevaluated (marked not_evaluated, an error result per evaluator that sampled them), by reason: shutdown_deadline.",
    ),
    gauge("worker_processes", "", "Evaluation worker processes running."),
    gauge(
        "worker_processes_busy",
        "",
        "Evaluation worker processes working on a batch (scoring or extracting).",
    ),
    counter(
        "worker_restarts", "reason", "Evaluation worker processes replaced, by reason (died, hung)."
    ),
    # -- LLM judges ----------------------------------------------------------------------
    counter("judge_requests", "model outcome", "Calls to an LLM judge.", at_start=True),
    counter("judge_tokens", "model direction", "Judge tokens used.", at_start=True),
    counter("judge_cost_usd", "model", "Judge spend in US dollars.", at_start=True),
    counter(
        "judge_retries",
        "model reason",
        "Judge attempts repeated after a retryable failure or an unreadable answer.",
    ),
    counter(
        "judge_answers",
        "model format result",
        "Answered judge calls by the format asked for (structured, free_form) and how the answer was read (valid, fallback, repaired, parse, truncated).",
    ),
    counter("judge_cache_lookups", "result", "Verdict cache lookups by result (hit, miss)."),
    gauge("judge_circuit_open", "model", "1 while the circuit breaker for a judge model is open."),
    counter(
        "redactions", "kind", "Personal data replaced before text was sent to a judge, by kind."
    ),
    counter(
        "retry_after_invalid",
        "client",
        "Retry-After values that were neither delta-seconds nor an HTTP-date, by client (judge, alertmanager, webhook); ignored: the client backed off on its own.",
        at_start=True,
    ),
    # -- the audit -----------------------------------------------------------------------
    gauge(
        "defect_rate_estimate",
        "service evaluator bound",
        "Estimated true defect rate of the audited evaluator over the audit window (bound: estimate, lower, upper of the 95 % interval); absent below audit.min_audited effective audited traces.",
    ),
    gauge(
        "audit_estimate_withheld",
        "evaluator",
        "1 while the evaluator's audited estimate is withheld: its reference judge has not been checked on the anchors yet, got fewer of them right than an audit needs, or judged them all one way.",
    ),
    gauge(
        "audit_raw_defect_rate",
        "service evaluator",
        "The audited evaluator's own defect rate over the same window and records.",
    ),
    gauge(
        "evaluator_miss_rate",
        "service evaluator",
        "Share of the reference's defects the evaluator passed, over the audit window.",
    ),
    gauge(
        "evaluator_false_alarm_rate",
        "service evaluator",
        "Share of the reference's passes the evaluator failed, over the audit window.",
    ),
    gauge(
        "audited_records",
        "service evaluator",
        "Audited records (with the reference's verdict) in the audit window.",
    ),
    counter(
        "audit_records",
        "service outcome",
        "Records the audit counted, by outcome: unaudited, audited, awaiting_label, reference_error (the reference failed on an audited record), reference_missing (it did not score it: over budget, or a part it needs was missing).",
    ),
    counter(
        "audit_label_posts_refused",
        "reason",
        "Posts to /audit/labels refused whole, by reason: no_credential, wrong_credential, too_large, not_json, too_deep.",
    ),
    counter(
        "audit_labels",
        "source outcome",
        "Labels fed back, by source (file, http) and outcome: joined, unknown_id, malformed, expired (its record's window has passed); unreadable: a read of the labels file that failed.",
    ),
    counter(
        "audit_pending_dropped",
        "service",
        "Audited records dropped from the pending memory (audit.max_pending) before their label came.",
    ),
    gauge("audit_pending_labels", "", "Audited records waiting for their label."),
    counter(
        "audit_traces_dropped",
        "service",
        "Open traces whose sums were dropped from memory (more than the audit keeps open) while their bucket was still in the window: a later record of one counts as another trace.",
    ),
    counter("audit_state_loads", "outcome", "Audit state file reads."),
    counter("audit_state_saves", "outcome", "Audit state writes."),
    counter(
        "audit_state_dropped",
        "part",
        "Parts of the audit state file left out as it was read (part: window, a bucket of a service's window; pending, a record awaiting a label; traces, an open trace's sums; file, a file of the right form that could not be restored), or as it was written (part: pending_over_size, traces_over_size: the oldest, past what the reader takes): a wrong type, a count or time out of bounds.",
    ),
    gauge(
        "judge_anchor_accuracy",
        "evaluator",
        "Share of the anchors the judge got right at its last check.",
    ),
    gauge(
        "judge_changed",
        "evaluator",
        "1 while the judge's verdicts on the anchors moved at its last check, else 0.",
    ),
    counter(
        "judge_anchor_evaluations",
        "evaluator outcome",
        "Anchor evaluations by outcome: right, wrong, error, over_budget.",
    ),
    # -- alert rules ---------------------------------------------------------------------
    gauge("defect_rate", "service rule", "Windowed defect rate of an alert rule.", at_start=True),
    gauge(
        "defect_rate_baseline",
        "service rule",
        "Defect rate a regression rule expects of a service now (its level and season).",
    ),
    gauge(
        "alert_samples",
        "service rule window",
        "Verdicts in an alert rule's current window, or behind its baseline's level (a rule pages only with min_samples in each).",
    ),
    gauge(
        "alert_baseline_ready",
        "service rule",
        "1 once a regression rule's baseline has learned what it needs (with a season: one complete day) for a service; 0 while it learns.",
    ),
    counter(
        "alert_baselines_started",
        "rule reason",
        "New baselines a rule started for a service, by reason (revision: the evaluator's revision changed).",
    ),
    gauge(
        "alert_evidence",
        "service rule",
        "How far a sequential regression test is towards a page, on a log scale (1 pages; see docs/alerts.md).",
    ),
    gauge(
        "alert_conversation_fallback",
        "service rule",
        "1 while a rule sets a service's conversation ids aside: most of its recent verdicts came in ids that are no conversations (one spans more than 6 h, holds thousands of verdicts, or most of the traffic); its verdicts are judged by the ids' sessions or by request meanwhile.",
    ),
    gauge(
        "alert_boost_active",
        "service rule",
        "1 while a rule with a boost raises its evaluator's sampling of a service.",
    ),
    counter(
        "alert_fleet_reads",
        "outcome",
        "Reads of the fleet's verdict counters from Prometheus (alerts.fleet), one per rule and query interval, by outcome (ok, or why the read gave nothing).",
    ),
    counter(
        "alert_fleet_series_ignored",
        "reason",
        "Series of the fleet's answers not counted as verdicts, by reason (malformed, bad_value: not finite or negative, fell: below the value counted up to).",
    ),
    gauge(
        "alert_fleet_last_read_timestamp_seconds",
        "rule",
        "When each fleet rule last read the fleet's counters (the reader's start until its first read).",
    ),
    gauge(
        "alert_firing",
        "service rule severity cohort",
        "1 while an alert rule fires (cohort: the cohort a cohort rule judges, else empty).",
        at_start=True,
    ),
    gauge(
        "alert_senders_flagged",
        "service rule",
        "Sender keys a regression rule's sender screen flags now (listed on /alerts): their verdicts stand apart from the other senders' and are expected at their own clean rate.",
    ),
    gauge(
        "alert_sender_screen_blind",
        "service rule reason",
        "1 while a regression rule's sender screen cannot tell the service's senders apart, by reason (one_sender: every verdict under one key; full: most under keys it cannot follow); absent while it can.",
    ),
    gauge(
        "cohort_defect_rate",
        "service rule cohort",
        "Defect rate of one cohort of a service in a cohort rule's window.",
    ),
    gauge(
        "alert_cohort_samples",
        "service rule cohort",
        "Verdicts of one cohort of a service in a cohort rule's window (a cohort is judged only with min_samples in it and in the rest of its service).",
    ),
    gauge(
        "alert_slice",
        "service rule cohort dimension value",
        "Share of a firing alert's excess carried by a slice the page names (a value of a dimension: version, model, route, source, documents, context, tool, language, topic); present while it fires.",
    ),
    histogram(
        "alert_evaluation_duration_seconds",
        "",
        "Time one evaluation of every alert rule took (judging, gauges, what to send).",
        DURATION_BUCKETS,
    ),
    gauge(
        "alert_last_evaluation_timestamp_seconds",
        "",
        "When the alert rules were last evaluated, in seconds since the epoch; it stops moving while the alert loop is stuck or failing.",
    ),
    counter(
        "alert_notifications",
        "target outcome",
        "Alerts handed to Alertmanager/webhooks, by outcome (sent, retried, failed, dropped).",
        at_start=True,
    ),
    counter(
        "alert_state_loads",
        "outcome",
        "Alert state file reads at start, by outcome (loaded, missing, stale, foreign, corrupt, too_large).",
    ),
    counter("alert_state_saves", "outcome", "Alert state file writes, by outcome (ok, error)."),
    counter(
        "alert_conversations_evicted",
        "state",
        "Conversations the alert rules forgot early, oldest first, to keep their memory within its budget, by state (open: closed into its unit early; closed: no longer remembered).",
    ),
    counter(
        "alert_state_entries_dropped",
        "when",
        "Alert state entries (one rule and service) dropped because they could not be restored from the state file or evaluated, by when (load, evaluation).",
    ),
    gauge(
        "slo_error_budget_remaining",
        "service rule",
        "Share of an SLO rule's error budget left for a service over the SLO's window: 1 untouched, 0 spent, below 0 overspent.",
    ),
    gauge(
        "slo_burn_rate",
        "service rule window",
        "How fast a service spends an SLO rule's error budget over a window: the defect rate over the error budget (1 spends exactly the budget over the SLO's window).",
    ),
    # -- outputs and the process ---------------------------------------------------------
    gauge(
        "results_file_writable",
        "",
        "1 while the results file takes writes, 0 after a failed write until one succeeds.",
    ),
    counter(
        "results_file_write_failures",
        "",
        "Failed attempts to append to the results file (the lines are retried).",
    ),
    counter(
        "http_requests_rejected",
        "reason",
        "Requests to the metrics port refused, by reason (unauthorized).",
    ),
    counter(
        "web_config_reloads",
        "outcome",
        "Re-reads of the metrics port's web config after a change, by outcome (ok, error).",
    ),
    gauge(
        "build_info",
        "version python",
        "Always 1; the labels say which rag-monitor and Python are running.",
        at_start=True,
    ),
)

METRICS: dict[str, Metric] = {row.name: row for row in _ROWS}
