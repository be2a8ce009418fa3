"""The signed session cookie issued after a SPNEGO handshake (Knox/Hadoop: ``hadoop.auth``).

The value is a Fernet token (``cryptography``: AES-128-CBC + HMAC-SHA256, with its own issue
time) of ``{"u": short name, "p": Kerberos principal}``; its key is derived from the configured
secret with HKDF-SHA256, so any secret length works and the raw secret is never used directly.
Expiry is Fernet's ``ttl`` check. The cookie is ``Secure; HttpOnly; SameSite=Strict`` and scoped
to ``/gateway/``.
"""

from __future__ import annotations

import base64
import json
from http.cookies import SimpleCookie

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


class SessionCookies:
    """Issue and check session cookies named ``name`` valid ``lifetime`` seconds."""

    def __init__(self, name: str, secret: str, lifetime: int):
        self.name, self.lifetime = name, lifetime
        key = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"hms-gateway session cookie"
        ).derive(secret.encode())
        self._fernet = Fernet(base64.urlsafe_b64encode(key))

    def issue(self, user: str, principal: str) -> str:
        """The ``Set-Cookie`` header value for an authenticated ``principal`` (short name ``user``)."""
        token = self._fernet.encrypt(json.dumps({"u": user, "p": principal}).encode()).decode()
        cookie: SimpleCookie = SimpleCookie()
        cookie[self.name] = token
        morsel = cookie[self.name]
        morsel["path"] = "/gateway/"
        morsel["max-age"] = str(self.lifetime)
        morsel["secure"] = True
        morsel["httponly"] = True
        morsel["samesite"] = "Strict"
        return morsel.OutputString()

    def check(self, value: str | None) -> tuple[str, str] | None:
        """``(user, principal)`` from a cookie value that is authentic and not expired, else None."""
        if not value or len(value) > 4096:
            return None
        try:
            data = json.loads(self._fernet.decrypt(value.encode(), ttl=self.lifetime))
        except (InvalidToken, ValueError):
            return None
        user, principal = data.get("u"), data.get("p")
        if not isinstance(user, str) or not isinstance(principal, str):
            return None
        return user, principal
