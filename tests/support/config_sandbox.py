"""Documentation configuration laid out as the repository's ``config/``, for ``check-config``.

A :class:`Sandbox` takes the YAML/JSON blocks of the docs (``topology``, ``provider``,
``gateway``, ``policy`` snippets; whole files or ``fragment``s merged into a minimal valid file),
writes them under ``<root>/config`` and creates every file they name but do not show (users
file, CA, keys, keytab, ``file:`` secrets), absolute paths re-rooted below ``<root>``. Used by
tests/integration/test_doc_snippets.py (in-process check-config) and
tests/integration/test_image_install.py (check-config from the image's fresh venv).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.support.config_check import check_config, merge_values
from tests.support.doc_snippets import ROOT, Snippet

#: What a fragment is merged into: the smallest valid files.
MIN_GATEWAY = {"tls": {"certificate": "../certs/server.crt", "private_key": "../certs/server.key"},
               "topologies_dir": "topologies"}
MIN_TOPOLOGY = {
    "providers": {"authentication": [{"type": "htpasswd", "realm": "HMS Gateway", "users_file": "../users.htpasswd"}]},
    "services": [{"kind": "hms-thrift", "path": "hmshttpthrift/api/hms", "upstream": {"urls": ["thrift://localhost:9083"]}}],
}
POLICY_YAML = {"policies": [{"id": 1, "name": "everyone reads", "resources": {"database": ["*"], "table": ["*"], "column": ["*"]},
                             "allow": [{"groups": ["public"], "accesses": ["select"]}]}]}
POLICY_RANGER = {"policies": [{"id": 1, "name": "everyone reads", "service": "hive", "policyType": 0, "isEnabled": True,
                               "resources": {"database": {"values": ["*"]}},
                               "policyItems": [{"accesses": [{"type": "select", "isAllowed": True}], "groups": ["public"]}]}]}

HEADER = re.compile(r"^#\s+(?:config/)?(?P<path>[\w./-]+\.(?:ya?ml|json))\b")
#: Keys whose value names a file, and what the sandbox writes there when the block does not.
FILE_KEYS = {"users_file", "policy_file", "ca_file", "jwks_ca_file", "client_ca", "certificate",
             "private_key", "public_key_file", "keytab", "passcode_file", "credentials_file"}


def write_materials(out: Path) -> dict[str, Path]:
    """Development CA, server certificate and key, a public key and the demo users file, the
    files a :class:`Sandbox` copies where a block names one it does not show."""
    from cryptography.hazmat.primitives import serialization

    from gateway.certs import write_dev_certificates

    certs = write_dev_certificates(out)
    key = serialization.load_pem_private_key(certs.private_key.read_bytes(), None)
    public = out / "public.pem"
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return {"ca": certs.ca_certificate, "certificate": certs.certificate, "private_key": certs.private_key,
            "public_key": public, "users": ROOT / "config" / "users.htpasswd"}


def sections(snippet: Snippet) -> list[tuple[str | None, str]]:
    """(file named by a ``# <path>`` header line or None, text) parts of a block."""
    parts: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in snippet.body.split("\n"):
        header = HEADER.match(line)
        if header:
            parts.append((header["path"], []))
        parts[-1][1].append(line)
    return [(name, "\n".join(lines)) for name, lines in parts if name or "\n".join(lines).strip()]


def section_kind(snippet: Snippet, name: str | None) -> str:
    if name is None:
        return snippet.kind
    if "topologies/" in name:
        return "topology"
    if name.startswith("polic"):
        return "policy"
    if name.endswith("gateway.yaml"):
        return "gateway"
    raise AssertionError(f"{snippet.where}: header {name!r} names no known file")


def drop_ellipses(node):
    """``...`` in a fragment stands for what the doc leaves out: list items ``...`` are dropped."""
    if isinstance(node, dict):
        return {k: drop_ellipses(v) for k, v in node.items() if v != "..." and v != ["..."]}
    if isinstance(node, list):
        return [drop_ellipses(v) for v in node if v != "..."]
    return node


def merge_fragment(base, fragment):
    """A fragment over a minimal file: mappings merged, lists and scalars replaced."""
    return merge_values(base, drop_ellipses(fragment))


class Sandbox:
    """A directory laid out as the repository (config/gateway.yaml, config/topologies/, certs/)."""

    def __init__(self, root: Path, materials: dict[str, Path]):
        self.root, self.materials = root, materials
        self.config = root / "config"
        (self.config / "topologies").mkdir(parents=True)
        self.gateway: dict | None = None
        self.topologies: dict[str, dict] = {}
        self.policies: list[Path] = []

    def reroot(self, node, key: str | None = None):
        """Absolute paths (and ``file:/`` secrets) move below the sandbox."""
        if isinstance(node, dict):
            return {k: self.reroot(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [self.reroot(v, key) for v in node]
        if isinstance(node, str) and key != "path":
            if node.startswith("file:/"):
                return "file:" + str(self.root / node[len("file:/"):])
            if node.startswith("/"):
                return str(self.root / node.lstrip("/"))
        return node

    def provide(self, node, base: Path, parent: dict | None = None, key: str | None = None) -> None:
        """Create each file ``node`` names that the block did not provide."""
        if isinstance(node, dict):
            for k, v in node.items():
                self.provide(v, base, node, k)
        elif isinstance(node, list):
            for v in node:
                self.provide(v, base, parent, key)
        elif isinstance(node, str) and node.startswith("file:"):
            path = Path(node[len("file:"):])
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                if key == "secret_keys":  # an AWS credentials file for the sibling access_keys
                    ini = "".join(f"[{user}]\naws_access_key_id = {key_id}\naws_secret_access_key = {secrets.token_hex(20)}\n"
                                  for key_id, user in (parent or {}).get("access_keys", {}).items())
                    path.write_text(ini)
                else:
                    path.write_text(secrets.token_hex(32) + "\n")
        elif isinstance(node, str) and key in FILE_KEYS:
            path = (base / node).resolve() if not Path(node).is_absolute() else Path(node)
            if path.exists():
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            source = {"users_file": "users", "ca_file": "ca", "jwks_ca_file": "ca", "client_ca": "ca",
                      "certificate": "certificate", "private_key": "private_key",
                      "public_key_file": "public_key"}.get(key)
            if source:
                shutil.copy(self.materials[source], path)
            elif key == "keytab":  # a real keytab holding the block's principal (MIT ktutil)
                principal = (parent or {})["principal"]
                script = f"addent -password -p {principal} -k 1 -e aes256-cts-hmac-sha1-96\n{secrets.token_hex(8)}\nwkt {path}\nquit\n"
                subprocess.run(["ktutil"], input=script, text=True, check=True, capture_output=True, timeout=30)
            elif key == "policy_file":
                path.write_text(json.dumps(POLICY_RANGER) if path.suffix == ".json" else yaml.safe_dump(POLICY_YAML))
            elif key == "credentials_file":  # an AWS shared-credentials file (options.s3)
                path.write_text(f"[default]\naws_access_key_id = AKIAEXAMPLE\n"
                                f"aws_secret_access_key = {secrets.token_hex(20)}\n")
            else:
                path.write_bytes(secrets.token_bytes(64))

    def add(self, snippet: Snippet, name: str | None, text: str) -> None:
        kind = section_kind(snippet, name)
        data = json.loads(text) if snippet.lang == "json" else yaml.safe_load(text)
        if kind == "policy":
            # ``name="policies/x.json"`` names a block that cannot carry a ``# <path>`` line (JSON)
            path = self.config / (name or snippet.attrs.get("name") or f"policies/snippet.{snippet.lang}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            self.policies.append(path)
        elif kind == "gateway":
            self.gateway = merge_fragment(MIN_GATEWAY, data) if snippet.fragment else data
        elif kind == "provider":
            assert isinstance(data, list), f"{snippet.where}: a provider block is a list of entries"
            self.topologies["snippet"] = merge_values(MIN_TOPOLOGY, {"providers": {"authentication": data}})
        else:
            topology = merge_fragment(MIN_TOPOLOGY, data) if snippet.fragment else data
            stem = Path(name).stem if name else "snippet"
            self.topologies[stem] = topology

    def add_block(self, snippet: Snippet) -> None:
        """Every file of ``snippet`` (a block may hold several under ``# <path>`` lines)."""
        for name, text in sections(snippet):
            self.add(snippet, name, text)

    def check(self) -> tuple[int, str]:
        """Policies loaded by the policy engine, then ``hms-gateway check-config`` (in-process)
        on the laid-out gateway file: (exit status, output)."""
        from gateway.config import ConfigError
        from gateway.policy import load_policy_file

        for path in self.policies:
            try:
                load_policy_file(path)
            except ConfigError as exc:
                return 2, f"configuration error: {exc}"
        if not self.topologies and not self.gateway:
            return 0, "policies loaded"
        return check_config(self.layout())

    def layout(self) -> Path:
        """Write the gateway file and the topologies (the block's, or a minimal one), creating
        every file they name; returns the gateway file's path."""
        gateway = self.reroot(self.gateway or MIN_GATEWAY)
        gateway_file = self.config / "gateway.yaml"
        self.provide(gateway, self.config)
        topologies_dir = (self.config / gateway.get("topologies_dir", "topologies")).resolve()
        topologies_dir.mkdir(parents=True, exist_ok=True)
        for stem, topology in (self.topologies or {"snippet": MIN_TOPOLOGY}).items():
            topology = self.reroot(topology)
            self.provide(topology, topologies_dir)
            (topologies_dir / f"{stem}.yaml").write_text(yaml.safe_dump(topology))
        gateway_file.write_text(yaml.safe_dump(gateway))
        return gateway_file


def shipped_topologies(upstream: str) -> dict[str, dict]:
    """config/topologies/*.yaml (name → topology) as `make run` serves them, their HMS
    (``thrift://localhost:9083``) replaced by ``upstream``."""
    return {path.stem: yaml.safe_load(path.read_text().replace("thrift://localhost:9083", upstream))
            for path in sorted((ROOT / "config" / "topologies").glob("*.yaml"))}


def add_file(sandbox: Sandbox, path: Path, name: str) -> None:
    """A shipped file into ``sandbox`` as ``name`` (``gateway.yaml`` or ``topologies/<x>.yaml``)."""
    kind = "gateway" if name.endswith("gateway.yaml") else "topology"
    snippet = Snippet(str(path.relative_to(ROOT)), 1, "yaml", path.read_text(), kind)
    sandbox.add(snippet, name, snippet.body)
