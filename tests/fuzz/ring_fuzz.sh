#!/usr/bin/env bash
# make check: fuzzes what an attached process can write into the memory it shares with the node
# agent (tests/fuzz/ring_fuzz.cc) for $SRCNIC_FUZZ_SECONDS (default 30) seconds; skipped (77)
# where clang++ cannot build libFuzzer targets.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/run_fuzz.sh" "${SRCNIC_FUZZ_SECONDS:-30}" ring_fuzz
