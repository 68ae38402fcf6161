"""The process's one log: every line, the monitor's and its libraries', goes through the
root logger's handler on stderr, as text or as one JSON object per line. stdout is left
to what a command prints on purpose (replay's summary, check-config's YAML).

Libraries that install a handler of their own on their logger (litellm writes its INFO
and DEBUG lines to stdout that way) are adopted: their stream handlers are removed and
their records propagate to the root handler, formatted like the rest. A library that adds
its handler as it is imported, and logs while it imports, has its loggers routed to the
root handler before the import (`route_to_root`).
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import UTC, datetime

from monitor.shared.json_lines import json_line

# gRPC's C core writes its own lines to stderr (a failed bind, say), outside this log; the
# failures reach the monitor as exceptions, which it logs. Read when gRPC is imported, so
# the CLI imports this module before anything imports gRPC; a value set by the user wins.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, RFC 3339), level, logger, message, and
    exception (the formatted traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json_line(entry)


def configure_logging(level: str, fmt: str) -> None:
    """The root handler on stderr at `level` ("info", ...), `fmt` "text" or "json"."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonLogFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    # Python warnings become log lines too, so a JSON log stays one object per line.
    logging.captureWarnings(True)
    adopt_library_loggers()


class _RootHandlersOnly(logging.Filter):
    """On a library's logger: hands each record to the root logger's handlers and stops it
    there, so that a handler the library puts on its own logger never writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        for handler in logging.getLogger().handlers:
            if record.levelno >= handler.level:
                handler.handle(record)
        return False


_ROOT_HANDLERS_ONLY = _RootHandlersOnly()


def route_to_root(*names: str) -> None:
    """Send the records of the loggers `names` to the root handler only, whatever handlers
    the library adds to them later. Called again after the library's import, the filter
    moves behind the library's own (litellm scrubs secrets from its records in one)."""
    for name in names:
        logger = logging.getLogger(name)
        logger.removeFilter(_ROOT_HANDLERS_ONLY)
        logger.addFilter(_ROOT_HANDLERS_ONLY)


def adopt_library_loggers(*quiet: str) -> None:
    """Route every library logger's records to the root handler: remove the stream
    handlers libraries put on their own loggers and let the records propagate. The
    loggers named in `quiet` log per request at INFO; they are held at WARNING unless
    the process logs at DEBUG."""
    root = logging.getLogger()
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if not isinstance(logger, logging.Logger) or name.split(".")[0] == "monitor":
            continue
        own = [
            h
            for h in logger.handlers
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
        ]
        for handler in own:
            logger.removeHandler(handler)
        if own:
            logger.propagate = True
    for name in quiet:
        if root.level > logging.DEBUG:
            logging.getLogger(name).setLevel(logging.WARNING)
