"""aiohttp's TLS contexts get their CA certificates when a connection first needs them.

``import agentenv_protocol`` defers the loading (about 65 ms and 2-4 MiB in every env server,
gateway and CLI process, most of which never speak TLS); a TLS connection must still be checked
against the system's CA certificates. Each case runs in a fresh interpreter: the deferral only
works before aiohttp is first imported.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

PROBE = r"""
import asyncio, ssl, sys
import agentenv_protocol  # defers
import aiohttp, aiohttp.connector as connector

def cas(context):
    return context.cert_store_stats()["x509_ca"]

system = cas(ssl.create_default_context())  # not aiohttp's: loaded at once as ever
print("system", system)
print("at import", cas(connector._SSL_CONTEXT_VERIFIED), cas(connector._SSL_CONTEXT_UNVERIFIED))
server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
server_context.load_cert_chain(sys.argv[1], sys.argv[2])

async def main():
    async def serve(reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    plain = await asyncio.start_server(serve, "127.0.0.1", 0)
    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_context)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{plain.sockets[0].getsockname()[1]}/") as r:
            print("plain http:", r.status)
        print("after http", cas(connector._SSL_CONTEXT_VERIFIED),
              cas(connector._SSL_CONTEXT_UNVERIFIED))
        try:
            async with session.get(url) as response:
                print("verified: answered", response.status)
        except aiohttp.ClientConnectorCertificateError:
            print("verified: certificate refused")
        async with session.get(url, ssl=False) as response:
            print("unverified:", response.status)
    server.close()
    plain.close()

asyncio.run(main())
print("after use", cas(connector._SSL_CONTEXT_VERIFIED), cas(connector._SSL_CONTEXT_UNVERIFIED))
"""


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(hours=1))
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_certificates_load_on_first_tls_use_and_still_check(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    out = subprocess.run([sys.executable, "-c", PROBE, str(cert), str(key)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    system = int(out.splitlines()[0].split()[1])
    assert system > 0, out  # the machine has CA certificates to load
    assert "at import 0 0" in out, out  # nothing loaded while nothing spoke TLS
    assert "plain http: 200" in out and "after http 0 0" in out, out  # nor by plain http
    assert "verified: certificate refused" in out, out  # a self-signed server is refused
    assert "unverified: 200" in out, out  # ssl=False still connects
    assert f"after use {system} {system}" in out, out  # both contexts now hold the system's


def test_too_late_changes_nothing() -> None:
    """With aiohttp imported first, its contexts are built as ever (certificates loaded)."""
    probe = ("import aiohttp.connector as c, agentenv_protocol\n"
             "from agentenv_protocol.tls import defer_aiohttp_certificates\n"
             "print(defer_aiohttp_certificates(), "
             "c._SSL_CONTEXT_VERIFIED.cert_store_stats()['x509_ca'] > 0)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == "False True"
