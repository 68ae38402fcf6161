"""Server-side TLS for the OTLP receivers, from `receivers.otlp.tls`."""

from __future__ import annotations

import ssl
from pathlib import Path

import grpc

from monitor.config import ReceiverTls


def http_ssl_context(tls: ReceiverTls) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(tls.cert_file, tls.key_file)
    if tls.client_ca_file is not None:
        context.load_verify_locations(tls.client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def grpc_credentials(tls: ReceiverTls) -> grpc.ServerCredentials:
    key = Path(tls.key_file).read_bytes()
    cert = Path(tls.cert_file).read_bytes()
    ca = Path(tls.client_ca_file).read_bytes() if tls.client_ca_file is not None else None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
    )
