"""``make run`` (issue 25): it installs only what the demo needs, names each long step with the
time it took, and the demo writes its audit log to a file of its own."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from gateway.config import load_gateway_config
from demo.launcher import _banner, with_audit_file

REPO = Path(__file__).resolve().parents[2]


def dry_run(target: str, *variables: str) -> str:
    """The commands ``make -nB <target> [VAR=value ...]`` would run (nothing is executed)."""
    # --no-print-directory: under `make unit` the child make would announce its directory
    return subprocess.run(["make", "-nB", "--no-print-directory", target, *variables], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout


def test_make_run_installs_the_demo_set_and_make_test_everything():
    run, test = dry_run("run"), dry_run("test")
    assert "install-system-deps.sh demo" in run and "-m demo" in run
    assert "install-system-deps.sh all" not in run and "npm ci" not in run and ".[test" not in run
    for needed in ("install-system-deps.sh demo", "install-system-deps.sh all", "npm ci", ".[test,demo]",
                   "build-listener.sh"):
        assert needed in test, needed


def test_make_run_s3_adds_the_s3_server_and_the_switch_and_nothing_else():
    plain, s3 = dry_run("run"), dry_run("run", "S3=1")
    assert "--storage" not in plain and "demo-s3" not in plain
    assert plain.strip().splitlines()[-1] == ".venv/bin/python -m demo --config config/gateway.yaml"
    assert s3.strip().splitlines()[-1] == ".venv/bin/python -m demo --config config/gateway.yaml --storage s3"
    assert '.[demo,demo-s3]' in s3 and ".[test" not in s3
    assert "--storage" not in dry_run("run", "S3=0")


def test_make_run_kerberos_adds_the_kdc_and_the_switch_and_nothing_else():
    plain, kerberos = dry_run("run"), dry_run("run", "KERBEROS=1")
    assert "--kerberos" not in plain and "demo-kerberos" not in plain
    assert kerberos.strip().splitlines()[-1] == ".venv/bin/python -m demo --config config/gateway.yaml --kerberos"
    assert "install-system-deps.sh demo-kerberos" in kerberos and ".[demo,demo-kerberos]" in kerberos
    assert ".[test" not in kerberos and "install-system-deps.sh all" not in kerberos
    both = dry_run("run", "KERBEROS=1", "S3=1").strip().splitlines()[-1]
    assert both == ".venv/bin/python -m demo --config config/gateway.yaml --storage s3 --kerberos"
    assert "--kerberos" not in dry_run("run", "KERBEROS=0")


def test_the_kdc_packages_are_in_the_kerberos_and_full_sets_only():
    script = REPO / "scripts" / "install-system-deps.sh"
    text = script.read_text()
    kdc = text[text.index("declare -A kdc=("):text.index("declare -A want=(")]
    assert set(re.findall(r"\]=([\w.+-]+)", kdc)) == {"krb5-kdc", "krb5-admin-server", "krb5-user"}
    cases = text[text.index("case "):]
    assert re.search(r"demo-kerberos\)[^;]*kdc", cases) and re.search(r"all\)\s+for cmd in \"\$\{!kdc\[@\]\}\"", cases)


def test_the_demo_package_set_is_a_subset_of_the_full_one():
    script = REPO / "scripts" / "install-system-deps.sh"
    refused = subprocess.run(["bash", str(script), "everything"], capture_output=True, text=True)
    assert refused.returncode == 2 and "usage:" in refused.stderr
    text = script.read_text()
    demo = text[text.index("declare -A want=("):text.index("case ")]
    assert "[java]=" in demo and "[javac]=" in demo
    assert "[slapd]" not in demo and "[chromium]" not in demo and "[activemq]" not in demo


def test_a_step_prints_its_name_and_the_time_it_took():
    step = REPO / "scripts" / "step.sh"
    done = subprocess.run([str(step), "a long step", "true"], capture_output=True, text=True)
    assert done.returncode == 0
    # the seconds depend on the machine's load: only their form is checked
    assert done.stdout.splitlines()[0] == "==> a long step ..."
    assert re.fullmatch(r"==> a long step: done in \d+ s", done.stdout.splitlines()[1])
    failed = subprocess.run([str(step), "a failing step", "sh", "-c", "exit 3"], capture_output=True, text=True)
    assert failed.returncode == 3
    assert re.fullmatch(r"==> a failing step: failed after \d+ s \(exit status 3\)", failed.stderr.strip())


def test_the_demo_writes_the_audit_log_to_a_file_and_says_where(tmp_path):
    config = load_gateway_config(REPO / "config" / "gateway.yaml")
    assert config.audit.path is None  # the shipped file: stderr, interleaved with the text log
    demo = with_audit_file(config, tmp_path / "audit.log")
    assert demo.audit.path == tmp_path / "audit.log"
    assert "audit log    " + str(tmp_path / "audit.log") in _banner(8443, 9464, tmp_path / "ca.crt", demo.audit.path)
    chosen = config.model_copy(update={"audit": config.audit.model_copy(update={"path": tmp_path / "mine.log"})})
    assert with_audit_file(chosen, tmp_path / "audit.log").audit.path == tmp_path / "mine.log"
