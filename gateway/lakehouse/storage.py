"""An S3 warehouse's storage: the gateway's own credentials for it (the ``iceberg-rest`` kind's,
to read and write metadata files and to call STS for vended credentials and remote signing; the
change feed's, to read a commit's metadata file), configured once per service under
``options.s3`` (``event-stream``: ``options.iceberg.s3``).

The gateway's key is read from an AWS shared-credentials file (``credentials_file``, INI with
``aws_access_key_id``/``aws_secret_access_key``, section ``profile``) or, without one, from the
environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``), through
botocore's own providers (``SharedCredentialProvider``, ``EnvProvider``). It is never inline in
the topology, never logged, never answered: clients get STS credentials or signatures made with
them (:mod:`gateway.iceberg.vending`, :mod:`gateway.iceberg.signer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from botocore.credentials import Credentials, EnvProvider, SharedCredentialProvider
from gateway.settings_model import SettingsModel
from pydantic import Field, field_validator

#: STS's limits for ``AssumeRole`` ``DurationSeconds`` (AWS STS API reference).
STS_MIN_SECONDS, STS_MAX_SECONDS = 900, 43200


class S3Options(SettingsModel):
    """``options.s3`` of an ``iceberg-rest`` service (and ``options.iceberg.s3`` of an
    ``event-stream`` one, which reads only what a metadata file's read needs)."""

    #: S3 endpoint URL for S3-compatible stores (MinIO, moto, Ceph); empty: AWS
    #: (``https://s3.<region>.amazonaws.com``).
    endpoint: str = ""
    region: str = "us-east-1"
    #: STS endpoint URL; empty: ``endpoint`` when set, else AWS's regional STS.
    sts_endpoint: str = ""
    #: AWS shared-credentials file with the gateway's key (relative: to the topology file).
    #: Empty: the environment.
    credentials_file: str = ""
    profile: str = "default"
    #: The role ``AssumeRole`` takes for vended credentials and remote signing; its own policy
    #: bounds what any session policy can grant. Empty: neither is offered.
    role_arn: str = ""
    #: Lifetime of vended credentials, seconds (STS: 900 to 43200).
    credentials_expiry_seconds: int = Field(default=3600, ge=STS_MIN_SECONDS, le=STS_MAX_SECONDS)
    #: Path-style URLs (``endpoint/bucket/key``) for clients; S3-compatible stores want them.
    path_style: bool = True

    @field_validator("endpoint", "sts_endpoint")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname):
            raise ValueError(f"{value[:200]!r} is not an http(s) URL")
        return value.rstrip("/")

    @property
    def s3_endpoint(self) -> str:
        return self.endpoint or f"https://s3.{self.region}.amazonaws.com"

    @property
    def sts_url(self) -> str:
        return self.sts_endpoint or self.endpoint or f"https://sts.{self.region}.amazonaws.com"


@dataclass(frozen=True)
class S3Storage:
    """The service's S3 settings and the gateway's own credentials (``repr`` leaves them out)."""

    options: S3Options
    credentials: Credentials = field(repr=False)

    def file_io(self) -> dict[str, str]:
        """PyIceberg FileIO properties for the gateway's own reads and writes (secret)."""
        frozen = self.credentials.get_frozen_credentials()
        props = {"s3.endpoint": self.options.s3_endpoint, "s3.region": self.options.region,
                 "s3.access-key-id": frozen.access_key, "s3.secret-access-key": frozen.secret_key,
                 "s3.force-virtual-addressing": str(not self.options.path_style).lower()}
        if frozen.token:
            props["s3.session-token"] = frozen.token
        return props

    def client_config(self) -> dict[str, str]:
        """FileIO properties every client needs besides credentials (no secret)."""
        return {"s3.endpoint": self.options.s3_endpoint, "s3.region": self.options.region,
                "s3.path-style-access": str(self.options.path_style).lower(),
                "s3.force-virtual-addressing": str(not self.options.path_style).lower()}


def load_storage(options: S3Options, base: Path) -> S3Storage:
    """The storage of ``options``, with the gateway's key read now. ``base``: the directory a
    relative ``credentials_file`` is in. Raises ``ValueError(key, reason)`` (``args``: the
    option's key and why) when no key is found."""
    if options.credentials_file:
        path = Path(options.credentials_file)
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            raise ValueError("s3.credentials_file", f"{path} does not exist or is not a file")
        try:
            found = SharedCredentialProvider(str(path), options.profile).load()
        except Exception as exc:  # botocore: a partial profile, an unparsable file
            raise ValueError("s3.credentials_file", f"{path}: {type(exc).__name__}") from None
        if found is None:
            raise ValueError("s3.profile", f"{path} has no profile {options.profile!r} with "
                                           "aws_access_key_id and aws_secret_access_key")
    else:
        found = EnvProvider().load()
        if found is None:
            raise ValueError("s3.credentials_file", "not set, and AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
                                                    "are not in the environment")
    return S3Storage(options, found)


#: Location schemes of S3 (Hadoop's ``s3a``/``s3n`` too).
S3_SCHEMES = ("s3", "s3a", "s3n")


def on_s3(location: str) -> bool:
    """Whether ``location`` is an S3 URI (:data:`S3_SCHEMES`)."""
    return location.startswith(tuple(f"{scheme}://" for scheme in S3_SCHEMES))


def split_location(location: str) -> tuple[str, str]:
    """``(bucket, key prefix)`` of an ``s3://``/``s3a://``/``s3n://`` location; the prefix has no
    leading and one trailing ``/`` (``""`` for a whole bucket). Raises ``ValueError``."""
    parts = urlsplit(location)
    if parts.scheme not in S3_SCHEMES or not parts.netloc:
        raise ValueError(f"not an S3 location: {location[:200]!r}")
    key = parts.path.strip("/")
    return parts.netloc, f"{key}/" if key else ""
