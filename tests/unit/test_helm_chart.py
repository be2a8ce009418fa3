"""Static checks of the Helm chart helm/hms-gateway.

There is no helm binary here, so templates are not rendered: these tests check the values against
the chart's JSON Schema, the references from templates to values, and that the configuration the
chart mounts is the configuration the gateway itself accepts.
"""
from __future__ import annotations

import copy
import json
import re
import shutil
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "hms-gateway"
TEMPLATES = CHART / "templates"
MOUNT = "/etc/hms-gateway"

# The gateway file's shape as fixed by the lead, for when config/gateway.yaml is not there.
GATEWAY_SHAPE = {
    "listeners": {"gateway": {"host": "", "port": 0}, "management": {"host": "", "port": 0}},
    "tls": {"certificate": "", "private_key": "", "minimum_version": ""},
    "limits": {"max_request_bytes": 0},
    "topologies_dir": "",
}


def _yaml(path: Path):
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def values():
    return _yaml(CHART / "values.yaml")


@pytest.fixture(scope="module")
def schema():
    return json.loads((CHART / "values.schema.json").read_text())


def _template_texts() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(TEMPLATES.iterdir()) if p.is_file()}


def _key_tree(node):
    """Nested dict keys only: the shape of a config, values ignored."""
    if isinstance(node, dict):
        return {k: _key_tree(v) for k, v in node.items()}
    return None


# --- schema ----------------------------------------------------------------------------------


def test_schema_is_valid_draft7(schema):
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)


def test_default_values_validate(values, schema):
    jsonschema.Draft7Validator(schema).validate(values)


INVALID = [
    # (dotted path, bad value, why it must be refused)
    ("service.gateway.nodePort", 443, "outside the NodePort range"),
    ("service.type", "Ingress", "not a Service type"),
    ("securityContext.runAsNonRoot", False, "image must not run as root"),
    ("securityContext.readOnlyRootFilesystem", False, "root filesystem stays read-only"),
    ("image.repository", "", "empty image"),
    ("config.gateway.tls.minimum_version", "1.0", "TLS below 1.2"),
    ("config.topologies.default.services.0.upstream.urls", ["localhost:9083"], "URL without thrift://"),
    ("config.topologies.default.services.0.upstream.transport", "http", "transport the gateway lacks"),
    ("keytab.contentBase64", "not base64!", "keytab must be base64"),
    ("tls.certificate", "hello", "not a PEM certificate"),
    ("replicas", 3, "typo of replicaCount must not pass silently"),
    ("podDisruptionBudget.minAvailable", "half", "neither a count nor a percentage"),
    ("service.externalTrafficPolicy", "Global", "not a traffic policy"),
    ("config.gateway.listeners.gateway.trusted_proxies", ["*"], "not an IP or CIDR"),
    ("config.gateway.listeners.gateway.trusted_proxies", "10.0.0.0/8", "a list, not a string"),
    ("config.gateway.listeners.gateway.proxy_protocol", "yes", "not a boolean"),
    ("config.gateway.listeners.management.trusted_proxies", [], "the management listener has no proxies"),
]


@pytest.mark.parametrize("dotted,bad,why", INVALID, ids=[i[0] for i in INVALID])
def test_schema_rejects_invalid_values(values, schema, dotted, bad, why):
    broken = copy.deepcopy(values)
    *parents, last = dotted.split(".")
    node = broken
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[last] = bad
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(broken))
    assert errors, f"schema accepted {dotted}={bad!r} ({why})"


# --- templates ↔ values ---------------------------------------------------------------------

VALUES_REF = re.compile(r"\.Values\.([A-Za-z0-9_.]+)")


def test_every_values_reference_exists(values):
    missing = []
    for name, text in _template_texts().items():
        for ref in set(VALUES_REF.findall(text)):
            node = values
            for part in ref.rstrip(".").split("."):
                if not isinstance(node, dict) or part not in node:
                    missing.append(f"{name}: .Values.{ref}")
                    break
                node = node[part]
    assert not missing, "templates reference values that values.yaml lacks:\n" + "\n".join(sorted(missing))


def test_every_top_level_value_is_used(values):
    used = {ref.split(".")[0] for text in _template_texts().values() for ref in VALUES_REF.findall(text)}
    assert set(values) - used == set(), "values.yaml keys no template reads"


BLOCK_OPEN = re.compile(r"\{\{-?\s*(if|range|with|define|block)\b")
BLOCK_END = re.compile(r"\{\{-?\s*end\s*-?\}\}")


@pytest.mark.parametrize("name", sorted(_template_texts()))
def test_template_blocks_balanced(name):
    text = (TEMPLATES / name).read_text()
    assert len(BLOCK_OPEN.findall(text)) == len(BLOCK_END.findall(text)), "if/range/with/define without end"


def test_files_the_templates_embed_exist():
    for text in _template_texts().values():
        for rel in re.findall(r'\.Files\.Get "([^"]+)"', text):
            assert (CHART / rel).is_file(), rel


# --- Chart.yaml ------------------------------------------------------------------------------


def test_chart_metadata():
    chart = _yaml(CHART / "Chart.yaml")
    for key in ("apiVersion", "name", "version", "appVersion", "description", "type"):
        assert chart.get(key), f"Chart.yaml lacks {key}"
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == CHART.name
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", chart["version"]), "version must be SemVer 2"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert str(chart["appVersion"]) == project["version"], "appVersion should follow the package version"


# --- Service ---------------------------------------------------------------------------------


def test_service_is_gateway_svc_external_on_30443(values):
    svc = values["service"]
    assert svc["name"] == "gateway-svc-external"
    assert svc["type"] == "NodePort"
    assert svc["gateway"] == {"port": 8443, "nodePort": 30443}
    assert svc["management"]["enabled"] and svc["management"]["port"] == 9464
    text = (TEMPLATES / "service.yaml").read_text()
    assert "name: {{ .Values.service.name }}" in text
    assert "nodePort: {{ .Values.service.gateway.nodePort }}" in text
    # targetPort is the container's named port, which comes from the gateway listener (8443).
    assert "targetPort: https" in text
    deployment = (TEMPLATES / "deployment.yaml").read_text()
    assert re.search(r"- name: https\s+containerPort: \{\{ \.Values\.config\.gateway\.listeners\.gateway\.port \}\}", deployment)
    assert values["config"]["gateway"]["listeners"]["gateway"]["port"] == 8443


def test_service_keeps_client_addresses(values):
    """externalTrafficPolicy Local by default (issue 9): with Cluster, Kubernetes rewrites client
    addresses to node addresses, and the audit log, ACL ips and failure throttle see only those."""
    assert values["service"]["externalTrafficPolicy"] == "Local"
    text = (TEMPLATES / "service.yaml").read_text()
    # only NodePort and LoadBalancer Services accept the field
    assert re.search(
        r'\{\{- if ne \.Values\.service\.type "ClusterIP" \}\}\s+(#.*\s+)?'
        r"externalTrafficPolicy: \{\{ \.Values\.service\.externalTrafficPolicy \}\}\s+\{\{- end \}\}", text)
    listener = values["config"]["gateway"]["listeners"]["gateway"]
    assert listener["trusted_proxies"] == [] and listener["proxy_protocol"] is False


def test_schema_wants_trusted_proxies_with_proxy_protocol(values, schema):
    """The gateway refuses proxy_protocol without trusted_proxies; the schema says so at install."""
    config = copy.deepcopy(values)
    listener = config["config"]["gateway"]["listeners"]["gateway"]
    listener["proxy_protocol"] = True
    assert list(jsonschema.Draft7Validator(schema).iter_errors(config))
    listener["trusted_proxies"] = ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"]
    jsonschema.Draft7Validator(schema).validate(config)


# --- Deployment ------------------------------------------------------------------------------


def test_deployment_probes_security_and_mounts(values):
    text = (TEMPLATES / "deployment.yaml").read_text()
    assert re.search(r"readinessProbe:\s+httpGet:\s+path: /readyz\s+port: management", text)
    assert re.search(r"livenessProbe:\s+httpGet:\s+path: /healthz\s+port: management", text)
    assert re.search(r"- name: management\s+containerPort: \{\{ \$mgmtPort \}\}", text)
    assert values["config"]["gateway"]["listeners"]["management"]["port"] == 9464
    assert "toYaml .Values.resources" in text and values["resources"]["limits"]
    assert "toYaml .Values.securityContext" in text
    sc = values["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
    assert values["podSecurityContext"]["runAsUser"] == 10001  # the image's USER
    assert f"mountPath: {MOUNT}" in text
    assert re.search(r"mountPath: /tmp", text) and re.search(r"- name: tmp\s+emptyDir:", text)
    assert 'args: ["serve", "--config", "/etc/hms-gateway/gateway.yaml"]' in text


@pytest.mark.parametrize(
    "template,toggle",
    [
        ("servicemonitor.yaml", "serviceMonitor"),
        ("prometheusrule.yaml", "prometheusRule"),
        ("dashboards-configmap.yaml", "dashboards"),
        ("pdb.yaml", "podDisruptionBudget"),
        ("hpa.yaml", "autoscaling"),
    ],
)
def test_optional_objects_are_off_by_default(values, template, toggle):
    assert values[toggle]["enabled"] is False
    first = (TEMPLATES / template).read_text().lstrip().splitlines()[0]
    assert first == f"{{{{- if .Values.{toggle}.enabled }}}}", "whole template gated by its toggle"


def test_dashboard_configmap_has_grafana_sidecar_label(values):
    assert values["dashboards"]["labels"] == {"grafana_dashboard": "1"}


def test_secrets_are_optional_or_existing(values):
    text = (TEMPLATES / "secrets.yaml").read_text()
    for key, field in (("tls", "certificate"), ("usersFile", "content"), ("keytab", "contentBase64"), ("signingKeys", "files")):
        assert values[key]["existingSecret"] == ""
        assert f"if and (not .Values.{key}.existingSecret) .Values.{key}.{field}" in text


def test_metastore_kerberos_is_optional_or_existing(values):
    """The keytab Secret and the krb5.conf ConfigMap of SASL to HMS (issue 38): off by default,
    created from inline values only when no existing one is named."""
    mk = values["metastoreKerberos"]
    assert mk["keytab"]["existingSecret"] == "" and mk["keytab"]["contentBase64"] == ""
    assert mk["krb5Conf"]["existingConfigMap"] == "" and mk["krb5Conf"]["content"] == ""
    secrets = (TEMPLATES / "secrets.yaml").read_text()
    assert ("if and (not .Values.metastoreKerberos.keytab.existingSecret) .Values.metastoreKerberos.keytab.contentBase64"
            in secrets)
    configmap = (TEMPLATES / "configmap.yaml").read_text()
    assert ("if and (not .Values.metastoreKerberos.krb5Conf.existingConfigMap) .Values.metastoreKerberos.krb5Conf.content"
            in configmap)


def test_metastore_kerberos_mounts_keytab_and_krb5_conf_and_sets_krb5_config():
    text = (TEMPLATES / "deployment.yaml").read_text()
    assert re.search(r"\{\{- if \$metastoreKeytab \}\}\s+- secret:\s+name: \{\{ include "
                     r"\"hms-gateway.metastoreKeytabSecretName\" \. \}\}[\s\S]*?path: krb5/metastore.keytab", text)
    assert re.search(r"\{\{- if \$krb5Conf \}\}\s+- configMap:\s+name: \{\{ include "
                     r"\"hms-gateway.krb5ConfigMapName\" \. \}\}[\s\S]*?path: krb5/krb5.conf", text)
    # KRB5_CONFIG is the mounted file, set only with a krb5.conf, beside the operator's extraEnv
    assert re.search(r"\{\{- if \$krb5Conf \}\}\s+# [^\n]*\n\s+- name: KRB5_CONFIG\s+"
                     rf"value: {MOUNT}/krb5/krb5.conf", text)
    assert "{{- with .Values.extraEnv }}" in text
    # a topology with upstream.sasl and no keytab or krb5.conf fails the install, naming both values
    assert re.search(r'if and \(include "hms-gateway.metastoreSasl" \.\) \(not \(and \$metastoreKeytab '
                     r'\$krb5Conf\)\) \}\}\s+\{\{- fail "[^"]*metastoreKerberos.keytab[^"]*'
                     r'metastoreKerberos.krb5Conf', text)
    helpers = (TEMPLATES / "_helpers.tpl").read_text()
    assert 'dig "upstream" "sasl" "" .' in helpers


def test_the_schema_takes_upstream_sasl_as_docs_operations_shows_it(values, schema):
    docs = (ROOT / "docs" / "operations.md").read_text()
    section = docs[docs.index("### What the gateway needs"):]
    block = section[section.index("```yaml") + len("```yaml"):section.index("```", section.index("```yaml") + 7)]
    upstream = yaml.safe_load(block)["services"][0]["upstream"]
    chart = copy.deepcopy(values)
    chart["config"]["topologies"]["default"]["services"][0]["upstream"] = upstream
    jsonschema.Draft7Validator(schema).validate(chart)
    del upstream["sasl"]["service_principal"]
    assert list(jsonschema.Draft7Validator(schema).iter_errors(chart))


def test_the_documented_metastore_keytab_path_is_mounted(values):
    """docs/operations.md's ``upstream.sasl.keytab: ../krb5/metastore.keytab`` (relative to a
    topology file) is the file the chart mounts."""
    docs = (ROOT / "docs" / "operations.md").read_text()
    keytab = re.search(r"keytab: (\S+)\s+# relative to the topology file", docs).group(1)
    target = (Path(MOUNT) / values["config"]["gateway"]["topologies_dir"] / keytab).resolve()
    assert str(target.relative_to(MOUNT)) in _projected_paths()
    assert "krb5/krb5.conf" in _projected_paths()


# --- the configuration the chart mounts ------------------------------------------------------


def test_configmap_embeds_values_config():
    text = (TEMPLATES / "configmap.yaml").read_text()
    assert "toYaml .Values.config.gateway" in text
    assert "range $name, $topology := .Values.config.topologies" in text


def _without_optional(tree: dict) -> dict:
    """The key tree less the gateway listener's optional load-balancer keys, which the chart
    spells out for operators and the repo's example file may leave out."""
    tree = copy.deepcopy(tree)
    for key in ("trusted_proxies", "proxy_protocol"):
        tree["listeners"]["gateway"].pop(key, None)
    return tree


def test_gateway_yaml_from_values_has_repo_shape(values):
    repo_file = ROOT / "config" / "gateway.yaml"
    expected = _key_tree(_yaml(repo_file)) if repo_file.exists() else _key_tree(GATEWAY_SHAPE)
    rendered = yaml.safe_load(yaml.safe_dump(values["config"]["gateway"]))
    assert _without_optional(_key_tree(rendered)) == _without_optional(expected)


def test_default_topology_from_values_has_repo_shape(values):
    repo_file = ROOT / "config" / "topologies" / "default.yaml"
    assert repo_file.exists(), "config/topologies/default.yaml is the reference topology"
    repo = _yaml(repo_file)
    chart = values["config"]["topologies"]["default"]
    assert _key_tree(chart) == _key_tree(repo)
    assert chart["services"][0]["path"] == repo["services"][0]["path"]
    assert chart["services"][0]["options"]["methods"] == repo["services"][0]["options"]["methods"]


def _projected_paths() -> set[str]:
    """Files the Deployment's projected volume puts under /etc/hms-gateway (static parts)."""
    text = (TEMPLATES / "deployment.yaml").read_text()
    return set(re.findall(r"^\s+path: ([\w./-]+)$", text, re.M))


def test_config_paths_point_at_mounted_files(values):
    mounted = _projected_paths()
    tls = values["config"]["gateway"]["tls"]
    assert {tls["certificate"], tls["private_key"]} <= mounted
    for name, topo in values["config"]["topologies"].items():
        for provider in topo["providers"]["authentication"]:
            if "users_file" in provider:
                target = (Path(MOUNT) / values["config"]["gateway"]["topologies_dir"] / provider["users_file"]).resolve()
                assert str(target.relative_to(MOUNT)) in mounted, f"{name}: {target} is not mounted"


def test_gateway_accepts_the_chart_config(values, tmp_path):
    """Lay out /etc/hms-gateway as the chart mounts it and run `hms-gateway check-config` on it."""
    etc = tmp_path / "etc-hms-gateway"
    gw = values["config"]["gateway"]
    (etc / gw["topologies_dir"]).mkdir(parents=True)
    (etc / "gateway.yaml").write_text(yaml.safe_dump(gw))
    for name, topo in values["config"]["topologies"].items():
        (etc / gw["topologies_dir"] / f"{name}.yaml").write_text(yaml.safe_dump(topo))

    cli = [sys.executable, "-c", "import sys; from gateway.cli import main; sys.exit(main(sys.argv[1:]))"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the source tree, installed or not
    certs = tmp_path / "certs"
    subprocess.run([*cli, "certs", "--out", str(certs)], check=True, capture_output=True, timeout=60, env=env)
    (etc / "tls").mkdir()
    crt, key = sorted(certs.glob("server*.crt")), sorted(certs.glob("server*.key"))
    assert crt and key, f"`hms-gateway certs` wrote {sorted(p.name for p in certs.iterdir())}"
    shutil.copy(crt[0], etc / gw["tls"]["certificate"])
    shutil.copy(key[0], etc / gw["tls"]["private_key"])
    # What an operator creates with `htpasswd -B`; the repo's demo users file has that format.
    shutil.copy(ROOT / "config" / "users.htpasswd", etc / "users.htpasswd")

    proc = subprocess.run([*cli, "check-config", "--config", str(etc / "gateway.yaml")],
                          capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "/gateway/default/hmshttpthrift/api/hms" in proc.stdout


# --- the chart's schema refuses what the gateway refuses (issue 25) ----------------------------


def _topology_schema(schema):
    return schema["definitions"]["topology"]


def test_schema_topology_keys_are_the_gateway_models(schema):
    """additionalProperties is false at each level, so the key sets must be the models' exactly:
    a key the gateway refuses passes neither, a key the gateway takes is not refused at install."""
    from gateway.config import Providers, ServiceConfig, TopologyConfig
    from gateway.providers.settings import AuthorizationConfig, IdentityAssertionConfig, ImpersonationConfig
    from gateway.upstream.settings import SaslConfig, UpstreamConfig
    from gateway.providers.authentication.registry import PROVIDERS
    from gateway.providers.authentication.settings import FailureThrottle
    from gateway.services import KINDS

    topology = _topology_schema(schema)
    providers = topology["properties"]["providers"]
    identity = providers["properties"]["identity_assertion"]
    service = topology["properties"]["services"]["items"]
    levels = [
        (topology, set(TopologyConfig.model_fields) - {"name", "source"}),  # name: the file's; source: set on load
        (providers, set(Providers.model_fields)),
        (providers["properties"]["failure_throttle"], set(FailureThrottle.model_fields)),
        (identity, set(IdentityAssertionConfig.model_fields)),
        (identity["properties"]["impersonation"], set(ImpersonationConfig.model_fields)),
        (service, set(ServiceConfig.model_fields)),
        (service["properties"]["upstream"], set(UpstreamConfig.model_fields)),
        (service["properties"]["upstream"]["properties"]["sasl"], set(SaslConfig.model_fields)),
        (service["properties"]["authorization"], set(AuthorizationConfig.model_fields)),
    ]
    for node, fields in levels:
        assert node["additionalProperties"] is False
        assert set(node["properties"]) == fields
    assert set(service["properties"]["kind"]["enum"]) == set(KINDS)
    type_enum = providers["properties"]["authentication"]["items"]["properties"]["type"]["enum"]
    assert set(type_enum) == set(PROVIDERS)


# (dotted path below config.topologies.default, value, what the gateway says about it)
REFUSED_BY_BOTH = [
    ("services.0.role", "HMSHTTPTHRIFT", "Knox's role key, docs/operations.md before issue 25"),
    ("services.0.kind", "hms", "no such service kind"),
    ("services.0.upstream.retries", 3, "unknown upstream key"),
    ("services.0.upstream.urls", ["localhost:9083"], "URL without a scheme"),
    ("services.0.methods", ["get_table"], "methods moved to options.methods"),
    ("providers.authentication.0.type", "shiro", "no such provider"),
    ("providers.identity_assertion.impersonation.enabled", True, "docs/security.md before issue 25"),
    ("providers.audit", {"enabled": True}, "audit belongs in the gateway file"),
    ("name", "default", "the topology name is the file name"),
    ("services.0.upstream.sasl", {"principal": "hmsgw/gw.example.com@EXAMPLE.COM", "keytab": "../krb5/metastore.keytab",
                                  "service_principal": "hive/_HOST@EXAMPLE.COM", "protection": "auth-conf"},
     "SASL's QOP name where Hadoop's hadoop.rpc.protection value belongs"),
]


@pytest.fixture(scope="module")
def chart_tls(tmp_path_factory):
    from gateway.certs import write_dev_certificates

    return write_dev_certificates(tmp_path_factory.mktemp("chart-tls"))


def _gateway_verdict(values, chart_tls, etc):
    from tests.support.config_check import check_config, write_chart_config

    gateway_file = write_chart_config(values, etc, certificate=chart_tls.certificate,
                                      private_key=chart_tls.private_key, users_file=ROOT / "config" / "users.htpasswd")
    return check_config(gateway_file)


def test_chart_values_pass_schema_and_gateway(values, schema, chart_tls, tmp_path):
    jsonschema.Draft7Validator(schema).validate(values)
    status, output = _gateway_verdict(values, chart_tls, tmp_path / "etc")
    assert status == 0, output


@pytest.mark.parametrize("dotted,bad,why", REFUSED_BY_BOTH, ids=[i[0] for i in REFUSED_BY_BOTH])
def test_schema_and_gateway_both_refuse(values, schema, chart_tls, tmp_path, dotted, bad, why):
    broken = copy.deepcopy(values)
    *parents, last = dotted.split(".")
    node = broken["config"]["topologies"]["default"]
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    node[last] = bad
    assert list(jsonschema.Draft7Validator(schema).iter_errors(broken)), f"schema accepted {dotted}={bad!r} ({why})"
    status, output = _gateway_verdict(broken, chart_tls, tmp_path / "etc")
    assert status == 2 and "configuration error" in output, f"gateway accepted {dotted}={bad!r} ({why}): {output}"


def test_schema_accepts_every_kind_the_gateway_serves(values, schema):
    """An explorer needs no upstream; the other kinds do, as the gateway says at start-up."""
    topology = copy.deepcopy(values["config"]["topologies"]["default"])
    topology["services"].append({"kind": "explorer", "path": "explorer",
                                 "options": {"thrift_service": topology["services"][0]["path"]}})
    topology["services"].append({"kind": "event-stream", "path": "events",
                                 "upstream": {"urls": ["thrift://hive-metastore:9083"]}})
    topology["services"].append({"kind": "glue", "path": "glue",
                                 "upstream": {"urls": ["https://hive-metastore:9001/metastore"]}})
    jsonschema.Draft7Validator(_topology_schema(schema) | {"definitions": schema["definitions"]}).validate(topology)
    del topology["services"][2]["upstream"]
    assert list(jsonschema.Draft7Validator(_topology_schema(schema)).iter_errors(topology))


def test_notes_print_a_call_for_every_service_kind():
    """NOTES.txt (shown by helm install/status) has a first call for each kind the gateway serves."""
    from gateway.services import KINDS

    notes = (TEMPLATES / "NOTES.txt").read_text()
    assert '{{- $kind := default "hms-thrift" .kind }}' in notes
    for kind in KINDS:
        assert f'eq $kind "{kind}"' in notes, f"NOTES.txt prints no call for kind {kind}"
    assert "AWSGlue.GetDatabases" in notes and "text/event-stream" in notes
    assert '"get_all_databases"' in notes
