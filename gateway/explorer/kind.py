"""Service kind ``explorer``: a catalog explorer served to browsers (issue 15).

The gateway serves only static files (``gateway/explorer/static``, shipped in the wheel) and the
schema descriptor of the calls the page makes. The page itself calls the topology's own
``hms-thrift`` service (``options.thrift_service``) in TJSON with the user's credentials, so it
shows exactly what the user may see there, and its calls appear in metrics and the audit log
like any other client's.

URLs (the gateway routes exact service paths, so files are chosen by the query string):
``GET /gateway/{topology}/{path}`` is the page; ``GET …?asset=<name>`` one of its files;
``GET …?restrictions=<database>/<table>`` the row filter and column masks (Ranger's row-filter
and data-mask policies of the Thrift service's ``policy_file``) that apply to the caller on that
table, as JSON (:func:`restrictions_answer`), which the table page shows; only for a table the
caller sees there (else 404, as the Thrift service answers for the table itself, so the rules
of a hidden table are not told, nor whether it has any).
Anything but GET is 405; an unknown asset name is 404 (names are looked up in a dictionary
read at build time, so no request ever reaches the filesystem). Every request is
authenticated first, as the topology does (a 401 carries every provider's challenge, so the
browser shows its Basic dialog or answers Negotiate; a JWT SSO cookie works as for any
service).
"""

from __future__ import annotations

import html
import json
import re
from typing import ClassVar

from aiohttp import hdrs, web
from pydantic import BaseModel, Field, field_validator

from gateway.explorer import METHODS, Asset, load_assets, schema_descriptor
from gateway.policy import CatalogView, PolicyEngine, load_policy_file
from gateway.policy.restrictions import table_restrictions
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import MethodNotAllowed, NotFound
from gateway.services.base import ServiceContext
from gateway.settings_model import SettingsModel

PAGE = "index.html"
DESCRIPTOR = "schema.json"

#: Only the gateway's own origin; no inline script or style (the page has none), no framing.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
    "X-Frame-Options": "DENY",
}

_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")


class ExplorerOptions(SettingsModel):
    """``options:`` of an ``explorer`` service."""

    #: Path of the topology's ``hms-thrift`` service the page calls (e.g. ``hmshttpthrift/api/hms``);
    #: it must expose :data:`gateway.explorer.METHODS`.
    thrift_service: str
    #: Path of the topology's ``event-stream`` service (the change feed) for the live panel of
    #: recent changes; None: no panel.
    events_service: str | None = None
    #: Path of the topology's ``iceberg-rest`` service; with it an Iceberg table's page also
    #: shows its Iceberg schema, partition spec, properties and snapshot history (loadTable).
    iceberg_service: str | None = None
    #: Partition names shown per page.
    page_size: int = Field(default=100, ge=10, le=1000)

    @field_validator("thrift_service", "events_service", "iceberg_service")
    @classmethod
    def _relative_path(cls, path: str | None) -> str | None:
        if path is None:
            return None
        path = path.strip("/")
        parts = path.split("/")
        if not path or any(p in (".", "..") or not _SEGMENT.fullmatch(p) for p in parts):
            raise ValueError(f"{path!r} is not a service path (letters, digits, . _ ~ - between slashes)")
        return path


def _check_targets(ctx: ServiceContext, options: "ExplorerOptions") -> None:
    """The services the page calls exist in the same topology, of the right kinds, and the
    Thrift one exposes every method the page calls. Raises ``ConfigError`` naming the option."""
    thrift = ctx.siblings.get(options.thrift_service)
    if thrift is None or thrift.kind != "hms-thrift":
        raise ctx.error("options.thrift_service",
                        f"no hms-thrift service {options.thrift_service!r} in topology {ctx.topology!r}")
    missing = [m for m in METHODS if m not in ctx.sibling_options[options.thrift_service].methods]
    if missing:
        raise ctx.error("options.thrift_service",
                        f"service {options.thrift_service!r} does not expose {', '.join(missing)}, "
                        "which the explorer calls")
    if options.events_service is not None:
        events = ctx.siblings.get(options.events_service)
        if events is None or events.kind != "event-stream":
            raise ctx.error("options.events_service",
                            f"no event-stream service {options.events_service!r} in topology {ctx.topology!r}")
    if options.iceberg_service is not None:
        iceberg = ctx.siblings.get(options.iceberg_service)
        if iceberg is None or iceberg.kind != "iceberg-rest":
            raise ctx.error("options.iceberg_service",
                            f"no iceberg-rest service {options.iceberg_service!r} in topology {ctx.topology!r}")


class ExplorerService:
    """Serves one ``explorer`` service: the page, its files and the schema descriptor."""

    kind: ClassVar[str] = "explorer"
    roles: ClassVar[tuple[str, ...]] = ("authentication", "identity-assertion", "authorization")
    Options: ClassVar[type[BaseModel] | None] = ExplorerOptions
    upstream = None  # the page calls HMS through the thrift service, never through this one

    def __init__(self, ctx: ServiceContext, assets: dict[str, Asset], policy: PolicyEngine | None = None):
        self.chain = ctx.chain
        self.assets = assets
        #: The Thrift service's catalog policy (None: it has none), for the restrictions answer.
        self.policy = policy

    @classmethod
    def build(cls, ctx: ServiceContext) -> "ExplorerService":
        """Reads the static files and renders the page for ``ctx``'s topology (no I/O later)."""
        options: ExplorerOptions = ctx.options
        _check_targets(ctx, options)
        assets = load_assets()
        page = assets[PAGE].body.decode("utf-8")
        settings = {
            "thrift-url": f"/gateway/{ctx.topology}/{options.thrift_service}",
            "topology": ctx.topology,
            "page-size": str(options.page_size),
            "events-url": f"/gateway/{ctx.topology}/{options.events_service}" if options.events_service else "",
            "iceberg-url": f"/gateway/{ctx.topology}/{options.iceberg_service}" if options.iceberg_service else "",
        }
        for name, value in settings.items():  # the page reads these <meta> tags (CSP: no inline script)
            page = page.replace(f'name="hms-{name}" content=""',
                                f'name="hms-{name}" content="{html.escape(value, quote=True)}"')
        assets[PAGE] = Asset(page.encode("utf-8"), assets[PAGE].content_type)
        assets[DESCRIPTOR] = Asset(
            json.dumps(schema_descriptor(ctx.schema, METHODS), separators=(",", ":")).encode(),
            "application/json",
        )
        thrift = ctx.siblings[options.thrift_service]
        return cls(ctx, assets, load_policy_file(thrift.policy_file) if thrift.policy_file is not None else None)

    async def handle(self, exchange: Exchange) -> tuple[web.StreamResponse, str]:
        """The page or one asset; raises MethodNotAllowed (405), the chain's outcomes (401,
        403, 429) and NotFound (404, unknown asset)."""
        request = exchange.request
        if request.method != hdrs.METH_GET:
            raise MethodNotAllowed("only GET is allowed", {hdrs.ALLOW: hdrs.METH_GET})
        await self.chain.on_request(exchange)
        if "restrictions" in request.query:
            return self._restrictions(exchange, request.query["restrictions"]), "ok"
        name = request.query.get("asset", PAGE)
        asset = self.assets.get(name)
        if asset is None:
            raise NotFound("no such explorer file")
        response = web.Response(body=asset.body, headers=SECURITY_HEADERS)
        response.content_type = asset.content_type.split(";")[0]
        if "charset=" in asset.content_type:
            response.charset = "utf-8"
        return response, "ok"

    def _restrictions(self, exchange: Exchange, named: str) -> web.Response:
        database, _, table = named.partition("/")
        if not database or not table:
            raise NotFound("restrictions=<database>/<table>")
        identity = exchange.identity
        assert identity is not None  # the chain asserted it
        if not CatalogView(self.policy, identity.user, identity.groups).visible(database, table):
            raise NotFound("no such table")  # the words of a missing table: a hidden one is not told apart
        body = restrictions_answer(self.policy, identity.user, identity.groups, database, table)
        return web.json_response(body, headers=SECURITY_HEADERS)

    async def start(self) -> None:
        """Nothing runs in the background."""

    async def close(self) -> None:
        """Nothing to release."""


def restrictions_answer(policy: PolicyEngine | None, user: str, groups, database: str, table: str) -> dict:
    """``{"policy": bool, "row-filter": {"expression", "policy-id"} | null, "masks": [{"column",
    "mask-type", "expression", "policy-id"}], "complete": bool}``: what the Thrift service's policy
    filters and masks for ``user`` on ``database.table`` (masks of the columns the policies name;
    ``complete`` False when one names columns by exclusion)."""
    found = table_restrictions(policy, user, groups, database, table)
    return {
        "policy": policy is not None,
        "row-filter": None if found.row_filter is None else {"expression": found.row_filter,
                                                              "policy-id": found.row_filter_policy},
        "masks": [{"column": c, "mask-type": m.mask_type, "expression": m.expression, "policy-id": m.policy_id}
                  for c, m in found.masks.items()],
        "complete": found.complete,
    }
