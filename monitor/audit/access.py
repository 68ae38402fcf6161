"""Who may send labels, and see which records await one: labels move the audited estimate,
so only a sender with a credential may post them — a bearer token from the environment
(`audit.labels.token_env`), or the metrics port's web config (basic auth users, or client
certificates required). A loopback address is no credential: a sidecar's loopback is
shared by every container of its pod, so `audit.labels.http` without either is refused
whatever the address. The request ids awaiting a label (`GET /audit`) are shown behind the
same guard."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from monitor.config import ConfigError
from monitor.config._audit import Audit

TOKEN_KEY = "audit.labels.token_env"


@dataclass(frozen=True, slots=True)
class LabelAccess:
    """`token`: the bearer token a label sender presents (None: none is asked here).
    `web_config_asks`: the metrics port's web config asks every request for a credential
    (its middleware checks it before the audit's routes see the request). With neither,
    nothing is admitted and no awaiting id is shown."""

    token: str | None = None
    web_config_asks: bool = False

    @property
    def by_web_config(self) -> bool:
        """The web config alone guards label posts: it must keep asking (a reload that
        stops asking is not taken)."""
        return self.token is None

    def refusal(self, authorization: str | None) -> str | None:
        """Why a label post with this `Authorization` header is refused (`no_credential`,
        `wrong_credential`), or None."""
        if self.token is None:
            return None if self.web_config_asks else "no_credential"
        scheme, _, value = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            return "no_credential"
        if not hmac.compare_digest(value.strip().encode(), self.token.encode()):
            return "wrong_credential"
        return None

    def shows_awaiting(self, authorization: str | None) -> bool:
        """Whether `GET /audit` with this header lists the request ids awaiting a label."""
        if self.web_config_asks:
            return True  # the request passed the web config's credential check
        return self.token is not None and self.refusal(authorization) is None


def label_access(audit: Audit, endpoint: str, web_config_asks: bool) -> LabelAccess:
    """Who may post labels to the metrics port on `endpoint`; raises `ConfigError` where
    `audit.labels.http` would take them with no credential asked."""
    problem = open_labels_problem(audit, endpoint, web_config_asks)
    if problem is not None:
        raise ConfigError([problem])
    return LabelAccess(audit.labels.token, web_config_asks)


def open_labels_problem(audit: Audit, endpoint: str, web_config_asks: bool) -> str | None:
    """Why `audit.labels.http` may not be served on the metrics port's `endpoint`: no token
    and a web config that asks for no credential, on any address (None: it may)."""
    if not audit.labels.http or web_config_asks or audit.labels.token is not None:
        return None
    host = endpoint.rpartition(":")[0]
    return (
        f"audit.labels.http: POST /audit/labels sets the audited estimate and the metrics port "
        f"on {host} asks no credential (a loopback address is none: in a pod every container "
        f"shares it); name the variable holding a bearer token in {TOKEN_KEY}, give the "
        "metrics port a web config with basic_auth_users (or client certificates required), "
        "or feed labels through audit.labels.file"
    )
