"""The one-line error of a listener that cannot bind (`run` logs it and exits 1): the
config key to change, the address, and why, with no traceback."""

from __future__ import annotations

import os
import socket


class ListenError(OSError):
    def __init__(self, key: str, address: str, reason: str) -> None:
        super().__init__(
            f"{key}: cannot listen on {address} ({reason}); set {key} to a free address"
        )


def reason_of(exc: OSError) -> str:
    """`address already in use` rather than asyncio's sentence around it."""
    return os.strerror(exc.errno).lower() if exc.errno else str(exc)


def bind_failure(address: str) -> str:
    """Why `host:port` cannot be bound, found by binding it (gRPC's own error says only
    that it failed); a generic reason when a plain bind succeeds."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    try:
        infos = socket.getaddrinfo(
            host, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, kind, proto, _, where = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(where)
    except OSError as exc:
        return reason_of(exc)
    except ValueError:
        return "not a host:port address"
    return "gRPC could not bind it"
