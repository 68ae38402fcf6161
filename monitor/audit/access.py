"""Who may send labels, and see which records await one: labels move the audited estimate,
so only a sender with a credential may post them — a bearer token from the environment
(`audit.labels.token_env`), or the metrics port's web config (basic auth users, or client
certificates required) — or anyone on the host where the metrics port listens on loopback.
The request ids awaiting a label (`GET /audit`) are shown behind the same guard."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from monitor.config import ConfigError, is_loopback_host
from monitor.config._audit import Audit

TOKEN_KEY = "audit.labels.token_env"


@dataclass(frozen=True, slots=True)
class LabelAccess:
    """`token`: the bearer token a label sender presents (None: none is asked here).
    `loopback`: the metrics port listens on loopback only; `web_config_asks`: its web
    config asks every request for a credential. Either way every request that reaches the
    audit's routes is guarded."""

    token: str | None = None
    loopback: bool = True
    web_config_asks: bool = False

    @property
    def guarded(self) -> bool:
        return self.loopback or self.web_config_asks

    @property
    def by_web_config(self) -> bool:
        """The web config alone guards label posts: it must keep asking (a reload that
        stops asking is not taken)."""
        return self.token is None and not self.loopback

    def refusal(self, authorization: str | None) -> str | None:
        """Why a label post with this `Authorization` header is refused (`no_credential`,
        `wrong_credential`), or None."""
        if self.token is None:
            return None if self.guarded else "no_credential"
        scheme, _, value = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            return "no_credential"
        if not hmac.compare_digest(value.strip().encode(), self.token.encode()):
            return "wrong_credential"
        return None

    def shows_awaiting(self, authorization: str | None) -> bool:
        """Whether `GET /audit` with this header lists the request ids awaiting a label."""
        return self.guarded or (self.token is not None and self.refusal(authorization) is None)


def label_access(audit: Audit, endpoint: str, web_config_asks: bool) -> LabelAccess:
    """Who may post labels to the metrics port on `endpoint`; raises `ConfigError` where
    `audit.labels.http` would take them from anyone who reaches it."""
    problem = open_labels_problem(audit, endpoint, web_config_asks)
    if problem is not None:
        raise ConfigError([problem])
    loopback = is_loopback_host(endpoint.rpartition(":")[0])
    return LabelAccess(audit.labels.token, loopback, web_config_asks)


def open_labels_problem(audit: Audit, endpoint: str, web_config_asks: bool) -> str | None:
    """Why `audit.labels.http` may not be served on the metrics port's `endpoint`: reachable
    from other hosts, with no token and a web config that asks for no credential (None: it
    may)."""
    host = endpoint.rpartition(":")[0]
    if not audit.labels.http or is_loopback_host(host) or web_config_asks:
        return None
    if audit.labels.token is not None:
        return None
    return (
        f"audit.labels.http: POST /audit/labels sets the audited estimate and the metrics port "
        f"on {host} is reachable from other hosts with no credential asked; name the "
        f"variable holding a bearer token in {TOKEN_KEY}, give the metrics port a web config "
        "with basic_auth_users (or client certificates required), bind "
        "exporters.prometheus.endpoint to a loopback address (127.0.0.1), or feed labels "
        "through audit.labels.file"
    )
