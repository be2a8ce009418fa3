#!/usr/bin/env bash
# Installs the Debian packages the gateway's demo and tests need, only those that are missing.
# Without root and with something missing, it fails loudly: nothing is silently skipped.
set -euo pipefail
declare -A want=(
  [java]=default-jre-headless
  [javac]=default-jdk-headless
  [thrift]=thrift-compiler
  [htpasswd]=apache2-utils
  [krb5-config]=libkrb5-dev
  [krb5kdc]=krb5-kdc
  [kadmin.local]=krb5-admin-server
  [kinit]=krb5-user
  [slapd]=slapd
  [ldapadd]=ldap-utils
  [curl]=curl
  [node]=nodejs
  [npm]=npm
  [wrk]=wrk  # bench/workers.py's load
  [activemq]=activemq
  [chromium]=chromium
)
missing=()
for cmd in "${!want[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${want[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "error: missing system packages: ${missing[*]} (run as root, or: sudo apt-get install -y ${missing[*]})" >&2
  exit 1
fi
echo "installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
