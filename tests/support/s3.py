"""A real S3/STS/IAM API server for tests: ``moto_server`` (moto's server mode) in a child
process, with IAM authentication on (``INITIAL_NO_AUTH_ACTION_COUNT``: the first
:data:`SETUP_CALLS` requests, this module's own setup, pass unauthenticated; every later request
is checked).

What moto checks there (probed with moto 5.2, and relied on by the tests): the SigV4 signature
(``SignatureDoesNotMatch``), the access key (``InvalidAccessKeyId``), an assumed role's session
token (``InvalidToken``), and the identity policies of IAM users and of the assumed role
(``AccessDenied``). It does NOT enforce an ``AssumeRole`` session policy, nor the expiry of
temporary credentials.

Setup: user ``gateway`` (its key: the gateway's own), allowed ``s3:*`` on bucket
:data:`BUCKET` and ``sts:AssumeRole``; role :data:`ROLE` allowed ``s3:*`` on :data:`BUCKET`
only; the bucket, created by ``gateway``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import boto3
from botocore.config import Config

BUCKET, OTHER_BUCKET, ROLE, REGION = "warehouse", "otherbucket", "iceberg-vended", "us-east-1"
SETUP_CALLS = 5


@dataclass
class RunningS3:
    endpoint: str
    access_key: str
    secret_key: str = field(repr=False)
    role_arn: str
    process: subprocess.Popen

    def client(self, service: str, access_key: str | None = None, secret_key: str | None = None,
               token: str | None = None):
        """A boto3 client of ``service`` with the given key (default: the gateway's)."""
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=access_key or self.access_key,
                            aws_secret_access_key=secret_key or self.secret_key, aws_session_token=token,
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

    def credentials_file(self, path: Path) -> Path:
        """Write the gateway's key as an AWS shared-credentials file at ``path``."""
        path.write_text(f"[default]\naws_access_key_id = {self.access_key}\n"
                        f"aws_secret_access_key = {self.secret_key}\n")
        return path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_s3(log: Path) -> RunningS3:
    """Start ``moto_server`` on a free port, set up user, role and bucket (see the module)."""
    port = _free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_CALLS)}
    with open(log, "wb") as out:
        process = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1",
                                    "-p", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"moto_server did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
    iam = boto3.client("iam", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup",
                       aws_secret_access_key="setup")
    iam.create_user(UserName="gateway")  # 1
    key = iam.create_access_key(UserName="gateway")["AccessKey"]  # 2
    iam.put_user_policy(UserName="gateway", PolicyName="warehouse", PolicyDocument=json.dumps({  # 3
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
    running.client("s3").create_bucket(Bucket=BUCKET)
    return running
