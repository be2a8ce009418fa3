"""A local S3/STS/IAM API server for ``python -m demo --storage s3`` (``make run S3=1``) and the
tests: moto's server mode (``pip install -e '.[demo-s3]'``) in a child process, with IAM
authentication on (``INITIAL_NO_AUTH_ACTION_COUNT``: the first :data:`SETUP_CALLS` requests,
:func:`start_s3`'s own setup, pass unauthenticated; every later request is checked).

What moto checks there (probed with moto 5.2, and relied on by the tests): the SigV4 signature
(``SignatureDoesNotMatch``), the access key (``InvalidAccessKeyId``), an assumed role's session
token (``InvalidToken``), and the identity policies of IAM users and of the assumed role
(``AccessDenied``). moto alone does not enforce an ``AssumeRole`` session policy, the expiry of
temporary credentials, or a copy's read of its source: the server runs as
:mod:`demo.moto_iam`, which adds those checks, so a key vended for one table reaches
that table's prefix only, as on AWS. Its state lives in memory: a restart is an empty server.

Setup: user ``gateway`` (its key: the gateway's own, which only :meth:`RunningS3.credentials_file`
writes out, and which no ``repr`` shows), allowed ``s3:*`` on bucket :data:`BUCKET` and
``sts:AssumeRole``; role :data:`ROLE` allowed ``s3:*`` on :data:`BUCKET` only; the bucket,
created by ``gateway``.

:func:`s3_topologies` writes the demo's topologies with ``options.s3`` on every ``iceberg-rest``
service (docs/iceberg.md, "Storage access on S3") and the change feed's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from demo import child_env, module_command


__all__ = ["BUCKET", "REGION", "ROLE", "SETUP_CALLS", "RunningS3", "s3_topologies", "start_s3"]

BUCKET, ROLE, REGION = "warehouse", "iceberg-vended", "us-east-1"
SETUP_CALLS = 5
_USER = "gateway"
_SESSION = None


def _botocore_session():
    global _SESSION
    if _SESSION is None:
        import botocore.session

        _SESSION = botocore.session.Session()
    return _SESSION


@dataclass
class RunningS3:
    """A started server: its URL, the gateway's key (secret: left out of ``repr``), the role's ARN."""

    endpoint: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    role_arn: str
    process: subprocess.Popen = field(repr=False)

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    def client(self, service: str, access_key: str | None = None, secret_key: str | None = None,
               token: str | None = None):
        """A botocore client of ``service`` (``s3``, ``iam``, ``sts``) on this server, with the
        given key (default: the gateway's), path-style addressing, no retries."""
        from botocore.config import Config

        return _botocore_session().create_client(
            service, endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id=access_key or self.access_key, aws_secret_access_key=secret_key or self.secret_key,
            aws_session_token=token, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

    def credentials_file(self, path: Path) -> Path:
        """Write the gateway's key as an AWS shared-credentials file at ``path`` (mode 0600,
        profile ``default``); returns ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(f"[default]\naws_access_key_id = {self.access_key}\n"
                      f"aws_secret_access_key = {self.secret_key}\n")
        return path

    def stop(self) -> None:
        """Terminate the server (kill it after 10 s); idempotent."""
        _stop(self.process)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def moto_server() -> list[str]:
    """The command running moto's server with :mod:`demo.moto_iam`'s checks. Raises
    RuntimeError when moto's server is not installed."""
    if importlib.util.find_spec("moto") is None or importlib.util.find_spec("moto.server") is None \
            or importlib.util.find_spec("werkzeug") is None:
        raise RuntimeError("moto's S3 server is not installed: pip install -e '.[demo-s3]' "
                           "(make run S3=1 installs it)")
    return module_command("demo.moto_iam")


def start_s3(log: Path, *, host: str = "127.0.0.1", port: int = 0, timeout: float = 60) -> RunningS3:
    """Start ``moto_server`` on ``host:port`` (0: the server binds a free port and prints it),
    its output appended to ``log``, and set up user, role and bucket (see the module). Raises
    RuntimeError with the log's tail when the server does not listen within ``timeout``
    seconds or exits; stops it on a failed setup."""
    command = moto_server()
    env = child_env({**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_CALLS)})
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        start = out.tell()
        process = subprocess.Popen([*command, "-H", host, "-p", str(port)], env=env,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            with open(log, "rb") as out:
                out.seek(start)
                # werkzeug prints the bound address: " * Running on http://127.0.0.1:PORT"
                found = re.search(rb"Running on https?://[^\s:]+:(\d+)", out.read())
            if found:
                endpoint = f"http://{host}:{int(found.group(1))}"
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not start on {host}:{port}: "
                                   f"{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        running = _set_up(endpoint, process)
    except BaseException:
        _stop(process)
        raise
    # Stopped with the interpreter at the latest (the demo stops it itself).
    weakref.finalize(running, _stop, process)
    return running


def _set_up(endpoint: str, process: subprocess.Popen) -> RunningS3:
    setup = RunningS3(endpoint, "setup", "setup", "", process)
    iam = setup.client("iam")
    iam.create_user(UserName=_USER)  # 1
    key = iam.create_access_key(UserName=_USER)["AccessKey"]  # 2
    iam.put_user_policy(UserName=_USER, PolicyName="warehouse", PolicyDocument=json.dumps({  # 3
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:*"],
             "Resource": [f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{BUCKET}/*"]},
            {"Effect": "Allow", "Action": ["sts:AssumeRole"], "Resource": "*"}]}))
    role = iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps({  # 4
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"},
                                                "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
    iam.put_role_policy(RoleName=ROLE, PolicyName="warehouse", PolicyDocument=json.dumps({  # 5
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:*"],
             "Resource": [f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{BUCKET}/*"]}]}))
    running = RunningS3(endpoint, key["AccessKeyId"], key["SecretAccessKey"], role, process)
    running.client("s3").create_bucket(Bucket=BUCKET)  # the first authenticated call
    return running


def s3_topologies(source: Path, target: Path, s3_options: dict) -> Path:
    """Write every topology of ``source`` (a ``topologies_dir``) into ``target`` with
    ``options.s3`` = ``s3_options`` on each ``iceberg-rest`` service and ``options.iceberg.s3`` =
    the same on each ``event-stream`` service (it reads Iceberg metadata files for commit
    events); returns ``target`` (:func:`demo.topologies.rewrite_topologies`). Raises
    :class:`gateway.config.ConfigError` for a bad source file."""
    from demo.topologies import rewrite_topologies

    def edit(service: dict) -> None:
        options = service.setdefault("options", {})
        if service.get("kind") == "iceberg-rest":
            options["s3"] = dict(s3_options)
            # the bucket is a warehouse besides HMS's own (gateway/iceberg/locations.py)
            options["allowed_locations"] = [f"s3://{BUCKET}/"]
        elif service.get("kind") == "event-stream":
            options["iceberg"] = {**options.get("iceberg", {}), "s3": dict(s3_options)}

    return rewrite_topologies(source, target, edit, "the local S3 server's settings")
