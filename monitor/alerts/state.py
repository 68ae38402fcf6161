"""The alert engine's state file (`alerts.state_file`): windows and firing states across
restarts.

One JSON object, `{"format": FORMAT, "version": VERSION, "saved_at": ..., "rules": {...}}`,
written to a temporary file in the same directory and moved over the old one
(`os.replace`), so a reader sees the old or the new file, never half of one. Its size is
bounded by rules x `pipeline.max_services` (x the cohorts of a cohort rule) x window
slices; a file larger than
`MAX_BYTES` is not read. Loading never raises: a missing, oversized, corrupt, foreign,
newer-version or stale file gives empty state, a log line and
`rag_monitor_alert_state_loads_total{outcome}` (JSON nested too deeply among them). An entry
(one rule and service) holding what cannot be restored — NaN, an infinity, a number past
float's range, a wrong type — is left out alone (`alert_state_entries_dropped_total{when="load"}`).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

FORMAT = "rag-monitor-alert-state"
VERSION = 2
MAX_BYTES = 64 * 1024 * 1024


class StateFile:
    def __init__(self, path: str, telemetry: Telemetry) -> None:
        self.path = Path(path)
        self._loads = telemetry.counter(
            "alert_state_loads",
            "Alert state file reads at start, by outcome (loaded, missing, stale, "
            "foreign, corrupt, too_large).",
            ("outcome",),
        )
        self._saves = telemetry.counter(
            "alert_state_saves", "Alert state file writes, by outcome (ok, error).", ("outcome",)
        )

    def load(self, now: float, max_age_s: float) -> dict[str, Any]:
        """The saved rules (`{}` when there is nothing usable; the reason is logged and
        counted). A file saved more than `max_age_s` before `now` is stale: every window
        it holds has expired."""
        outcome, rules = self._read(now, max_age_s)
        self._loads.labels(outcome).inc()
        return rules

    def _read(self, now: float, max_age_s: float) -> tuple[str, dict[str, Any]]:
        try:
            size = self.path.stat().st_size
            if size > MAX_BYTES:
                log.error(
                    "alert state file %s is %d bytes (over %d): starting empty",
                    self.path,
                    size,
                    MAX_BYTES,
                )
                return "too_large", {}
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            log.info("alert state file %s does not exist yet: starting empty", self.path)
            return "missing", {}
        except (OSError, ValueError, RecursionError) as exc:
            log.error("alert state file %s is unreadable (%s): starting empty", self.path, exc)
            return "corrupt", {}
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            log.error("%s is not an alert state file of rag-monitor: starting empty", self.path)
            return "foreign", {}
        if data.get("version") != VERSION:
            log.error(
                "alert state file %s has version %r (this build reads %d): starting empty",
                self.path,
                data.get("version"),
                VERSION,
            )
            return "foreign", {}
        saved_at, rules = data.get("saved_at"), data.get("rules")
        if (
            isinstance(saved_at, bool)
            or not isinstance(saved_at, int | float)
            or not abs(saved_at) < 1e12
            or not isinstance(rules, dict)
        ):
            log.error("alert state file %s lacks saved_at or rules: starting empty", self.path)
            return "corrupt", {}
        if now - saved_at > max_age_s:
            log.warning(
                "alert state file %s was saved %.0f s ago, longer than the longest window "
                "(%.0f s): starting empty",
                self.path,
                now - saved_at,
                max_age_s,
            )
            return "stale", {}
        return "loaded", rules

    def save(self, now: float, rules: dict[str, Any]) -> None:
        """Writes the state atomically; a failure is logged and counted, never raised."""
        body = json.dumps(
            {"format": FORMAT, "version": VERSION, "saved_at": now, "rules": rules},
            separators=(",", ":"),
        ).encode()
        tmp: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
            with os.fdopen(fd, "wb") as out:
                out.write(body)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
            tmp = None
            self._saves.labels("ok").inc()
        except OSError as exc:
            log.error("could not write alert state file %s: %s", self.path, exc)
            self._saves.labels("error").inc()
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
