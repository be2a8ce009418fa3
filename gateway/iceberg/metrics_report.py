"""``POST /v1/namespaces/{namespace}/tables/{table}/metrics`` (operationId ``reportMetrics``): a
client's scan or commit report (the spec's ``ReportMetricsRequest``: ``report-type`` plus a
``ScanReport`` or ``CommitReport``). The gateway keeps no report: it checks the report's shape
(400 otherwise), that the caller may see the table (404, as for a load), counts it in
``hms_gateway_iceberg_metrics_reports_total{topology,service,report}`` and answers 204; the audit
line records it (method ``reportMetrics``, the table, the user).
"""

from __future__ import annotations

from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from gateway.iceberg.bodies import parse
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.paths import RouteMatch
from gateway.observability import metrics


class ReportMetricsRequest(BaseModel):
    """The spec's ``ReportMetricsRequest``: what a scan and a commit report share; read as the
    report its ``report-type`` names (:meth:`from_request`)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    report_type: Literal["scan-report", "commit-report"] = Field(alias="report-type")
    table_name: str = Field(alias="table-name")
    snapshot_id: int = Field(alias="snapshot-id")
    metrics: dict[str, Any]
    metadata: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def from_request(cls, catalog: Catalog, request: web.BaseRequest, body: bytes) -> ScanReport | CommitReport:
        """A :class:`ScanReport` or :class:`CommitReport`. Raises ``BadRequest``."""
        kind = parse(ReportMetricsRequest, body).report_type
        return parse(ScanReport if kind == "scan-report" else CommitReport, body)


class ScanReport(ReportMetricsRequest):
    """The spec's ``ScanReport`` (with ``report-type: scan-report``)."""

    report_type: Literal["scan-report"] = Field(alias="report-type")
    filter: Any
    schema_id: int = Field(alias="schema-id")
    projected_field_ids: list[int] = Field(alias="projected-field-ids")
    projected_field_names: list[str] = Field(alias="projected-field-names")


class CommitReport(ReportMetricsRequest):
    """The spec's ``CommitReport`` (with ``report-type: commit-report``)."""

    report_type: Literal["commit-report"] = Field(alias="report-type")
    sequence_number: int = Field(alias="sequence-number")
    operation: str


async def report_metrics(catalog: Catalog, route: RouteMatch, request: web.BaseRequest,
                         ask: ScanReport | CommitReport) -> Reply:
    """204 for a well-formed report on a table the caller sees. Raises ``BadRequest``,
    ``NoSuchTable``/``NoSuchNamespace``."""
    # the table visible, and judged as a load (a scan of a filtered table is a trusted
    # engine's): the route's rules (gateway.iceberg.access)
    service = catalog.service
    metrics.child(metrics.ICEBERG_METRICS_REPORTS, service.topology, service.path, ask.report_type).inc()
    return Reply(status=204)
