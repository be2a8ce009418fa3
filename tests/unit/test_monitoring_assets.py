"""Dashboards and alert rules shipped in the chart query only metrics the gateway exports."""
from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import promql_parser
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "hms-gateway"
DASHBOARD = CHART / "dashboards" / "hms-gateway.json"
RULES = CHART / "alerts" / "hms-gateway-rules.yaml"
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Grafana expands these before Prometheus sees the query; the parser needs a real duration.
GRAFANA_DURATIONS = re.compile(r"\$__(rate_interval|interval|range)")

REQUIRED_ALERTS = {
    "HMSGatewayHighErrorRatio": "hms_gateway_requests_total",
    "HMSGatewayHighLatencyP95": "hms_gateway_request_duration_seconds",
    "HMSGatewayUpstreamDown": "hms_gateway_upstream_up",
    "HMSGatewayAuthenticationFailureSpike": "hms_gateway_authentication_total",
    "HMSGatewayCertificateExpiresSoon": "hms_gateway_tls_certificate_expiry_timestamp_seconds",
}


def _exported_from_module() -> set[str] | None:
    sys.path.insert(0, str(ROOT))
    try:
        metrics = importlib.import_module("gateway.observability.metrics")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("gateway"):
            return None
        raise
    finally:
        sys.path.remove(str(ROOT))
    names = set()
    for family in metrics.REGISTRY.collect():
        # prometheus_client drops the _total suffix from counter family names.
        names.add(family.name + "_total" if family.type == "counter" else family.name)
    return names


def _exported_from_docs() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Metrics", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`(hms_gateway_[a-z0-9_]+)`", row.split("|")[1])}


@pytest.fixture(scope="module")
def exported() -> set[str]:
    names = _exported_from_module() or _exported_from_docs()
    assert len(names) >= 10, f"could not read the exported metric list: {names}"
    return names


def _metric_names(expr: str) -> set[str]:
    """Metric names of every selector in a PromQL expression, via a real PromQL parser."""
    found: set[str] = set()

    def walk(node):
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name or next((m.value for m in node.matchers.matchers if m.name == "__name__"), None)
            assert name, f"selector without a metric name in {expr!r}"
            found.add(name)
        elif isinstance(node, promql_parser.MatrixSelector):
            walk(node.vector_selector)
        elif isinstance(node, promql_parser.BinaryExpr):
            walk(node.lhs), walk(node.rhs)
        elif isinstance(node, promql_parser.Call):
            for arg in node.args:
                walk(arg)
        elif isinstance(node, promql_parser.AggregateExpr):
            walk(node.expr)
            if node.param is not None:
                walk(node.param)
        elif isinstance(node, (promql_parser.ParenExpr, promql_parser.UnaryExpr, promql_parser.SubqueryExpr)):
            walk(node.expr)

    walk(promql_parser.parse(GRAFANA_DURATIONS.sub("5m", expr)))
    return found


def _base(name: str, exported: set[str]) -> str:
    if name not in exported:
        for suffix in HISTOGRAM_SUFFIXES:
            if name.endswith(suffix):
                return name[: -len(suffix)]
    return name


def _dashboard_exprs() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            inner = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
            assert inner, f"variable {var['name']}: unexpected query {query!r}"
            exprs.append((f"variable {var['name']}", inner.group(1)))
    return exprs


def _rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_metric_list_source_is_the_module_when_present(exported):
    # The docs table and the code must agree; the import is authoritative when it exists.
    from_module = _exported_from_module()
    if from_module is not None:
        assert from_module == _exported_from_docs(), "metrics.py and docs/architecture.md disagree"


def test_parser_finds_names():
    # Guards the walker itself: a regression here would make the checks below vacuous.
    expr = 'histogram_quantile(0.9, sum by (le) (rate(a_bucket{x="1"}[5m]))) / ignoring(y) (b + -c) and d offset 1m'
    assert _metric_names(expr) == {"a_bucket", "b", "c", "d"}


def test_dashboard_queries_only_exported_metrics(exported):
    exprs = _dashboard_exprs()
    assert len(exprs) >= 10
    unknown = {(title, n) for title, e in exprs for n in _metric_names(e) if _base(n, exported) not in exported}
    assert not unknown, f"dashboard queries metrics the gateway does not export: {sorted(unknown)}"


def test_dashboard_covers_the_required_views():
    titles = " | ".join(t.lower() for t, _ in _dashboard_exprs())
    for words in ("outcome", "error ratio", "p50 / p95 / p99", "upstream latency", "upstream up",
                  "pool connections", "authentication failures by provider", "bytes in / out", "certificate"):
        assert words in titles, f"no panel for {words!r}"
    dash = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert all(p["datasource"]["uid"] == "${datasource}" for p in dash["panels"])


def test_alert_rules_query_only_exported_metrics(exported):
    for rule in _rules():
        names = _metric_names(rule["expr"])
        assert names, rule["alert"]
        unknown = {n for n in names if _base(n, exported) not in exported}
        assert not unknown, f"{rule['alert']} uses unexported metrics {unknown}"


def test_required_alerts_present_and_well_formed():
    rules = {r["alert"]: r for r in _rules()}
    assert set(REQUIRED_ALERTS) <= set(rules)
    for alert, metric in REQUIRED_ALERTS.items():
        rule = rules[alert]
        assert {_base(n, {metric}) for n in _metric_names(rule["expr"])} == {metric}, alert
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_certificate_alert_threshold_is_14_days():
    expr = {r["alert"]: r for r in _rules()}["HMSGatewayCertificateExpiresSoon"]["expr"]
    ast = promql_parser.parse(expr)
    assert isinstance(ast, promql_parser.BinaryExpr) and str(ast.op) == "<"

    def fold(node) -> float:
        if isinstance(node, promql_parser.NumberLiteral):
            return node.val
        assert isinstance(node, promql_parser.BinaryExpr) and str(node.op) == "*", node.prettify()
        return fold(node.lhs) * fold(node.rhs)

    assert fold(ast.rhs) == 14 * 86400


def test_chart_ships_the_assets():
    assert "alerts/hms-gateway-rules.yaml" in (CHART / "templates" / "prometheusrule.yaml").read_text()
    assert "dashboards/hms-gateway.json" in (CHART / "templates" / "dashboards-configmap.yaml").read_text()
