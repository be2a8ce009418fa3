"""The boto3 program the demo prints for its ``glue`` topology (config/topologies/glue.yaml):
boto3's glue client, signing with SigV4 with the demo's access keys (demo/aws_keys.py),
lists the tables of the demo's ``sales`` database. docs/glue.md leads with the same program (a
unit test keeps them equal; tests/integration/test_doc_snippets.py runs it)."""

from __future__ import annotations

#: The demo's Glue service (topology ``glue``, service path ``api``).
GLUE_PATH = "gateway/glue/api"


def glue_url(port: int) -> str:
    """The demo's Glue endpoint (boto3's ``endpoint_url``)."""
    return f"https://localhost:{port}/{GLUE_PATH}"


def boto3_program(url: str, ca: str, credentials: str, profile: str = "admin") -> str:
    """A Python program: boto3's glue client at ``url`` trusting the CA file ``ca``, with the
    access key of ``profile`` in the shared-credentials file ``credentials``, pages through
    ``get_tables`` of database ``sales`` (``# →`` its output on the demo catalog)."""
    return f"""\
import os

import boto3

# the demo's access keys, one profile per demo user (make run writes the file; AWS's format)
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = "{credentials}"
glue = boto3.Session(profile_name="{profile}").client(
    "glue", endpoint_url="{url}", region_name="us-east-1",
    verify="{ca}")  # the demo's development CA
for page in glue.get_paginator("get_tables").paginate(DatabaseName="sales"):
    for table in page["TableList"]:
        print(table["Name"], [c["Name"] for c in table["StorageDescriptor"]["Columns"]])
# → customers ['customer', 'country', 'since']
# → orders ['order_id', 'customer', 'amount', 'order_date']
"""
