"""Service kinds: a service's ``kind`` in its topology picks the handler that serves it (Knox's
service role made meaningful). Each kind is one module; :data:`KINDS` is the registry.

A kind is built per service at topology build time (``build(service config, topology, chain,
context)``) and serves one routed request with ``handle(exchange) -> (response, outcome)``,
raising a pipeline outcome (:mod:`gateway.pipeline.outcomes`) to end a request early.
"""

from __future__ import annotations

from gateway.services.thrift_rpc import ThriftRpcService

#: ``kind`` in a topology's service → the class that serves it.
KINDS = {
    ThriftRpcService.kind: ThriftRpcService,
}
