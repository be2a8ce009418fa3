"""A real S3/STS/IAM API server for tests: moto in server mode with IAM authentication on. The
server, its setup (user ``gateway`` with the gateway's key, role :data:`ROLE`, bucket
:data:`BUCKET`) and what moto checks are :mod:`demo.s3`'s, shared with
``make run S3=1``; see that module."""

from __future__ import annotations

from demo.s3 import BUCKET, REGION, ROLE, SETUP_CALLS, RunningS3, start_s3

__all__ = ["BUCKET", "REGION", "ROLE", "SETUP_CALLS", "RunningS3", "start_s3"]
