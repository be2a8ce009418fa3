"""The glue service kind's own answers, with fakes for the step chain and the upstream: every
way a request can end early comes back in Glue's error shape with AWS's status."""

from __future__ import annotations

import asyncio
import json
from unittest import mock

import pytest
from aiohttp.streams import StreamReader
from aiohttp.test_utils import make_mocked_request

from gateway.config import Limits
from gateway.observability.audit import AuditEvent
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import Forbidden, MethodNotAllowed, Unauthenticated
from gateway.thrift.objects import encode_reply
from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.sigv4 import REFUSAL, SIGNED_BODY, Refusal
from gateway.providers.authentication.throttle import Throttled
from gateway.providers.identity import Identity
from gateway.glue.kind import GlueOptions, GlueService
from gateway.thrift.binary import read_message_header
from gateway.upstream.errors import UpstreamTimeout, UpstreamUnavailable
from tests.unit.test_glue_shapes import IDL, SCHEMA

ALICE = Identity("alice", Principal("alice", "htpasswd"), frozenset({"analysts"}))


class Chain:
    """The request-side steps: sets alice as the identity, or raises ``error``."""

    def __init__(self, error: Exception | None = None):
        self.error = error
        self.body_seen: bytes | None = None

    async def on_request(self, exchange: Exchange) -> None:
        self.body_seen = exchange.request.get(SIGNED_BODY)
        if self.error is not None:
            raise self.error
        exchange.identity = ALICE


class Upstream:
    """HMS: answers get_database, or raises ``error``; records the identity of each call."""

    def __init__(self, error: Exception | None = None):
        self.error, self.identities = error, []

    async def call(self, message: bytes, *, identity=None, read_only=False, **_):
        self.identities.append(identity)
        if self.error is not None:
            raise self.error
        header, _ = read_message_header(message)
        result = SCHEMA.methods[header.name].result_class
        return encode_reply(header.name, header.seqid, result(success=IDL.Database(name="sales", parameters={})))


def service(chain=None, upstream=None, limits=None) -> GlueService:
    return GlueService("default", "glue", upstream or Upstream(), chain or Chain(), SCHEMA, None,
                       limits or Limits(), GlueOptions(catalog_id="42"))


def request(body: bytes = b'{"Name": "sales"}', target: str = "AWSGlue.GetDatabase", method: str = "POST",
            headers=None) -> Exchange:
    reader = StreamReader(mock.Mock(_reading_paused=False), 2**16, loop=asyncio.get_running_loop())
    reader.feed_data(body)
    reader.feed_eof()
    req = make_mocked_request(method, "/gateway/default/glue", payload=reader, headers={
        "X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.1",
        "Content-Length": str(len(body)), **(headers or {})})
    return Exchange(req, AuditEvent("req-1", "127.0.0.1"))  # type: ignore[arg-type]


def answer(response) -> tuple[int, str | None, dict]:
    body = json.loads(response.body)
    assert response.content_type == "application/x-amz-json-1.1"
    assert response.headers["x-amzn-RequestId"] == "req-1"
    return response.status, body.get("__type"), body


async def test_an_operation_is_answered_as_glue_does_with_hms_called_as_the_user():
    upstream, chain = Upstream(), Chain()
    response, outcome = await service(chain, upstream).handle(request())
    assert answer(response)[2] == {"Database": {"Name": "sales", "Parameters": {}, "CatalogId": "42"}}
    assert outcome == "ok" and upstream.identities == [ALICE]
    assert chain.body_seen == b'{"Name": "sales"}'  # read before authentication, for SigV4


@pytest.mark.parametrize("error, status, code, label", [
    (Unauthenticated("no", [("WWW-Authenticate", 'Basic realm="x"')]), 401,
     "MissingAuthenticationTokenException", "unauthenticated"),
    (Forbidden("doAs refused"), 403, "AccessDeniedException", "forbidden"),
    (Throttled(7), 429, "ThrottlingException", "throttled"),
])
async def test_step_refusals_are_glue_errors(error, status, code, label):
    response, outcome = await service(Chain(error)).handle(request())
    assert answer(response)[:2] == (status, code) and outcome == label
    if isinstance(error, Unauthenticated):
        assert response.headers["WWW-Authenticate"] == 'Basic realm="x"'
    if isinstance(error, Throttled):
        assert response.headers["Retry-After"] == "7"


async def test_a_refused_signature_is_answered_as_aws_answers_it():
    exchange = request()
    exchange.request[REFUSAL] = Refusal("InvalidSignatureException", 403, "Signature expired: …")
    response, _ = await service(Chain(Unauthenticated("no"))).handle(exchange)
    status, code, body = answer(response)
    assert (status, code, body["message"]) == (403, "InvalidSignatureException", "Signature expired: …")


BASIC_AND_BEARER = [("WWW-Authenticate", 'Basic realm="HMS Gateway"'), ("WWW-Authenticate", "Bearer")]


async def test_a_signature_on_a_topology_without_sigv4_is_told_which_schemes_it_accepts():
    """The demo's Basic-only Glue topology once answered boto3 a bare "Missing Authentication
    Token" (issue 40): the message now says SigV4 is not accepted there, and what is."""
    signed = request(headers={"Authorization": "AWS4-HMAC-SHA256 Credential=AKIAX/20261128/us-east-1/glue/"
                                                "aws4_request, SignedHeaders=host, Signature=00"})
    response, outcome = await service(Chain(Unauthenticated("no", BASIC_AND_BEARER))).handle(signed)
    status, code, body = answer(response)
    assert (status, code, outcome) == (401, "MissingAuthenticationTokenException", "unauthenticated")
    assert body["message"] == ("Missing Authentication Token: this service does not accept AWS Signature Version 4 "
                               "(AWS4-HMAC-SHA256; its topology has no sigv4 provider). It accepts: Basic, Bearer.")
    assert response.headers.getall("WWW-Authenticate") == ['Basic realm="HMS Gateway"', "Bearer"]


async def test_no_credentials_names_the_accepted_schemes():
    challenges = [("WWW-Authenticate", "AWS4-HMAC-SHA256"), *BASIC_AND_BEARER]
    response, _ = await service(Chain(Unauthenticated("no", challenges))).handle(request())
    assert answer(response)[2]["message"] == \
        "Missing Authentication Token. This service accepts: AWS4-HMAC-SHA256, Basic, Bearer."


@pytest.mark.parametrize("error, status, code", [
    (UpstreamTimeout("HMS did not answer in 30 s"), 400, "OperationTimeoutException"),
    (UpstreamUnavailable("connection refused"), 503, "ServiceUnavailableException"),
])
async def test_upstream_failures_are_glue_errors(error, status, code):
    response, _ = await service(upstream=Upstream(error)).handle(request())
    assert answer(response)[:2] == (status, code)


async def test_unknown_targets_and_bodies_that_are_not_objects():
    response, _ = await service().handle(request(target="AWSGlue.DeleteDatabase"))
    assert answer(response)[:2] == (400, "UnknownOperationException")
    response, _ = await service().handle(request(target="DynamoDB_20120810.GetItem"))
    assert answer(response)[:2] == (400, "UnknownOperationException")
    response, _ = await service().handle(request(body=b'"just a string"'))
    assert answer(response)[:2] == (400, "SerializationException")


async def test_a_body_over_the_limit_is_413_and_not_post_is_405():
    response, outcome = await service(limits=Limits(max_request_bytes=8)).handle(request())
    assert answer(response)[:2] == (413, "RequestEntityTooLargeException") and outcome == "too_large"
    with pytest.raises(MethodNotAllowed):
        await service().handle(request(method="GET"))
