"""The Iceberg REST route table (gateway/iceberg/routes.py): one row per operation with its
method, path, request and response models and handler; each handler has the one signature;
``GET /v1/config``'s endpoints and the names a warehouse may not take derive from it."""

from __future__ import annotations

import inspect
import types

import pytest
from pydantic import BaseModel

from gateway.iceberg.paths import NEVER_PREFIXED, RESERVED_PREFIXES
from gateway.iceberg.routes import ENDPOINTS, ROUTES, route_of


def test_one_row_per_operation_and_per_method_and_path():
    assert len({row.operation for row in ROUTES}) == len(ROUTES)
    assert len({(row.method, row.path) for row in ROUTES}) == len(ROUTES)
    assert NEVER_PREFIXED <= {row.operation for row in ROUTES}
    assert [row.operation for row in ROUTES if row.public] == ["getToken"]


@pytest.mark.parametrize("row", ROUTES, ids=lambda row: row.operation)
def test_each_handler_has_the_one_signature_and_models_are_pydantic(row):
    assert inspect.iscoroutinefunction(row.handler)
    assert list(inspect.signature(row.handler).parameters) == ["catalog", "route", "request", "ask"]
    for model in (row.request, row.response):
        members = model.__args__ if isinstance(model, types.UnionType) else (model,)
        assert all(m is None or issubclass(m, BaseModel) for m in members), (row.operation, model)
    assert route_of(row.operation) is row


def test_an_unknown_operation_is_a_key_error():
    with pytest.raises(KeyError):
        route_of("noSuchOperation")


def test_config_endpoints_and_reserved_prefixes_derive_from_the_table():
    assert ENDPOINTS == tuple(f"{row.method} {row.path.replace('/v1/', '/v1/{prefix}/', 1)}"
                              for row in ROUTES if row.listed)
    assert RESERVED_PREFIXES == {row.path.split("/")[2] for row in ROUTES}


#: Routes that are not the REST catalog spec's: the S3 remote signer (per table, as Apache
#: Polaris serves it; its request and answer follow Iceberg's s3-signer-open-api.yaml).
NOT_IN_THE_CATALOG_SPEC = {"signS3Request"}


def test_every_route_is_the_spec_s_path_method_and_operation_id():
    import yaml

    from tests.support.iceberg.spec import SPEC_FILE

    paths = yaml.safe_load(SPEC_FILE.read_text())["paths"]
    for row in ROUTES:
        if row.operation in NOT_IN_THE_CATALOG_SPEC:
            continue
        spec_template = row.path if row.path in ("/v1/config", "/v1/oauth/tokens") \
            else row.path.replace("/v1/", "/v1/{prefix}/", 1)
        assert paths[spec_template][row.method.lower()]["operationId"] == row.operation, (row.method, row.path)
        body = paths[spec_template][row.method.lower()].get("requestBody")
        assert (row.request is None) == (body is None) or row.operation in ("getToken", "commitTransaction"), \
            row.operation
