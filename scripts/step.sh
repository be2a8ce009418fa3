#!/usr/bin/env bash
# Runs one long step of `make install` / `make run` and says how long it took:
#   scripts/step.sh "LABEL" COMMAND [ARG...]
# prints "==> LABEL ..." before and "==> LABEL: done in N s" (or "failed after N s") after.
set -uo pipefail
label=$1
shift
echo "==> $label ..."
started=$SECONDS
if "$@"; then
  echo "==> $label: done in $((SECONDS - started)) s"
else
  status=$?
  echo "==> $label: failed after $((SECONDS - started)) s (exit status $status)" >&2
  exit "$status"
fi
