#!/usr/bin/env bash
# make check: fuzzes the receive path for $SRCNIC_FUZZ_SECONDS (default 30) seconds; skipped
# (77) where clang++ cannot build libFuzzer targets.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/run_fuzz.sh" "${SRCNIC_FUZZ_SECONDS:-30}"
