"""``make fresh`` (issue 30) and the README's starting point agree with the install scripts.

The check itself (scripts/fresh.sh: a Debian root, `make run`, `make unit`) takes minutes and
root, so it is run by hand (CONTRIBUTING.md); here: the README names every package a new
machine starts with or the demo installs, so neither can change without the other.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRESH = ROOT / "scripts" / "fresh.sh"


def starting_packages() -> set[str]:
    """What scripts/fresh.sh adds to the minbase root before the README's commands."""
    text = FRESH.read_text()
    install = text[text.index("apt-get install -y -q --no-install-recommends"):]
    words = install.split(">/dev/null", 1)[0].split()[5:]
    return {word for word in words if word != "\\"}


def demo_packages() -> set[str]:
    """The `demo` set of scripts/install-system-deps.sh: commands' packages and header packages."""
    text = (ROOT / "scripts" / "install-system-deps.sh").read_text()
    demo = text[text.index("declare -A want=("):text.index("case ")]
    packages = set(re.findall(r"^\s*\[[\w.-]+\]=([\w.+-]+)", demo, re.M))
    headers = demo[demo.index("headers=("):]
    packages |= set(re.findall(r"^\s+([a-z0-9][\w.+-]+)\s", headers, re.M))
    return packages


def before_you_start() -> str:
    """The README's section on what a new machine needs."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## What you need")
    return readme[start:readme.index("\n## ", start + 1)]


def test_fresh_starts_from_the_readme_minimum():
    assert starting_packages() == {"python3", "python3-venv", "python3-pip", "git", "make", "ca-certificates"}
    assert "debootstrap --variant=minbase bookworm" in FRESH.read_text()


def test_the_readme_names_every_package_a_new_machine_needs():
    section = before_you_start()
    named = set(re.findall(r"`([\w.+-]+)`", section))
    assert {"libkrb5-dev", "gcc", "libc6-dev", "python3-dev"} <= demo_packages()
    missing = (starting_packages() | demo_packages()) - named
    assert not missing, f"README, 'What you need', does not name {sorted(missing)}"


def test_make_fresh_runs_the_script():
    dry = subprocess.run(["make", "-n", "--no-print-directory", "fresh"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert dry.strip() == "./scripts/fresh.sh"


def test_the_readme_says_which_commands_make_fresh_runs_and_contributing_has_the_figures():
    readme = (ROOT / "README.md").read_text()
    paragraph = readme[readme.index("`make fresh`"):].split("\n\n", 1)[0]
    assert "`make run`" in paragraph and "`make unit`" in paragraph
    assert "| step | run 1" not in readme  # the runs' table lives in CONTRIBUTING.md
    assert "| step | run 1" in (ROOT / "CONTRIBUTING.md").read_text()
