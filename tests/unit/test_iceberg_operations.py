"""The Iceberg REST operation registry: every route has a handler, every handler is registered
for a route, and each has the one handler signature."""

from __future__ import annotations

import inspect

import pytest

from gateway.iceberg.operations import OPERATIONS, PUBLIC, handler
from gateway.iceberg.routes import ROUTES


def test_every_route_has_a_registered_handler_and_every_handler_a_route():
    assert {operation for _, _, operation in ROUTES} == set(OPERATIONS)
    assert PUBLIC <= set(OPERATIONS)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_each_handler_resolves_and_has_the_one_signature(operation):
    function = handler(operation)
    assert inspect.iscoroutinefunction(function)
    assert list(inspect.signature(function).parameters) == ["catalog", "route", "request", "body"]


def test_an_unregistered_operation_is_a_lookup_error():
    with pytest.raises(LookupError, match="noSuchOperation"):
        handler("noSuchOperation")


#: Routes that are not the REST catalog spec's: the S3 remote signer (per table, as Apache
#: Polaris serves it; its request and answer follow Iceberg's s3-signer-open-api.yaml).
NOT_IN_THE_CATALOG_SPEC = {"signS3Request"}


def test_every_route_is_the_spec_s_path_method_and_operation_id():
    import yaml

    from tests.support.iceberg.spec import SPEC_FILE

    paths = yaml.safe_load(SPEC_FILE.read_text())["paths"]
    for method, template, operation in ROUTES:
        if operation in NOT_IN_THE_CATALOG_SPEC:
            continue
        spec_template = template if template in ("/v1/config", "/v1/oauth/tokens") \
            else template.replace("/v1/", "/v1/{prefix}/", 1)
        assert paths[spec_template][method.lower()]["operationId"] == operation, (method, template)
