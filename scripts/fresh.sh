#!/usr/bin/env bash
# `make fresh`: the README's commands on a clean Debian 12 root, as a new user meets them.
#
#   scripts/fresh.sh            (as root; Debian or Ubuntu host with apt)
#
# 1. a minbase Debian bookworm root (debootstrap; the base is cached in var/fresh/, so the second
#    run skips it), plus python3, python3-venv, python3-pip, git, make and ca-certificates only;
# 2. this machine's CA bundle, resolver, apt sources and pip/npm settings, so the root reaches the
#    same package registries (local index directories pip names are bind-mounted read-only), and
#    an /etc/hosts with localhost and the host name (HMS cannot take locks without it);
# 3. the committed tree (`git archive HEAD`: uncommitted edits are not part of the check);
# 4. `make run` until the gateway answers and the PyIceberg program the demo prints reads its rows,
#    then `make unit`. The demo and the unit tests run in a network namespace of their own, so a
#    demo already running here (8443, 9083, 9464) is not in the way; installs use the network.
# Each step prints its time (scripts/step.sh); a summary table closes the run. Exit status: the
# first failing step's. FRESH_DIR (default var/fresh) holds the cached base and the logs; the root
# itself is FRESH_ROOT (default /var/tmp/hms-gateway-fresh), outside the tree: setuptools walks
# the whole tree when it builds the project, and a Debian root with /proc mounted would stall it.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
state=${FRESH_DIR:-$repo/var/fresh}
base_tar=$state/bookworm-minbase.tar
root=${FRESH_ROOT:-/var/tmp/hms-gateway-fresh}
src=/root/hms-gateway                  # the tree, inside the root
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
demo_timeout=${FRESH_DEMO_TIMEOUT:-1200}  # seconds for `make run` to write the demo's table and catalog

[ "$(id -u)" = 0 ] || { echo "error: make fresh needs root (debootstrap, chroot, mounts)" >&2; exit 1; }
mkdir -p "$state"

names=() times=() demo_pid="" mounts=() step_started=$SECONDS
summary() {
  echo
  echo "make fresh: step times"
  printf '  %-66s %7s\n' "step" "seconds"
  local i total=0
  for i in "${!names[@]}"; do
    printf '  %-66s %7s\n' "${names[$i]}" "${times[$i]}"
    [[ ${times[$i]} =~ ^[0-9]+$ ]] && total=$((total + times[i]))
  done
  printf '  %-66s %7s\n' "total" "$total"
}
cleanup() {
  local status=$?
  if [ "${times[${#times[@]} - 1]:-}" = failed ]; then
    echo "==> ${names[${#names[@]} - 1]}: failed after $((SECONDS - step_started)) s (exit status $status)" >&2
  fi
  if [ -n "$demo_pid" ] && kill -0 "$demo_pid" 2>/dev/null; then
    kill -TERM -- "-$demo_pid" 2>/dev/null || true
    sleep 5
    kill -KILL -- "-$demo_pid" 2>/dev/null || true
  fi
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -R "${mounts[$i]}" 2>/dev/null || umount -lR "${mounts[$i]}" 2>/dev/null || true
  done
  summary
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# step LABEL COMMAND...: run it, in this shell (steps mount things and start the demo), printing
# its name and time as scripts/step.sh does; with `set -e`, a failing command ends the run, and
# the EXIT trap prints the summary.
step() {
  local label=$1
  shift
  names+=("$label")
  times+=("failed")
  echo "==> $label ..."
  step_started=$SECONDS
  "$@"
  times[${#times[@]} - 1]=$((SECONDS - step_started))
  echo "==> $label: done in $((SECONDS - step_started)) s"
}

# The environment commands get inside the root: pip and CA settings pass through.
chroot_env=(env -i HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
while IFS='=' read -r name value; do
  case "$name" in
    PIP_*|SSL_CERT_*|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|NODE_EXTRA_CA_CERTS|GIT_SSL_CAINFO|AWS_CA_BUNDLE|http_proxy|https_proxy|no_proxy|HTTP_PROXY|HTTPS_PROXY|NO_PROXY)
      chroot_env+=("$name=$value") ;;
  esac
done < <(env)
# in_root COMMAND: COMMAND by bash in the root, in the tree's directory once it is there.
in_root() { "${chroot_env[@]}" chroot "$root" /bin/bash -c "cd $src 2>/dev/null || true; $1"; }
# in_netns COMMAND: the same in a network namespace of its own (loopback only).
netns=(unshare --net -- /bin/bash -c 'ip link set lo up && exec "$@"' netns)
in_netns() { "${netns[@]}" "${chroot_env[@]}" chroot "$root" /bin/bash -c "cd $src && $1"; }

make_base() {
  command -v debootstrap >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q debootstrap >/dev/null; }
  local tmp=$root.base  # outside the tree, as the root
  rm -rf "$tmp"
  debootstrap --variant=minbase bookworm "$tmp" "$mirror" >"$state/debootstrap.log" 2>&1 \
    || { tail -20 "$state/debootstrap.log" >&2; return 1; }
  tar -C "$tmp" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar"
  rm -rf "$tmp"
}

unpack_root() {
  if [ -d "$root" ]; then  # a run stopped before its trap: its mounts first
    awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | xargs -r umount -l
    rm -rf --one-file-system "$root"
  fi
  mkdir -p "$root"
  tar -C "$root" -xf "$base_tar"
}

# Resolver, hosts, apt sources (and the keyrings they name), apt's Acquire settings.
copy_settings() {
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$(hostname)" \
    >"$root/etc/hosts"
  hostname >"$root/etc/hostname"
  rm -f "$root/etc/apt/sources.list" "$root"/etc/apt/sources.list.d/*
  [ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$root/etc/apt/"
  local f key
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    cp "$f" "$root/etc/apt/sources.list.d/"
    for key in $(sed -n 's/.*[Ss]igned-[Bb]y[:=] *\([^] ]*\).*/\1/p' "$f"); do
      [ -f "$key" ] && mkdir -p "$root$(dirname "$key")" && cp "$key" "$root$key"
    done
  done
  for f in /etc/apt/apt.conf.d/*; do
    grep -q '^Acquire::' "$f" 2>/dev/null && cp "$f" "$root/etc/apt/apt.conf.d/"
  done
  return 0
}

# pip's and npm's settings (files and PIP_* variables above); the local directories they name
# (find-links, file:// indexes) are bind-mounted read-only at the same paths.
copy_registry_settings() {
  local f dir
  for f in /etc/pip.conf /etc/xdg/pip /root/.config/pip /root/.pip /etc/npmrc /root/.npmrc; do
    [ -e "$f" ] || continue
    mkdir -p "$root$(dirname "$f")"
    cp -rL "$f" "$root$f"
  done
  local named
  named=$( { cat /etc/pip.conf /etc/xdg/pip/*.conf /root/.config/pip/*.conf /root/.pip/*.conf 2>/dev/null || true
             env | sed -n 's/^PIP_[A-Z_]*=//p'; } | tr ' ,=' '\n\n\n' | sed -n 's#^file://##p; s#^\(/[^ ]*\)$#\1#p' | sort -u)
  for dir in $named; do
    dir=${dir%/simple}
    [ -d "$dir" ] && [[ $dir != /etc/* && $dir != /root/* ]] || continue
    mkdir -p "$root$dir"
    mount --bind -o ro "$dir" "$root$dir"
    mounts+=("$root$dir")
  done
  return 0
}

mount_kernel_fs() {
  mount -t proc proc "$root/proc" && mounts+=("$root/proc")
  mount -t sysfs sysfs "$root/sys" && mounts+=("$root/sys")
  mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev" && mounts+=("$root/dev")
}

# Python 3, venv, pip, git, make and CA certificates: the README's starting point; then this
# machine's CA bundle (it may hold a proxy's CA the registries need).
add_starting_packages() {
  in_root "apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends \
             python3 python3-venv python3-pip git make ca-certificates >/dev/null"
  cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
}

copy_tree() {
  mkdir -p "$root$src"
  git archive HEAD | tar -x -C "$root$src"
}

# `make run` in its own network namespace, in the background, until it prints the PyIceberg
# program; then the gateway's endpoint (curl, as the banner shows) and the program itself.
demo_reads_its_rows() {
  local log=$state/make-run.log waited=0
  : >"$log"
  setsid "${netns[@]}" "${chroot_env[@]}" chroot "$root" /bin/bash -c "cd $src && exec make run" >"$log" 2>&1 &
  demo_pid=$!  # setsid: its own process group, stopped as one
  # the Iceberg table first (its program), then the PySpark pipeline's sample catalog
  until grep -q "Read it back" "$log" && grep -q "demo pipeline: sample catalog written" "$log"; do
    if ! kill -0 "$demo_pid" 2>/dev/null || grep -q "demo .* failed" "$log" || [ "$waited" -ge "$demo_timeout" ]; then
      echo "make run did not write the demo's table and catalog (log: $log):" >&2
      tail -40 "$log" >&2
      return 1
    fi
    sleep 5
    waited=$((waited + 5))
  done
  # the program: the indented lines after "Read it back", dedented
  awk '/Read it back/ {on = 1; next} on && /^    / {print substr($0, 5); next} on && /^$/ {print; next} on {exit}' \
    "$log" >"$root/tmp/read_back.py"
  grep '^# → ' "$root/tmp/read_back.py" | sed 's/^# → //' >"$root/tmp/read_back.expected"
  local ns=(nsenter "--net=/proc/$demo_pid/ns/net")
  "${ns[@]}" "${chroot_env[@]}" chroot "$root" /bin/bash -c "cd $src && curl -sSk -u admin:admin-password \
      -H 'Content-Type: application/vnd.apache.thrift.json' --data '[1,\"get_all_databases\",1,1,{}]' \
      https://localhost:8443/gateway/default/hmshttpthrift/api/hms" | tee "$state/answer.json"
  echo
  grep -q hmshttptestdatabase "$state/answer.json" || { echo "the gateway's answer lacks the demo database" >&2; return 1; }
  "${ns[@]}" "${chroot_env[@]}" chroot "$root" /bin/bash -c "cd $src && .venv/bin/python /tmp/read_back.py" \
    | tee "$state/read_back.out"
  diff -u "$root/tmp/read_back.expected" "$state/read_back.out" \
    || { echo "the PyIceberg program printed something else than its # → lines" >&2; return 1; }
}

stop_demo() {
  kill -INT -- "-$demo_pid" 2>/dev/null || true
  local waited=0
  while kill -0 "$demo_pid" 2>/dev/null && [ "$waited" -lt 60 ]; do sleep 1; waited=$((waited + 1)); done
  kill -KILL -- "-$demo_pid" 2>/dev/null || true
  wait "$demo_pid" 2>/dev/null || true
  demo_pid=""
}

echo "make fresh: in a clean Debian 12 root ($root): apt-get install python3 python3-venv python3-pip git make"
echo "  ca-certificates, then the README's commands: make run (until the PyIceberg program it prints reads"
echo "  its rows), make install (make test's installs) and make unit"
if [ -f "$base_tar" ]; then
  names+=("debootstrap --variant=minbase bookworm (cached: var/fresh)") times+=(0)
else
  step "debootstrap --variant=minbase bookworm (cached for the next run)" make_base
fi
step "a clean root from the base" unpack_root
step "resolver, /etc/hosts, apt sources" copy_settings
step "kernel file systems (/proc, /sys, /dev)" mount_kernel_fs
step "apt-get: python3 python3-venv python3-pip git make ca-certificates" add_starting_packages
step "pip and npm settings (local indexes bind-mounted)" copy_registry_settings
step "the committed tree (git archive HEAD)" copy_tree
step "make run's installs (demo packages, pip, listener)" in_root "make .venv/.installed-demo"
step "make run: gateway answers, PyIceberg program reads its rows" demo_reads_its_rows
step "make run stopped (Ctrl-C)" stop_demo
step "make install (the test set: apt, pip, npm)" in_root "make install"
step "make unit (own network namespace)" in_netns "make unit"
echo "make fresh: passed"
