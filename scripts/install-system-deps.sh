#!/usr/bin/env bash
# Installs the Debian packages the gateway needs, only those that are missing.
#   scripts/install-system-deps.sh demo   what `make run` needs: Java, a JDK (the listener jar), curl
#   scripts/install-system-deps.sh        (or `all`) also what the tests use: `make install`, `make test`
# Without root and with something missing, it fails loudly: nothing is silently skipped.
set -euo pipefail
set_name=${1:-all}
declare -A want=(
  [java]=default-jre-headless
  [javac]=default-jdk-headless  # scripts/build-listener.sh: the demo's HMS runs the listener jar
  [curl]=curl                   # the demo's banner calls it with curl
)
case "$set_name" in
  demo) ;;
  all)
    want+=(
      [thrift]=thrift-compiler
      [htpasswd]=apache2-utils
      [krb5-config]=libkrb5-dev
      [krb5kdc]=krb5-kdc
      [kadmin.local]=krb5-admin-server
      [kinit]=krb5-user
      [slapd]=slapd
      [ldapadd]=ldap-utils
      [node]=nodejs
      [npm]=npm
      [wrk]=wrk  # bench/workers.py's load
      [activemq]=activemq
      [haproxy]=haproxy  # tests/integration/test_replicas.py: the balancer in front of the replicas
      [chromium]=chromium
    ) ;;
  *) echo "usage: $0 [demo|all]" >&2; exit 2 ;;
esac
missing=()
for cmd in "${!want[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${want[$cmd]}")
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
