"""The metrics port's web config (Prometheus exporter-toolkit format): what is accepted, and
every problem named by its key."""

from __future__ import annotations

from pathlib import Path

import bcrypt
import pytest

from monitor.config import ConfigError
from monitor.exporters.metrics_port import load_web_security
from monitor.exporters.web_config import load_web_config


def test_web_config(tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_text("not checked here")
    key.write_text("not checked here")
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    good = tmp_path / "web.yml"
    good.write_text(
        f"tls_server_config: {{cert_file: {cert}, key_file: {key}}}\n"
        f"basic_auth_users: {{prometheus: '{hashed}'}}\n"
    )
    web = load_web_config(good)
    assert web.tls_server_config is not None and web.tls_server_config.min_version == "TLS12"
    assert web.basic_auth_users == {"prometheus": hashed}
    cases = {
        "basic_auth_users: {prometheus: hunter2}": "basic_auth_users.prometheus: expected a bcrypt",
        f"tls_server_config: {{cert_file: {cert}}}": "tls_server_config.key_file: required",
        f"tls_server_config: {{cert_file: {cert}, key_file: {tmp_path}/nope}}": (
            "tls_server_config.key_file: no such file"
        ),
        f"tls_server_config: {{cert_file: {cert}, key_file: {key}, client_ca_file: {cert}}}": (
            "tls_server_config.client_auth_type: client_ca_file is set but"
        ),
        f"tls_server_config: {{cert_file: {cert}, key_file: {key},"
        " client_auth_type: RequireAndVerifyClientCert}": (
            "tls_server_config.client_ca_file: required with client_auth_type"
        ),
        f"tls_server_config: {{cert_file: {cert}, key_file: {key},"
        " client_auth_type: RequireAnyClientCert}": (
            "tls_server_config.client_auth_type: a client certificate that is not verified"
        ),
        f"tls_server_config: {{cert_file: {cert}, key_file: {key}, cipher_suites: []}}": (
            "tls_server_config.cipher_suites: part of the Prometheus exporter-toolkit format"
        ),
        "http_server_config: {http2: false}": "http_server_config: part of the Prometheus",
        "basic_auth: {}": "basic_auth: unknown key",
    }
    for text, expected in cases.items():
        bad = tmp_path / "bad.yml"
        bad.write_text(text + "\n")
        with pytest.raises(ConfigError) as info:
            load_web_config(bad)
        assert any(p.startswith(expected) for p in info.value.problems), (text, info.value)
    # The metrics server (and `check-config`) name the config key and the file.
    with pytest.raises(ConfigError) as info:
        load_web_security(str(bad))
    assert info.value.problems[0].startswith(f"exporters.prometheus.web_config_file: in {bad}: ")
