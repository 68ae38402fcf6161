"""The metrics port: the HTTP endpoint (`/metrics`, `/healthz`, `/readyz`) serving what the
metrics sink (`prometheus.py`) counts.

`/metrics` is exposed as prometheus_client's own handlers expose it: the format the scraper
asks for (OpenMetrics carries the trace-id exemplars on the defect counters), gzip when
`Accept-Encoding` allows it, and only the families named by `name[]` query parameters.

With `exporters.prometheus.web_config_file` (the Prometheus exporter-toolkit web config)
the port serves TLS, optionally verifying client certificates, and `/metrics` requires HTTP
basic auth against bcrypt hashes. The file, and the certificate files it names, are re-read
when they change, so rotated certificates and users apply without a restart (changes of
client_auth_type, TLS versions, or turning TLS on or off need one). `/healthz` and `/readyz`
never ask for credentials: kubelet probes cannot send them, and they reveal only "ok" and a
readiness reason.

A page that shows record text (`/debug/records`) is served only where the operator asked
for it: on a loopback address, or behind a web config that asks for credentials (basic
auth users, or client certificates required). Anything else is refused at start and by
`check-config` (`check_metrics_port`), and a reloaded web config that would stop asking
is not taken. A route added `guarded` (label posts without a token) is behind the web
config's credentials on every address, loopback included, likewise.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import gzip
import hashlib
import logging
import os
import ssl
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import bcrypt
from aiohttp import web
from prometheus_client.exposition import choose_encoder, gzip_accepted

from monitor.config import ConfigError, PrometheusExporter, is_loopback_host
from monitor.exporters.web_config import WebConfig, WebTls, load_web_config
from monitor.shared.listen import ListenError, reason_of
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
WEB_CONFIG_KEY = "exporters.prometheus.web_config_file"
REQUEST_GRACE_S = 1.0  # how long shutdown lets a request in progress finish


class HealthServer:
    """aiohttp app on `exporters.prometheus.endpoint`.

    Routes are registered with `add_route` before `start`; a route is protected by basic
    auth (when the web config has users) unless it is added with `public=True`."""

    def __init__(
        self,
        telemetry: Telemetry,
        endpoint: str,
        ready: Callable[[], tuple[bool, str]],
        *,
        web_config_file: str | None = None,
    ) -> None:
        self._t = telemetry
        host, _, port = endpoint.rpartition(":")
        self._host = host.strip("[]")
        self._port = int(port)
        self._ready = ready
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None
        self._routes: list[tuple[str, Handler, str]] = []
        self._public: set[str] = set()
        self._text: list[str] = []  # routes that show record text
        self._guarded: list[str] = []  # routes behind the web config on every address
        self._web = WebSecurity(web_config_file, telemetry) if web_config_file else None
        self._rejected = telemetry.counter("http_requests_rejected")
        self._unauthorized = self._rejected.labels("unauthorized")
        self._refusals = RateLimitedLog(log)
        self.add_route("/metrics", self._metrics)
        self.add_route("/healthz", self._healthz, public=True)
        self.add_route("/readyz", self._readyz, public=True)

    def add_route(
        self,
        path: str,
        handler: Handler,
        *,
        public: bool = False,
        text: bool = False,
        guarded: bool = False,
        method: str = "GET",
    ) -> None:
        """A GET route (HEAD too), or a route of `method`. Call before `start`. `text`: the
        route shows record text, so it needs a loopback address or credentials (see the
        module docstring). `guarded`: the web config's credentials guard it on every
        address, loopback included (label posts)."""
        self._routes.append((path, handler, method))
        if public:
            self._public.add(path)
        if text:
            self._text.append(path)
        if guarded:
            self._guarded.append(path)

    async def start(self) -> None:
        if self._text and not is_loopback_host(self._host):
            current = self._web.config if self._web is not None else None
            problem = _unprotected(self._text[0], self._host, current)
            if problem is not None:
                raise ConfigError([problem])
            assert self._web is not None
            self._web.keep_asking = self._text[0]
        if self._guarded:
            if self._web is None or not asks_for_credentials(self._web.config):
                raise ConfigError(
                    [
                        f"{WEB_CONFIG_KEY}: {self._guarded[0]} needs a web config that asks for "
                        "credentials (basic_auth_users, or client certificates required)"
                    ]
                )
            self._web.keep_asking = self._web.keep_asking or self._guarded[0]
        app = web.Application(middlewares=[self._guard] if self._web is not None else [])
        for path, handler, method in self._routes:
            if method == "GET":
                app.router.add_get(path, handler)
            else:
                app.router.add_route(method, path, handler)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=REQUEST_GRACE_S)
        await self._runner.setup()
        tls = self._web.server_context() if self._web is not None else None
        site = web.TCPSite(self._runner, self._host, self._port, ssl_context=tls)
        try:
            await site.start()
        except OSError as exc:
            runner, self._runner = self._runner, None
            await runner.cleanup()
            address = f"{self._host}:{self._port}"
            raise ListenError("exporters.prometheus.endpoint", address, reason_of(exc)) from None
        addresses = self._runner.addresses
        self.bound_port = int(addresses[0][1]) if addresses else self._port
        scheme = "https" if tls is not None else "http"
        log.info("metrics on %s://%s:%s/metrics", scheme, self._host, self.bound_port)

    async def shutdown(self, deadline_s: float) -> None:
        """Stop listening and close the connections. A request in progress gets at most
        `REQUEST_GRACE_S`, whatever the deadline: a scrape takes milliseconds, and a slow
        client must not hold the process."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        assert self._web is not None
        if request.path in self._public:
            return await handler(request)
        if await self._web.authorized(request.headers.get("Authorization")):
            return await handler(request)
        self._unauthorized.inc()
        self._refusals.warning(
            "unauthorized", "refused %s from %s: no valid credentials", request.path, request.remote
        )
        return web.Response(
            status=401,
            text="401 Unauthorized\n",
            headers={"WWW-Authenticate": 'Basic realm="rag-monitor", charset="UTF-8"'},
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        names = request.query.getall("name[]", [])
        registry = self._t.registry.restricted_registry(names) if names else self._t.registry
        compress = gzip_accepted(request.headers.get("Accept-Encoding", ""))

        def render() -> bytes:
            body = encoder(registry)
            return gzip.compress(body) if compress else body

        # Collecting and compressing take milliseconds with many series: off the loop.
        body = await asyncio.to_thread(render)
        headers = {"Content-Type": content_type}
        if compress:
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=body, headers=headers)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, reason = self._ready()
        return web.Response(text=f"{reason}\n", status=200 if ready else 503)


@dataclass(frozen=True)
class _Loaded:
    config: WebConfig
    tls: ssl.SSLContext | None
    # (path, mtime_ns, size, inode) of the web config and the files it names, taken
    # before they were read: a change after that shows up as a different stamp.
    stamp: tuple[tuple[str, int, int, int], ...]


def _stamp(paths: list[str]) -> tuple[tuple[str, int, int, int], ...]:
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append((path, -1, -1, -1))
            continue
        out.append((path, st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(out)


def _tls_files(config: WebConfig) -> list[str]:
    tls = config.tls_server_config
    if tls is None:
        return []
    return [p for p in (tls.cert_file, tls.key_file, tls.client_ca_file) if p is not None]


_VERIFY_MODES = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


def _ssl_context(tls: WebTls) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _TLS_VERSIONS[tls.min_version]
    context.maximum_version = _TLS_VERSIONS[tls.max_version]
    context.load_cert_chain(tls.cert_file, tls.key_file)
    if tls.client_ca_file is not None:
        context.load_verify_locations(tls.client_ca_file)
    context.verify_mode = _VERIFY_MODES[tls.client_auth_type]
    return context


def _restart_needed(old: WebConfig, new: WebConfig) -> str | None:
    """What a running listener cannot take over from a changed web config."""
    a, b = old.tls_server_config, new.tls_server_config
    if (a is None) != (b is None):
        return "turning TLS on or off"
    if a is not None and b is not None:
        for key in ("client_auth_type", "min_version", "max_version"):
            if getattr(a, key) != getattr(b, key):
                return f"changing tls_server_config.{key}"
    return None


def asks_for_credentials(config: WebConfig) -> bool:
    """Whether every request to a protected route must bring credentials: basic-auth
    users, or a client certificate the server verifies."""
    tls = config.tls_server_config
    return bool(config.basic_auth_users) or (
        tls is not None and tls.client_auth_type == "RequireAndVerifyClientCert"
    )


def web_config_asks(prometheus: PrometheusExporter) -> bool:
    """Whether the metrics port's web config (none: no) asks every request for a credential."""
    path = prometheus.web_config_file
    return path is not None and asks_for_credentials(load_web_security(path)[0])


def _unprotected(path: str, host: str, config: WebConfig | None) -> str | None:
    """Why `path`, which shows record text, may not be served on `host` with `config`
    (None: it may)."""
    if is_loopback_host(host) or (config is not None and asks_for_credentials(config)):
        return None
    where = "with no web config" if config is None else "and its web config asks for none"
    return (
        f"exporters.prometheus.debug_records: {path} shows record text (questions, "
        f"documents, answers) and the metrics port on {host} is reachable from other hosts "
        f"{where}; bind exporters.prometheus.endpoint to a loopback address (127.0.0.1), "
        "give the web config basic_auth_users (or require client certificates), or leave "
        "debug_records at 0"
    )


def check_metrics_port(prometheus: PrometheusExporter) -> None:
    """What would stop `run` at the metrics port, for `check-config`: a web config that
    does not load, or `/debug/records` where it would show record text to anyone.
    Raises `ConfigError`."""
    config = None
    if prometheus.web_config_file is not None:
        config, _ = load_web_security(prometheus.web_config_file)
    if prometheus.debug_records:
        from monitor.exporters.debug_records import PATH

        problem = _unprotected(PATH, prometheus.endpoint.rpartition(":")[0], config)
        if problem is not None:
            raise ConfigError([problem])


def load_web_security(path: str) -> tuple[WebConfig, ssl.SSLContext | None]:
    """The web config at `path` and the TLS context it describes (None without TLS).
    Raises `ConfigError` naming `exporters.prometheus.web_config_file`; `check-config`
    calls it so that what would stop `run` (a key that does not match its certificate)
    is found there too."""
    try:
        config = load_web_config(path)
    except ConfigError as exc:
        raise ConfigError([f"{WEB_CONFIG_KEY}: in {path}: {p}" for p in exc.problems]) from None
    if config.tls_server_config is None:
        return config, None
    try:
        return config, _ssl_context(config.tls_server_config)
    except (OSError, ValueError) as exc:
        problem = f"{WEB_CONFIG_KEY}: in {path}: tls_server_config: {exc}"
        raise ConfigError([problem]) from None


@functools.cache
def _dummy_hash() -> bytes:
    """bcrypt of a random password: unknown users cost one hash check too."""
    return bcrypt.hashpw(os.urandom(16), bcrypt.gensalt(10))


_VERIFIED_CACHE = 64


class WebSecurity:
    """The metrics port's web config: the TLS context and the basic-auth check.

    Every TLS handshake and every protected request first looks whether the file or a file
    it names changed (a few `stat` calls) and reloads it then. A file that fails to load
    leaves the last good one in force (logged, and counted in
    `rag_monitor_web_config_reloads_total{outcome="error"}`)."""

    def __init__(self, path: str, telemetry: Telemetry) -> None:
        self._path = path
        self._reloads = telemetry.counter("web_config_reloads")
        self._problems = RateLimitedLog(log)
        self._loaded = self._load(self._stamp_of(None))
        # A route showing record text on a public address, or one guarded on every address
        # (label posts): a reload that would stop asking for credentials is refused.
        self.keep_asking: str | None = None
        self._failed_stamp: tuple[tuple[str, int, int, int], ...] | None = None
        # sha256(user, password, hash) of recently verified credentials: bcrypt runs once
        # per credential, not per scrape.
        self._verified: OrderedDict[bytes, None] = OrderedDict()
        # One bcrypt check at a time: guessing cannot take more than one core.
        self._hashing = asyncio.Semaphore(1)

    def _stamp_of(self, config: WebConfig | None) -> tuple[tuple[str, int, int, int], ...]:
        return _stamp([self._path, *(_tls_files(config) if config is not None else [])])

    def _load(self, stamp: tuple[tuple[str, int, int, int], ...]) -> _Loaded:
        config, tls = load_web_security(self._path)
        return _Loaded(config, tls, (*stamp[:1], *_stamp(_tls_files(config))))

    def current(self) -> _Loaded:
        loaded = self._loaded
        stamp = self._stamp_of(loaded.config)
        if stamp == loaded.stamp or stamp == self._failed_stamp:
            return loaded
        try:
            fresh = self._load(stamp)
            reason = _restart_needed(loaded.config, fresh.config)
            if reason is not None:
                raise ConfigError([f"{WEB_CONFIG_KEY}: {reason} needs a restart"])
            if self.keep_asking is not None and not asks_for_credentials(fresh.config):
                raise ConfigError(
                    [
                        f"{WEB_CONFIG_KEY}: it asks for no credentials, and {self.keep_asking} "
                        "shows record text"
                    ]
                )
        except ConfigError as exc:
            self._failed_stamp = stamp
            self._reloads.labels("error").inc()
            self._problems.log(
                "reload",
                logging.ERROR,
                "web config not reloaded, the previous one stays in force: %s",
                "; ".join(exc.problems),
            )
            return loaded
        self._loaded = fresh
        self._failed_stamp = None
        self._verified.clear()
        self._reloads.labels("ok").inc()
        log.info("web config %s reloaded", self._path)
        return fresh

    @property
    def config(self) -> WebConfig:
        return self.current().config

    def server_context(self) -> ssl.SSLContext | None:
        """The listener's TLS context (None without TLS). Each handshake switches to the
        context of the current web config, so new certificates apply to new connections."""
        base = self._loaded.tls
        if base is None:
            return None

        def switch(connection: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
            fresh = self.current().tls
            if fresh is not None and fresh is not connection.context:
                connection.context = fresh

        base.sni_callback = switch
        return base

    async def authorized(self, header: str | None) -> bool:
        users = self.current().config.basic_auth_users
        if not users:
            return True
        credentials = _basic_credentials(header)
        if credentials is None:
            return False
        user, password = credentials
        hashed = users.get(user)
        key = hashlib.sha256(b"\0".join([user.encode(), password, (hashed or "").encode()]))
        if hashed is not None and key.digest() in self._verified:
            return True
        async with self._hashing:
            ok = await asyncio.to_thread(_bcrypt_ok, password, hashed)
        if ok:
            self._verified[key.digest()] = None
            while len(self._verified) > _VERIFIED_CACHE:
                self._verified.popitem(last=False)
        return ok


def _bcrypt_ok(password: bytes, hashed: str | None) -> bool:
    """Checks against a throw-away hash when the user is unknown, so that answering
    takes as long for an unknown user as for a wrong password."""
    try:
        ok = bcrypt.checkpw(password, hashed.encode() if hashed else _dummy_hash())
    except ValueError:  # e.g. a password over bcrypt's 72 bytes
        return False
    return ok and hashed is not None


def _basic_credentials(header: str | None) -> tuple[str, bytes] | None:
    """`Authorization: Basic base64(user:password)` → (user, password bytes)."""
    if not header:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    if not sep:
        return None
    try:
        return user.decode("utf-8"), password
    except UnicodeDecodeError:
        return None
