"""The remoting server's TLS modes in process: one port telling TLS from plain by the first byte,
enforcing and disabled refusals, client certificates, and large responses over TLS (which must
not take the raw-socket sendmsg path of plain connections)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from shoal.protocol import RemotingCommand, ResponseCode, make_response
from shoal.remoting import RemotingClient, RemotingConnectError
from shoal.remoting import limits as remoting_limits
from shoal.remoting.server import RemotingServer, ServerConnection
from shoal.remoting.tls import ClientAuth, ClientTlsSettings, ServerTlsSettings, TlsMode
from shoal.remoting.tls_listener import PLAIN_TLS, ServerTls
from tests.conftest import async_wait_until
from tests.tls_certs import TlsFiles, make_tls_files

ECHO_CODE = 9_001
BIG_BODY = bytes(range(256)) * (4 * remoting_limits.GATHER_WRITE_MIN_BYTES // 256)
"""A response body well above GATHER_WRITE_MIN_BYTES: plain connections send it with sendmsg."""


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def server_settings(files: TlsFiles, mode: TlsMode, **extra: object) -> ServerTlsSettings:
    return ServerTlsSettings(
        mode=mode,
        cert_path=str(files.server_cert),
        key_path=str(files.server_key),
        **extra,  # type: ignore[arg-type]
    )


def echo(connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
    """Answers with BIG_BODY and a remark saying whether the connection is TLS."""
    response = make_response(request, ResponseCode.SUCCESS, "tls" if connection.tls else "plain")
    connection.send(response, [BIG_BODY])
    return None  # type: ignore[return-value]


async def with_server(tls: ServerTls, body: Callable[[int], Awaitable[None]]) -> RemotingServer:
    server = RemotingServer("test", idle_timeout_s=30)
    server.register(ECHO_CODE, echo)
    port = await server.start("127.0.0.1", 0, tls=tls)
    try:
        await body(port)
    finally:
        await server.stop()
    return server


async def ask(port: int, context: ssl.SSLContext | None) -> str:
    """One request; the server's remark ("tls" or "plain") after checking the big body arrived intact."""
    client = RemotingClient(ssl_context=context)
    try:
        response = await client.invoke(f"127.0.0.1:{port}", ECHO_CODE, timeout_s=10)
    finally:
        await client.close()
    assert response.body == BIG_BODY
    return response.remark or ""


def test_permissive_port_serves_tls_and_plain_and_tls_responses_bypass_sendmsg(tls_files: TlsFiles) -> None:
    """Goal: permissive serves both kinds of client on one port, and a response large enough for the
    plain path's sendmsg arrives intact over TLS. Method: plain and TLS clients each ask for a
    256 KiB body on the same port; the server says which kind each connection was."""

    async def body(port: int) -> None:
        assert await ask(port, None) == "plain"
        assert await ask(port, ClientTlsSettings(enable=True).context()) == "tls"
        assert await ask(port, None) == "plain"

    asyncio.run(with_server(ServerTls.from_settings(server_settings(tls_files, TlsMode.PERMISSIVE)), body))


def test_enforcing_closes_plain_connections_and_logs_each_host_once(
    tls_files: TlsFiles, caplog: pytest.LogCaptureFixture
) -> None:
    """Goal: enforcing refuses plain clients with one warning per host, not per connection, and
    still serves TLS. Method: three plain requests fail to connect or are answered by a closed
    connection; the log has one refusal line; a TLS request succeeds."""

    async def body(port: int) -> None:
        for _ in range(3):
            with pytest.raises(Exception, match=r"closed|cannot connect"):
                await ask(port, None)
        assert await ask(port, ClientTlsSettings(enable=True).context()) == "tls"

    with caplog.at_level(logging.WARNING, logger="shoal.remoting.tls_listener"):
        server = asyncio.run(with_server(ServerTls.from_settings(server_settings(tls_files, TlsMode.ENFORCING)), body))
    refusals = [r.getMessage() for r in caplog.records if "closed a plain connection" in r.getMessage()]
    assert len(refusals) == 1, refusals
    assert "tls.server.mode=enforcing" in refusals[0] and "127.0.0.1" in refusals[0]
    assert server.requests_total == 1


def test_port_without_certificate_serves_plain_and_refuses_tls_handshakes(tls_files: TlsFiles) -> None:
    """Goal: disabled (and permissive without a certificate) keep the event loop's own server: plain
    works, a TLS client cannot connect. Method: both kinds of client against each configuration."""

    async def body(port: int) -> None:
        assert await ask(port, None) == "plain"
        with pytest.raises(RemotingConnectError, match=r"over TLS: .*does that port serve TLS\?"):
            await ask(port, ClientTlsSettings(enable=True).context())

    disabled = ServerTls.from_settings(server_settings(tls_files, TlsMode.DISABLED))
    assert not disabled.sniffs and disabled.context is None
    asyncio.run(with_server(disabled, body))
    no_certificate = ServerTls.from_settings(ServerTlsSettings(mode=TlsMode.PERMISSIVE))
    assert not no_certificate.sniffs and "no certificate" in no_certificate.describe()
    asyncio.run(with_server(no_certificate, body))
    asyncio.run(with_server(PLAIN_TLS, body))


def test_server_chain_checked_when_the_client_authenticates_the_server(tls_files: TlsFiles) -> None:
    """Goal: tls.client.authServer=true trusts only tls.client.trustCertPath; authServer=false (RocketMQ's
    default) trusts any server. Method: the right CA connects, an unrelated CA fails the handshake,
    no verification connects."""

    def client(trust: Path, auth: bool) -> ssl.SSLContext | None:
        return ClientTlsSettings(enable=True, test_mode=False, auth_server=auth, trust_cert_path=str(trust)).context()

    async def body(port: int) -> None:
        assert await ask(port, client(tls_files.ca, True)) == "tls"
        with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await ask(port, client(tls_files.other_ca, True))
        assert await ask(port, client(tls_files.other_ca, False)) == "tls"

    asyncio.run(with_server(ServerTls.from_settings(server_settings(tls_files, TlsMode.ENFORCING)), body))


def test_required_client_certificate_is_checked_against_the_servers_trust(tls_files: TlsFiles) -> None:
    """Goal: tls.server.need.client.auth=require with authClient=true admits only clients whose
    certificate the trusted CA signed. Method: a client with the CA-signed certificate is served;
    one without a certificate gets no answer (the handshake or the first read fails)."""
    settings = server_settings(
        tls_files,
        TlsMode.ENFORCING,
        test_mode=False,
        need_client_auth=ClientAuth.REQUIRE,
        auth_client=True,
        trust_cert_path=str(tls_files.ca),
    )
    with_cert = ClientTlsSettings(
        enable=True, test_mode=False, cert_path=str(tls_files.client_cert), key_path=str(tls_files.client_key)
    )

    async def body(port: int) -> None:
        assert await ask(port, with_cert.context()) == "tls"
        with pytest.raises(Exception, match=r"closed|cannot connect|CERTIFICATE"):
            await ask(port, ClientTlsSettings(enable=True, test_mode=False).context())

    asyncio.run(with_server(ServerTls.from_settings(settings), body))


def test_garbage_handshake_and_silent_connections_are_closed_without_harm(
    tls_files: TlsFiles, caplog: pytest.LogCaptureFixture
) -> None:
    """Goal: bytes that start like TLS but are not, and a connection that never sends, are closed
    (one log line for the bad handshake; the silent one after the idle timeout) and the port keeps
    serving. Method: raw sockets against a permissive port with a 1 s idle timeout, then a request."""

    async def closed_within(reader: asyncio.StreamReader, timeout_s: float) -> bool:
        return await asyncio.wait_for(reader.read(), timeout_s) == b""

    async def run() -> None:
        server = RemotingServer("test", idle_timeout_s=1)
        server.register(ECHO_CODE, echo)
        tls = ServerTls.from_settings(server_settings(tls_files, TlsMode.PERMISSIVE))
        port = await server.start("127.0.0.1", 0, tls=tls)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\x16" + b"\x00" * 64)  # a handshake record type, then nonsense
            assert await closed_within(reader, 15)
            writer.close()
            silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", port)
            assert await closed_within(silent_reader, 10)
            silent_writer.close()
            assert await ask(port, None) == "plain"
            assert await ask(port, ClientTlsSettings(enable=True).context()) == "tls"
        finally:
            await server.stop()

    with caplog.at_level(logging.WARNING, logger="shoal.remoting.tls_listener"):
        asyncio.run(run())
    failures = [r.getMessage() for r in caplog.records if "TLS handshake with 127.0.0.1 failed" in r.getMessage()]
    assert len(failures) == 1, failures


def test_changed_certificate_files_are_used_for_new_connections(tls_files: TlsFiles, tmp_path: Path) -> None:
    """Goal: replacing the certificate and key files (a cert-manager renewal) takes effect without a
    restart, as RocketMQ's FileWatchService reload does; a half-written set keeps the old one.
    Method: a port serving CA 1's certificate; write a certificate of CA 2 without its key (still
    CA 1's served), then the key; a client trusting only CA 2 connects within a few seconds."""
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    cert.write_bytes(tls_files.server_cert.read_bytes())
    key.write_bytes(tls_files.server_key.read_bytes())
    renewed = make_tls_files(tmp_path / "renewed")
    settings = ServerTlsSettings(mode=TlsMode.ENFORCING, cert_path=str(cert), key_path=str(key))
    tls = ServerTls.from_settings(settings)

    def trusting(ca: Path) -> ssl.SSLContext | None:
        return ClientTlsSettings(enable=True, test_mode=False, auth_server=True, trust_cert_path=str(ca)).context()

    async def body(port: int) -> None:
        assert await ask(port, trusting(tls_files.ca)) == "tls"
        cert.write_bytes(renewed.server_cert.read_bytes())  # the key is still the old one: no match
        await asyncio.sleep(3 * remoting_limits.TLS_CERTIFICATE_CHECK_INTERVAL_S)
        assert tls.reloads_total == 0
        assert await ask(port, trusting(tls_files.ca)) == "tls"
        key.write_bytes(renewed.server_key.read_bytes())
        await async_wait_until(lambda: tls.reloads_total == 1, 10, 0.1, what="the reload")
        assert await ask(port, trusting(renewed.ca)) == "tls"
        with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await ask(port, trusting(tls_files.ca))

    asyncio.run(with_server(tls, body))
