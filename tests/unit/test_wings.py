"""A wing per protocol (issue 41): each service kind lives in its protocol's wing, the wings
stand on the shared floors and arrows point down: no floor imports a wing, no wing imports
another wing's modules (issue 48: what two wings need is on a shared floor), and only the
registries (``KINDS``, ``STEPS``) name the wings, as ``"module:Class"`` strings."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.config import ServiceConfig
from gateway.handler import GatewayHandler
from gateway.hms_thrift.exchange import ThriftExchange
from gateway.limits import ConcurrencyLimiter
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.steps import STEPS
from gateway.services import KINDS, service_kind
from gateway.topology import Router, Service, Topology
from test_import_graph import import_graph

WINGS = ("gateway.hms_thrift", "gateway.iceberg", "gateway.glue", "gateway.events", "gateway.explorer")
#: What every wing may stand on.
FLOORS = ("gateway.pipeline", "gateway.services", "gateway.cache", "gateway.policy", "gateway.providers",
          "gateway.upstream", "gateway.thrift", "gateway.observability", "gateway.config", "gateway.lakehouse")
#: The registries: they name the wings' classes as strings, imported when a topology asks.
REGISTRIES = {"gateway.services", "gateway.pipeline.steps"}


def _within(module: str, packages: tuple[str, ...]) -> str | None:
    return next((p for p in packages if module == p or module.startswith(p + ".")), None)


def test_each_kind_lives_in_its_wing():
    wings = {kind: KINDS[kind].partition(":")[0].rsplit(".", 1)[0] for kind in KINDS}
    assert wings == {"hms-thrift": "gateway.hms_thrift", "iceberg-rest": "gateway.iceberg", "glue": "gateway.glue",
                     "event-stream": "gateway.events", "explorer": "gateway.explorer"}
    assert all(KINDS[kind].startswith(wings[kind] + ".kind:") for kind in KINDS)
    thrift_only = {"method-exposure", "ugi-claim", "catalog-policy", "ownership-assertion"}
    assert {role for role, target in STEPS.items() if target.startswith("gateway.hms_thrift.")} == thrift_only


def _into_wings(graph: dict[str, set[str]]) -> list[str]:
    """The imports of ``graph`` that run into a wing from a floor or from another wing."""
    upward = []
    for module, targets in graph.items():
        if module in REGISTRIES:
            continue
        floor, wing = _within(module, FLOORS), _within(module, WINGS)
        for target in targets:
            into = _within(target, WINGS)
            if into is None:
                continue
            if floor is not None or wing not in (None, into):
                upward.append(f"{module} -> {target}")
    return sorted(upward)


def test_arrows_point_down():
    upward = _into_wings(import_graph())
    assert not upward, "imports that run up into a wing, or across into another: " + ", ".join(upward)


def test_the_check_sees_any_import_of_another_wing_s_module():
    graph = {"gateway.events.iceberg": {"gateway.iceberg.files", "gateway.lakehouse.file_io", "gateway.events.hcat"},
             "gateway.explorer.kind": {"gateway.hms_thrift.kind"},
             "gateway.lakehouse.storage": {"gateway.iceberg.vending"},
             "gateway.services": {"gateway.glue.kind"}}  # a registry names the wings
    assert _into_wings(graph) == ["gateway.events.iceberg -> gateway.iceberg.files",
                                  "gateway.explorer.kind -> gateway.hms_thrift.kind",
                                  "gateway.lakehouse.storage -> gateway.iceberg.vending"]


#: The shared floors, lowest first: a package imports only its own floor and those below it.
#: Each component keeps its settings model beside it, so that the configuration (which
#: assembles them) stands above every component it configures.
SHARED_FLOORS = (
    ("gateway.thrift", "gateway.settings_model", "gateway.registry", "gateway.client_address",
     "gateway.validation_errors", "gateway.worker_role", "gateway.limits", "gateway.paging"),
    ("gateway.observability",),
    ("gateway.providers",),
    ("gateway.upstream",),
    ("gateway.lakehouse",),
    ("gateway.config",),
    ("gateway.policy", "gateway.cache"),
    ("gateway.pipeline",),
    ("gateway.services",),
)


def _shared_floor(module: str) -> int | None:
    return next((i for i, floor in enumerate(SHARED_FLOORS) if _within(module, floor)), None)


def test_shared_floors_import_down_only():
    """No component below the configuration imports it (or anything higher): the upward
    arrows of issue 41 (providers, upstream and audit reading their settings from config.py)."""
    upward = []
    for module, targets in import_graph().items():
        floor = _shared_floor(module)
        if floor is None or module in REGISTRIES:
            continue
        upward += [f"{module} -> {t}" for t in targets if (_shared_floor(t) or 0) > floor]
    assert not upward, "imports that run up a floor: " + ", ".join(sorted(upward))


def test_shared_floor_check_sees_an_upward_import():
    assert _shared_floor("gateway.upstream.secure") < _shared_floor("gateway.config")
    assert _shared_floor("gateway.observability.audit") < _shared_floor("gateway.policy.view")
    assert _shared_floor("gateway.settings_model") == 0


def test_the_check_sees_an_upward_import():
    assert _within("gateway.cache.reads", FLOORS) == "gateway.cache"
    assert _within("gateway.hms_thrift.exchange", WINGS) == "gateway.hms_thrift"
    assert _within("gateway.iceberg_x", WINGS) is None


async def test_the_handler_builds_the_exchange_type_of_the_kind():
    seen = []

    class Kind:
        upstream = None

        async def handle(self, exchange):
            seen.append(type(exchange))
            return web.Response(), "ok"

    class ThriftKind(Kind):
        exchange_type = ThriftExchange

    assert service_kind("hms-thrift").exchange_type is ThriftExchange
    for handler in (Kind(), ThriftKind()):
        service = Service("t", ServiceConfig(kind="explorer", path="s"), ConcurrencyLimiter(1), handler)
        router = Router({"t": Topology("t", {"s": service})})
        await GatewayHandler(router)(make_mocked_request("POST", "/gateway/t/s"))
    assert seen == [Exchange, ThriftExchange]
