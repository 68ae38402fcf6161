"""Labels only from who may send them: on a metrics port reachable from other hosts,
`POST /audit/labels` takes labels only with the bearer token `audit.labels.token_env`
names (or behind the web config's basic auth), and `GET /audit` shows the request ids
awaiting a label only to the same credential; `check-config` and `run` refuse the open
configuration. A body of any depth is a 400. Real HTTP against the real metrics port."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from monitor.cli.check_config import check_config
from monitor.config import ConfigError
from monitor.service import Service
from tests.audit.test_audit_e2e import (
    LABEL_TOKEN,
    _audited,
    _config,
    _evaluated,
    _labelled,
    _records,
)

TOKEN_ENV = "RAG_MONITOR_TEST_LABEL_TOKEN"
TOKEN = "s3cret-label-token"
OPEN = "audit.labels.http: POST /audit/labels sets the audited estimate"
BEARER = f"Bearer {LABEL_TOKEN}"


def _call(
    port: int, path: str, body: bytes | None = None, authorization: str | None = None
) -> tuple[int, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body)
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    return status, json.loads(text) if text.startswith(("{", "[")) else text


async def _ask(
    port: int, path: str, body: Any = None, authorization: str | None = None
) -> tuple[int, Any]:
    raw = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    return await asyncio.to_thread(_call, port, path, raw, authorization)


def _refused(service: Service, reason: str) -> float:
    value = service.telemetry.registry.get_sample_value(
        "rag_monitor_audit_label_posts_refused_total", {"reason": reason}
    )
    return value or 0.0


@pytest.mark.asyncio
async def test_labels_need_the_token_on_a_public_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bound to every address with a token: a post without it is a 401, with another a
    403, each counted by reason, and neither moves the estimate nor takes a label; `GET
    /audit` lists the awaiting ids only to the token; with it the labels join."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    records = _records(24)
    audited = _audited(records)
    audit = {
        "evaluator": "local_groundedness",
        "reference": "labels",
        "labels": {"http": True, "token_env": TOKEN_ENV},
    }
    config = _config(
        audit,
        [{"name": "local_groundedness"}],
        exporters={"prometheus": {"endpoint": "0.0.0.0:0"}},
    )
    service = Service(config, with_receivers=False)
    await service.start()
    try:
        port = await _evaluated(service, records)
        status, page = await _ask(port, "/audit")
        assert status == 200 and page["awaiting_labels"] is None
        assert "Bearer" in page["awaiting_labels_withheld"]
        assert page["pending_labels"] == len(audited)
        status, page = await _ask(port, "/audit", authorization=f"Bearer {TOKEN}")
        assert sorted(page["awaiting_labels"]) == sorted(audited)
        before = page["services"]
        labels = [{"request_id": rid, "label": "fail"} for rid in audited]
        status, answer = await _ask(port, "/audit/labels", labels)
        assert status == 401 and "Bearer" in answer["error"]
        status, answer = await _ask(port, "/audit/labels", labels, "Bearer not-the-token")
        assert status == 403
        status, answer = await _ask(port, "/audit/labels", labels, f"Basic {TOKEN}")
        assert status == 401
        assert (_refused(service, "no_credential"), _refused(service, "wrong_credential")) == (
            2,
            1,
        )
        _, page = await _ask(port, "/audit", authorization=f"Bearer {TOKEN}")
        assert page["services"] == before and page["pending_labels"] == len(audited)
        joined = service.telemetry.registry.get_sample_value(
            "rag_monitor_audit_labels_total", {"source": "http", "outcome": "joined"}
        )
        assert not joined
        status, answer = await _ask(port, "/audit/labels", labels, f"Bearer {TOKEN}")
        assert (status, answer) == (200, {"joined": len(audited), "refused": []})
        _, page = await _ask(port, "/audit", authorization=f"Bearer {TOKEN}")
        assert page["services"]["shop"]["audited"] == len(audited)
    finally:
        await service.shutdown(30)


@asynccontextmanager
async def _behind_basic_auth(tmp_path: Path, endpoint: str) -> AsyncIterator[tuple[Path, int, str]]:
    """A service with no token whose labels a web config with a basic-auth user guards, on
    `endpoint`: a post without the user's credentials is a 401, with them it is taken.
    Yields the web config's file, the port and the credentials' header."""
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users: {{labeller: '{hashed}'}}\n")
    prometheus = {"endpoint": endpoint, "web_config_file": str(web)}
    config = _labelled(token=False, exporters={"prometheus": prometheus})
    service = Service(config, with_receivers=False)
    await service.start()
    try:
        assert service.http is not None and service.http.bound_port is not None
        port = service.http.bound_port
        status, _ = await _ask(port, "/audit/labels", [])
        assert status == 401
        basic = "Basic " + base64.b64encode(b"labeller:pw").decode()
        status, answer = await _ask(port, "/audit/labels", [], basic)
        assert (status, answer) == (200, {"joined": 0, "refused": []})
        yield web, port, basic
    finally:
        await service.shutdown(30)


@pytest.mark.asyncio
async def test_labels_behind_the_web_configs_basic_auth(tmp_path: Path) -> None:
    """With no token, a web config with basic-auth users guards the endpoint on a public
    address: without the user's credentials a post is a 401, with them it is taken."""
    async with _behind_basic_auth(tmp_path, "0.0.0.0:0") as (_, port, basic):
        status, page = await _ask(port, "/audit", authorization=basic)
        assert status == 200 and page["awaiting_labels"] == []


@pytest.mark.asyncio
@pytest.mark.parametrize("endpoint", ["0.0.0.0:0", "127.0.0.1:0", "[::1]:0"])
async def test_run_refuses_labels_from_anyone_on_any_address(endpoint: str) -> None:
    """Loopback included: a sidecar's loopback is shared by every container of its pod."""
    config = _labelled(token=False, exporters={"prometheus": {"endpoint": endpoint}})
    with pytest.raises(ConfigError) as raised:
        Service(config, with_receivers=False)
    assert len(raised.value.problems) == 1 and raised.value.problems[0].startswith(OPEN)


AUDIT = """
evaluators: [{name: local_groundedness}]
audit:
  evaluator: local_groundedness
  reference: labels
  labels: {http: true%s}
"""


@pytest.mark.parametrize(
    ("more", "endpoint", "env", "problem"),
    [
        ("", None, {}, OPEN),  # the default endpoint, 0.0.0.0:9464
        ("", "10.1.2.3:9464", {}, OPEN),
        ("", "127.0.0.1:9464", {}, OPEN),  # loopback is no credential
        (f", token_env: {TOKEN_ENV}", None, {TOKEN_ENV: TOKEN}, None),
        (f", token_env: {TOKEN_ENV}", None, {}, "audit.labels.token_env: "),
        # Not a key, and so no credential: both said in one run.
        (", token: written-here", None, {}, ("audit.labels.token: ", "audit.labels.http: ")),
    ],
    ids=["default", "public", "loopback", "token", "token-unset", "token-literal"],
)
def test_check_config_refuses_labels_from_anyone(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    more: str,
    endpoint: str | None,
    env: dict[str, str],
    problem: str | tuple[str, ...] | None,
) -> None:
    """A `path.to.key: what is wrong` line for each problem, naming the key."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    text = AUDIT % more
    if endpoint is not None:
        text += f"exporters: {{prometheus: {{endpoint: '{endpoint}'}}}}\n"
    path = tmp_path / "c.yaml"
    path.write_text(text)
    code = check_config(path, ())
    captured = capsys.readouterr()
    if problem is None:
        assert code == 0, captured.err
        assert TOKEN not in captured.out  # the token is masked
        return
    assert code == 1
    lines = captured.err.strip().splitlines()
    expected = (problem,) if isinstance(problem, str) else problem
    assert len(lines) == len(expected), lines
    assert all(line.startswith(start) for line, start in zip(lines, expected, strict=True)), lines


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"[" * 200_000, "too_deep"),
        (b"{" * 200_000, "not_json"),
        (b'[{"request_id": "a", "label": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]", "too_deep"),
        (b"\xff\xfe", "not_json"),
    ],
    ids=["lists", "objects", "inside-a-label", "not-utf8"],
)
async def test_a_body_of_any_depth_is_a_400_with_the_reason(body: bytes, reason: str) -> None:
    service = Service(_labelled(), with_receivers=False)
    await service.start()
    try:
        assert service.http is not None and service.http.bound_port is not None
        port = service.http.bound_port
        status, answer = await _ask(port, "/audit/labels", body, BEARER)
        assert status == 400 and answer["error"].startswith("body is"), answer
        assert _refused(service, reason) == 1
        deep_label = [{"request_id": "a", "label": [[[["x"]]]]}]
        status, answer = await _ask(port, "/audit/labels", deep_label, BEARER)
        assert status == 200 and answer["refused"][0]["error"].endswith("got list")
        status, answer = await _ask(port, "/audit/labels", b"[]", BEARER)
        assert (status, answer) == (200, {"joined": 0, "refused": []})
    finally:
        await service.shutdown(30)


@pytest.mark.asyncio
async def test_on_loopback_labels_and_awaiting_ids_need_the_token() -> None:
    """A sender on the same host (another container of the pod) posts nothing and sees no
    awaiting id without the token; with it, both."""
    records = _records(24)
    audited = _audited(records)
    service = Service(_labelled(), with_receivers=False)  # 127.0.0.1, a token named
    await service.start()
    try:
        port = await _evaluated(service, records)
        status, page = await _ask(port, "/audit")
        assert status == 200 and page["awaiting_labels"] is None
        assert page["awaiting_labels_withheld"]
        labels = [{"request_id": rid, "label": "fail"} for rid in audited]
        status, _ = await _ask(port, "/audit/labels", labels)
        assert status == 401 and _refused(service, "no_credential") == 1
        _, page = await _ask(port, "/audit", authorization=BEARER)
        assert sorted(page["awaiting_labels"]) == sorted(audited)
        status, answer = await _ask(port, "/audit/labels", labels, BEARER)
        assert (status, answer) == (200, {"joined": len(audited), "refused": []})
    finally:
        await service.shutdown(30)


@pytest.mark.asyncio
async def test_awaiting_ids_stay_behind_the_guard_with_a_labels_file(tmp_path: Path) -> None:
    """Labels from a file, no label endpoint: `GET /audit` on loopback still lists the
    awaiting ids only to the token `audit.labels.token_env` names."""
    records = _records(24)
    audited = _audited(records)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("")
    audit = {
        "evaluator": "local_groundedness",
        "reference": "labels",
        "labels": {"file": str(labels)},
    }
    service = Service(_config(audit, [{"name": "local_groundedness"}]), with_receivers=False)
    await service.start()
    try:
        port = await _evaluated(service, records)
        _, page = await _ask(port, "/audit")
        assert page["awaiting_labels"] is None and page["pending_labels"] == len(audited)
    finally:
        await service.shutdown(30)
    audit["labels"] = {"file": str(labels), "token_env": "RAG_MONITOR_TEST_E2E_LABEL_TOKEN"}
    service = Service(_config(audit, [{"name": "local_groundedness"}]), with_receivers=False)
    await service.start()
    try:
        port = await _evaluated(service, records)
        _, page = await _ask(port, "/audit")
        assert page["awaiting_labels"] is None
        _, page = await _ask(port, "/audit", authorization=BEARER)
        assert sorted(page["awaiting_labels"]) == sorted(audited)
    finally:
        await service.shutdown(30)


@pytest.mark.asyncio
async def test_on_loopback_the_web_config_guards_labels_and_keeps_asking(tmp_path: Path) -> None:
    """No token, a web config with basic-auth users, on 127.0.0.1: a post without the
    user's credentials is a 401; a reloaded web config that stops asking is not taken (the
    post is still refused)."""
    async with _behind_basic_auth(tmp_path, "127.0.0.1:0") as (web, port, _):
        web.write_text("# asks for nothing now, a file of another size\n")
        status, _ = await _ask(port, "/audit/labels", [])
        assert status == 401
