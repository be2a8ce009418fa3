"""The session-policy evaluation demo.moto_iam adds to moto's server (the server-side
checks are in tests/integration/test_iceberg_storage.py): the policies the gateway vends."""

from __future__ import annotations

import pytest

from demo.moto_iam import permits
from gateway.iceberg.vending import session_policy

READ = session_policy("s3://warehouse/lake/trips", write=False)
WRITE = session_policy("s3://warehouse/lake/trips", write=True)
OWN, ARN = "arn:aws:s3:::warehouse/lake/trips/data/a.parquet", "arn:aws:s3:::warehouse"


@pytest.mark.parametrize("policy, action, resource, context, allowed", [
    (READ, "s3:GetObject", OWN, {}, True),
    (READ, "S3:getobject", OWN, {}, True),                                          # actions: any case
    (READ, "s3:GetObject", "arn:aws:s3:::warehouse/lake/trips2/data/a", {}, False),  # sibling
    (READ, "s3:GetObject", "arn:aws:s3:::warehouse/lake/other/a", {}, False),
    (READ, "s3:GetObject", "arn:aws:s3:::other/lake/trips/a", {}, False),
    (READ, "s3:GetObject", "arn:aws:s3:::warehouse/LAKE/trips/a", {}, False),       # resources: exact case
    (READ, "s3:PutObject", OWN, {}, False),
    (READ, "s3:DeleteObject", OWN, {}, False),
    (WRITE, "s3:PutObject", OWN, {}, True),
    (WRITE, "s3:DeleteObject", "arn:aws:s3:::warehouse/lake/other/a", {}, False),
    (READ, "s3:ListBucket", ARN, {"s3:prefix": "lake/trips/"}, True),
    (READ, "s3:ListBucket", ARN, {"s3:prefix": "lake/trips/data/"}, True),
    (READ, "s3:ListBucket", ARN, {"s3:prefix": "lake/trips"}, False),                # lists trips2 too
    (READ, "s3:ListBucket", ARN, {"s3:prefix": "lake/"}, False),
    (READ, "s3:ListBucket", ARN, {}, False),                                         # no prefix: the bucket
    (READ, "s3:ListBucket", "arn:aws:s3:::other", {"s3:prefix": "lake/trips/"}, False),
    (READ, "s3:GetBucketLocation", ARN, {}, True),
    (READ, "s3:CreateBucket", "arn:aws:s3:::evil", {}, False),
])
def test_vended_session_policies(policy, action, resource, context, allowed):
    assert permits(policy, action, resource, context) is allowed


def test_unsupported_forms_fail_closed():
    anything = {"Effect": "Allow", "Action": "*", "Resource": "*"}
    assert permits({"Statement": [anything]}, "s3:GetObject", OWN, {})
    assert not permits({"Statement": [{**anything, "NotResource": "x"}]}, "s3:GetObject", OWN, {})
    assert not permits({"Statement": [{**anything, "Condition": {"IpAddress": {"aws:SourceIp": "1.2.3.4"}}}]},
                       "s3:GetObject", OWN, {})
    assert not permits({"Statement": [anything, {"Effect": "Deny", "NotAction": "s3:PutObject", "Resource": "*"}]},
                       "s3:GetObject", OWN, {})
    assert not permits({"Statement": [anything, {"Effect": "Deny", "Action": "s3:Get*", "Resource": OWN}]},
                       "s3:GetObject", OWN, {})
