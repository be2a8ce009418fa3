"""A real OpenLDAP ``slapd`` for tests, started in a temp dir on free loopback ports.

Directory ``dc=example,dc=org`` with people under ``ou=people`` (inetOrgPerson, salted-SHA
passwords written by ``slappasswd``), ``groupOfNames`` groups under ``ou=groups`` with the
``memberof`` overlay, a read-only service account, LDAPS and StartTLS with the test CA.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from gateway.certs import write_dev_certificates
from tests.support.gateway import stop_process
from tests.support.ports import start_with_retry

BASE = "dc=example,dc=org"
ROOT_DN, ROOT_PASSWORD = f"cn=admin,{BASE}", "root-password"
SERVICE_DN, SERVICE_PASSWORD = f"cn=gateway,{BASE}", "service-password"


def _require(cmd: str) -> str:
    path = shutil.which(cmd) or shutil.which(cmd, path="/usr/sbin:/usr/bin:/sbin")
    if path is None:
        raise RuntimeError(f"{cmd} not found: run scripts/install-system-deps.sh (slapd, ldap-utils)")
    return path


@dataclass
class RunningLdap:
    port: int
    ldaps_port: int
    ca_file: Path
    workdir: Path
    process: subprocess.Popen
    users: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"ldap://127.0.0.1:{self.port}"

    @property
    def ldaps_url(self) -> str:
        return f"ldaps://localhost:{self.ldaps_port}"

    def stop(self) -> None:
        stop_process(self.process)

    def count_binds(self) -> int:
        """Simple bind attempts as people entries so far (from slapd's stats log)."""
        log = (self.workdir / "slapd.log").read_text(errors="replace")
        # slapd logs "BIND dn=... method=128" once per simple bind request.
        return sum(1 for line in log.splitlines() if 'BIND dn="uid=' in line and "method=128" in line)


def start_ldap(workdir: Path, users: dict[str, str], groups: dict[str, list[str]]) -> RunningLdap:
    """Start slapd with ``users`` (uid → password) and ``groups`` (cn → member uids)."""
    slapd, slappasswd, ldapadd = _require("slapd"), _require("slappasswd"), _require("ldapadd")
    workdir.mkdir(parents=True, exist_ok=True)
    certs = write_dev_certificates(workdir / "certs")
    (workdir / "db").mkdir(exist_ok=True)
    conf = workdir / "slapd.conf"
    conf.write_text(f"""
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
pidfile {workdir}/slapd.pid
TLSCACertificateFile {certs.ca_certificate}
TLSCertificateFile {certs.certificate}
TLSCertificateKeyFile {certs.private_key}
loglevel stats
database mdb
suffix "{BASE}"
rootdn "{ROOT_DN}"
rootpw {ROOT_PASSWORD}
directory {workdir}/db
overlay memberof
access to attrs=userPassword by anonymous auth by self read by * none
access to * by users read by * none
""")

    def start(port: int) -> RunningLdap:  # ldap:// on port, ldaps:// on port + 1
        with open(workdir / "slapd.log", "wb") as log:
            proc = subprocess.Popen(
                [slapd, "-d", "stats", "-f", str(conf),
                 "-h", f"ldap://127.0.0.1:{port}/ ldaps://127.0.0.1:{port + 1}/"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        running = RunningLdap(port, port + 1, certs.ca_certificate, workdir, proc, dict(users))
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:  # "Address already in use" here: start_with_retry retries
                raise RuntimeError(f"slapd exited with {proc.returncode}:\n{(workdir / 'slapd.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return running
            except OSError:
                if time.monotonic() > deadline:
                    running.stop()
                    raise RuntimeError("slapd did not listen within 20 s")
                time.sleep(0.1)

    running = start_with_retry(start, span=2)

    def hashed(password: str) -> str:
        return subprocess.run([slappasswd, "-s", password], check=True, capture_output=True,
                              text=True).stdout.strip()

    ldif = [f"dn: {BASE}\nobjectClass: dcObject\nobjectClass: organization\no: Example\ndc: example\n",
            f"dn: ou=people,{BASE}\nobjectClass: organizationalUnit\nou: people\n",
            f"dn: ou=groups,{BASE}\nobjectClass: organizationalUnit\nou: groups\n",
            f"dn: {SERVICE_DN}\nobjectClass: simpleSecurityObject\nobjectClass: organizationalRole\n"
            f"cn: gateway\nuserPassword: {hashed(SERVICE_PASSWORD)}\n"]
    for uid, password in users.items():
        ldif.append(f"dn: uid={uid},ou=people,{BASE}\nobjectClass: inetOrgPerson\nuid: {uid}\n"
                    f"cn: {uid}\nsn: {uid}\nuserPassword: {hashed(password)}\n")
    for cn, members in groups.items():
        lines = "".join(f"member: uid={m},ou=people,{BASE}\n" for m in members)
        ldif.append(f"dn: cn={cn},ou=groups,{BASE}\nobjectClass: groupOfNames\ncn: {cn}\n{lines}")
    try:
        subprocess.run([ldapadd, "-x", "-H", running.url, "-D", ROOT_DN, "-w", ROOT_PASSWORD],
                       input="\n".join(ldif), text=True, check=True, capture_output=True)
    except BaseException:
        running.stop()
        raise
    return running
