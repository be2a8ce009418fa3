"""HTTP Basic authentication against an Apache ``htpasswd`` users file.

The file is read with ``passlib.apache.HtpasswdFile`` (the maintained ``libpass`` fork), so
``htpasswd -B`` (bcrypt) manages it; it is re-read when its modification time changes. bcrypt
checks run in a worker thread, within the client address's budget (``throttle``), and verified
credentials are cached (see ``credential_cache``), so that they need no check while it lasts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import ClassVar, Literal

from aiohttp import web
from passlib.apache import HtpasswdFile
from passlib.hash import bcrypt

from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.basic import password_credentials
from gateway.providers.authentication.credential_cache import CredentialCache
from gateway.providers.authentication.settings import ProviderSettings
from gateway.providers.authentication.throttle import password_check

log = logging.getLogger(__name__)

# Checked against when the user does not exist, so that the answer takes as long either way.
_DUMMY_HASH = bcrypt.using(rounds=10).hash("not-a-password")
_RELOAD_CHECK_SECONDS = 1.0


class HtpasswdProvider(ProviderSettings):
    """HTTP Basic (RFC 7617) against an Apache ``htpasswd`` file (bcrypt hashes, ``htpasswd -B``)."""

    type: Literal["htpasswd"]
    realm: str = "HMS Gateway"
    users_file: Path

    path_fields: ClassVar[tuple[str, ...]] = ("users_file",)

    authenticator: ClassVar[str] = "gateway.providers.authentication.htpasswd:HtpasswdAuthenticator"


class HtpasswdAuthenticator:
    """Basic (RFC 7617) against ``users_file``; 401 challenge ``Basic realm="<realm>"``."""

    name = "htpasswd"
    #: Checks user and password (Basic, or a form's client credentials: basic.password_credentials).
    checks_passwords = True

    def __init__(self, config: HtpasswdProvider, cache: CredentialCache | None = None):
        self.realm = config.realm
        self._path = Path(config.users_file)
        self._file = HtpasswdFile(str(self._path))
        self._checked = time.monotonic()
        self._cache = cache if cache is not None else CredentialCache()

    def challenge(self) -> str:
        return f'Basic realm="{self.realm}", charset="UTF-8"'

    def _reload_if_changed(self) -> None:
        now = time.monotonic()
        if now - self._checked < _RELOAD_CHECK_SECONDS:
            return
        self._checked = now
        try:
            if self._file.load_if_changed():
                self._cache.clear()
                log.info("reloaded users file %s", self._path)
        except (OSError, ValueError) as exc:
            log.error("cannot reload users file %s (%s); keeping the previous one", self._path, exc)

    def _verify(self, user: str, password: str) -> bool:
        try:
            ok = self._file.check_password(user, password)
        except ValueError:  # bcrypt refuses passwords over 72 bytes: such credentials fail
            ok = None
        if ok is None:  # unknown user or refused password: spend the same time as a real check
            bcrypt.verify(password.encode("utf-8")[:72], _DUMMY_HASH)
            return False
        return bool(ok)

    async def authenticate(self, request: web.Request) -> Principal | None:
        creds = password_credentials(request)
        if creds is None:
            return None
        user, password = creds
        self._reload_if_changed()
        cached = self._cache.get(user, password)
        if cached is not None:  # the usual case: no check to set up
            return cached  # type: ignore[return-value]
        loop = asyncio.get_running_loop()

        async def check() -> Principal | None:
            ok = await password_check(request, lambda: loop.run_in_executor(None, self._verify, user, password))
            return Principal(name=user, provider=self.name) if ok else None
        return await self._cache.verified(user, password, check)
