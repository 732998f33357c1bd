"""A service-account key made on the spot, and the OAuth token endpoint its ``token_uri`` names.

google-auth loads the key like any downloaded key file: to get an access token it signs a JWT
with the private key and posts it to ``token_uri``; this endpoint verifies that signature with
the public half and answers ``{"access_token", "expires_in", "token_type"}`` as Google's does.
GAPIC clients may skip the endpoint and send a self-signed JWT as the bearer token instead;
:meth:`Authority.accepts` takes either, so the fakes can refuse requests without credentials.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from gcp_fakes.http import QuietHandler, serving

TOKEN_PREFIX = "ya29.fake-"


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Authority:
    """Knows the key's public half and the tokens handed out; checks bearer headers."""

    def __init__(self, project: str = "agentenv-test", fixed_token: str | None = None) -> None:
        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_key = self.private_key.public_key()
        self.project = project
        self.email = f"agentenv-tests@{project}.iam.gserviceaccount.com"
        self.tokens: set[str] = set()
        self.grants = 0
        self.fixed_token = fixed_token  # hand out this token every time (a registry password)
        self._lock = threading.Lock()

    def key_info(self, token_uri: str) -> dict[str, Any]:
        pem = self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        return {
            "type": "service_account",
            "project_id": self.project,
            "private_key_id": "fake-key-1",
            "private_key": pem,
            "client_email": self.email,
            "client_id": "1234567890",
            "token_uri": token_uri,
        }

    def verify_jwt(self, token: str) -> dict[str, Any] | None:
        """The claims of a JWT signed by our key and not expired, else ``None``."""
        try:
            head, body, signature = token.split(".")
            self.public_key.verify(
                _b64decode(signature),
                f"{head}.{body}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
            claims = json.loads(_b64decode(body))
        except Exception:
            return None
        if claims.get("iss") != self.email or float(claims.get("exp", 0)) < time.time():
            return None
        return claims

    def issue(self) -> str:
        with self._lock:
            self.grants += 1
            token = self.fixed_token or f"{TOKEN_PREFIX}{self.grants}"
            self.tokens.add(token)
        return token

    def accepts(self, authorization: str | None) -> bool:
        if not authorization or not authorization.startswith("Bearer "):
            return False
        token = authorization[len("Bearer ") :]
        return token in self.tokens or self.verify_jwt(token) is not None


class _TokenHandler(QuietHandler):
    server: Any

    def do_POST(self) -> None:
        form = urllib.parse.parse_qs(self.body().decode())
        authority: Authority = self.server.authority
        assertion = (form.get("assertion") or [""])[0]
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"] or (
            authority.verify_jwt(assertion) is None
        ):
            body = {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
            self.reply(400, json.dumps(body).encode(), {"Content-Type": "application/json"})
            return
        token = {"access_token": authority.issue(), "expires_in": 3600, "token_type": "Bearer"}
        self.reply(200, json.dumps(token).encode(), {"Content-Type": "application/json"})


@contextmanager
def token_endpoint(authority: Authority, key_path: Path) -> Iterator[str]:
    """Serve the token endpoint and write a key file naming it; yields the endpoint's URL."""
    with serving(_TokenHandler, authority=authority) as server:
        token_uri = f"{server.url}/token"
        key_path.write_text(json.dumps(authority.key_info(token_uri)))
        yield token_uri
