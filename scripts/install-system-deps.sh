#!/usr/bin/env bash
# Installs the Debian packages the gateway needs, only those that are missing.
#   scripts/install-system-deps.sh demo   what `make run` needs: Java, a JDK (the listener jar), curl,
#                                         and what `pip install` builds from source (see below)
#   scripts/install-system-deps.sh demo-kerberos   the demo's set plus the KDC (`make run KERBEROS=1`)
#   scripts/install-system-deps.sh        (or `all`) also what the tests use: `make install`, `make test`
# Without root and with something missing, it fails loudly: nothing is silently skipped.
# `make fresh` (scripts/fresh.sh) proves the demo set is enough on a clean Debian 12 root.
set -euo pipefail
set_name=${1:-all}
# The KDC of the Kerberized demo and of the tests (demo/realm.py, k5test).
declare -A kdc=(
  [krb5kdc]=krb5-kdc
  [kadmin.local]=krb5-admin-server
  [kinit]=krb5-user
)
# A package is present when its command is on PATH ...
declare -A want=(
  [java]=default-jre-headless
  [javac]=default-jdk-headless  # scripts/build-listener.sh: the demo's HMS runs the listener jar
  [curl]=curl                   # the demo's banner calls it with curl
  # pyspnego[kerberos] pulls gssapi and krb5, which have no wheels here: they build against
  # MIT Kerberos (krb5-config) with a C compiler; so does setup.py's gateway/thrift/_speedups.c.
  [krb5-config]=libkrb5-dev
  [gcc]=gcc
)
# ... or, for header-only and library packages (no command), when dpkg says it is installed.
headers=(
  libc6-dev    # the C library's headers, for every build above
  python3-dev  # Python.h, for the same builds
  libsasl2-2        # Cyrus SASL: the end users' DIGEST-MD5 to a Kerberized HMS (gateway/upstream/cyrus.py)
  libsasl2-modules  # ... its DIGEST-MD5 mechanism, with the integrity and privacy layers
)
case "$set_name" in
  demo) ;;
  demo-kerberos) for cmd in "${!kdc[@]}"; do want[$cmd]=${kdc[$cmd]}; done ;;
  all)
    for cmd in "${!kdc[@]}"; do want[$cmd]=${kdc[$cmd]}; done
    want+=(
      [thrift]=thrift-compiler
      [htpasswd]=apache2-utils
      [slapd]=slapd
      [ldapadd]=ldap-utils
      [node]=nodejs
      [npm]=npm
      [wrk]=wrk  # bench/workers.py's load
      [activemq]=activemq
      [haproxy]=haproxy  # tests/integration/test_replicas.py: the balancer in front of the replicas
      [chromium]=chromium
    ) ;;
  *) echo "usage: $0 [demo|demo-kerberos|all]" >&2; exit 2 ;;
esac
missing=()
for cmd in "${!want[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${want[$cmd]}")
done
for pkg in "${headers[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "error: missing system packages: ${missing[*]} (run as root, or: sudo apt-get install -y ${missing[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
started=$SECONDS
echo "installing system packages (apt-get, a few minutes the first time): ${missing[*]}"
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "installed ${#missing[@]} system packages in $((SECONDS - started)) s"
