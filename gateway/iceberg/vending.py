"""Access delegation (the spec's ``X-Iceberg-Access-Delegation``): temporary S3 credentials
scoped to one table's location, from STS ``AssumeRole`` with a session policy, through botocore.

A session policy can only narrow the role's own policy (IAM's policy evaluation: the effective
permissions are the intersection), so what a client gets is at most: ``s3:GetObject`` under the
table's prefix and ``s3:ListBucket`` of that prefix (``select``), plus ``s3:PutObject``,
``s3:DeleteObject`` and multipart calls there (``update``). The gateway's own key never leaves
it: clients get the assumed role's temporary key, its session token and its expiry.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from gateway.iceberg import errors
from gateway.lakehouse.storage import S3Storage, split_location

HEADER = "X-Iceberg-Access-Delegation"
VENDED, SIGNING = "vended-credentials", "remote-signing"

READ_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion")
WRITE_ACTIONS = ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                 "s3:ListMultipartUploadParts")
_SESSION_NAME = re.compile(r"[^\w+=,.@-]")


@dataclass(frozen=True)
class TemporaryCredentials:
    """An STS session: key, secret, token, and when it expires (aware datetime)."""

    access_key: str
    secret_key: str = field(repr=False)
    token: str = field(repr=False)
    expiration: datetime

    @property
    def expires_at_ms(self) -> int:
        return int(self.expiration.timestamp() * 1000)


def requested(header: str | None) -> list[str]:
    """The delegation modes a client asked for, in its order (comma-separated; unknown ones
    are kept and ignored by the caller)."""
    return [mode.strip().lower() for mode in (header or "").split(",") if mode.strip()]


def session_policy(location: str, write: bool) -> dict:
    """The IAM session policy for ``location`` (an ``s3://bucket/key`` table location): read
    (and with ``write``, write) the objects under ``key/``, list only that prefix. Raises
    ``ValueError`` for a location that is not S3, or a bucket root (which would grant the
    whole bucket)."""
    bucket, prefix = split_location(location)
    if not prefix:
        raise ValueError(f"{location[:200]!r} is a bucket root, not a table location")
    objects = f"arn:aws:s3:::{bucket}/{prefix}*"
    statements = [
        {"Sid": "TableObjects", "Effect": "Allow",
         "Action": list(READ_ACTIONS + (WRITE_ACTIONS if write else ())), "Resource": [objects]},
        {"Sid": "TableListing", "Effect": "Allow", "Action": ["s3:ListBucket"],
         "Resource": [f"arn:aws:s3:::{bucket}"], "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}}},
        {"Sid": "BucketLocation", "Effect": "Allow", "Action": ["s3:GetBucketLocation"],
         "Resource": [f"arn:aws:s3:::{bucket}"]},
    ]
    return {"Version": "2012-10-17", "Statement": statements}


class Vendor:
    """Assumes ``options.role_arn`` with the gateway's key, one session per table location and
    access; :meth:`signing_credentials` keeps sessions for the remote signer until they are
    within a quarter of their lifetime of expiring."""

    def __init__(self, storage: S3Storage):
        self.storage = storage
        session = botocore.session.Session()
        session.set_credentials(*_key(storage))
        self._sts = session.create_client(
            "sts", region_name=storage.options.region, endpoint_url=storage.options.sts_url,
            config=Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=15))
        self._cache: dict[tuple[str, bool], TemporaryCredentials] = {}
        self._lock = threading.Lock()

    async def credentials(self, location: str, write: bool, user: str) -> TemporaryCredentials:
        """Fresh credentials for ``location`` (``write``: read-write), the STS session named
        after ``user``. Raises :class:`errors.ServiceFailure` when STS fails, and
        :class:`errors.BadRequest` for a table not on S3."""
        return await asyncio.to_thread(self._assume, location, write, f"iceberg-{user}")

    async def signing_credentials(self, location: str, write: bool) -> TemporaryCredentials:
        """Credentials the remote signer signs with for ``location``, reused while they have
        more than a quarter of their lifetime left. Raises as :meth:`credentials`."""
        key = (location, write)
        cached = self._cache.get(key)
        lifetime = self.storage.options.credentials_expiry_seconds
        if cached is not None and cached.expiration.timestamp() - time.time() > lifetime / 4:
            return cached
        fresh = await asyncio.to_thread(self._assume, location, write, "iceberg-signer")
        with self._lock:
            if len(self._cache) > 10_000:  # bounded: one entry per table and access
                self._cache.clear()
            self._cache[key] = fresh
        return fresh

    def _assume(self, location: str, write: bool, name: str) -> TemporaryCredentials:
        try:
            policy = session_policy(location, write)
        except ValueError as exc:
            raise errors.BadRequest(f"cannot delegate access: {exc}") from None
        try:
            answer = self._sts.assume_role(
                RoleArn=self.storage.options.role_arn, RoleSessionName=_SESSION_NAME.sub("_", name)[:64],
                Policy=json.dumps(policy, separators=(",", ":")),
                DurationSeconds=self.storage.options.credentials_expiry_seconds)
        except ClientError as exc:  # the message names the role and the error, never the key
            error = exc.response.get("Error", {})
            raise errors.ServiceFailure(f"STS AssumeRole failed: {error.get('Code')}: "
                                        f"{str(error.get('Message'))[:300]}") from None
        except BotoCoreError as exc:
            raise errors.ServiceFailure(f"STS AssumeRole failed: {type(exc).__name__}") from None
        found = answer["Credentials"]
        return TemporaryCredentials(found["AccessKeyId"], found["SecretAccessKey"], found["SessionToken"],
                                    found["Expiration"])


def _key(storage: S3Storage) -> tuple[str, str, str | None]:
    frozen = storage.credentials.get_frozen_credentials()
    return frozen.access_key, frozen.secret_key, frozen.token


def vended_config(storage: S3Storage, credentials: TemporaryCredentials) -> dict[str, str]:
    """FileIO properties of vended ``credentials`` (PyIceberg's and Iceberg Java's keys)."""
    return {**storage.client_config(),
            "s3.access-key-id": credentials.access_key, "s3.secret-access-key": credentials.secret_key,
            "s3.session-token": credentials.token,
            "s3.session-token-expires-at-ms": str(credentials.expires_at_ms)}
