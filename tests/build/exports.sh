#!/bin/sh
# libsrcnic.so and the UCT module export the engine's public C API (the functions the headers
# mark SRCNIC_API) and nothing else: no engine internals, whose calls would then go through the
# PLT and could bind to another copy of the engine in the process, and no module internals.
. "$top_srcdir/tests/common.sh"

command -v nm >/dev/null || { echo "SKIP: nm not found"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sed -n 's/^SRCNIC_API .*\b\(srcnic_[a-z0-9_]*\)(.*/\1/p' \
    "$top_srcdir/include/srcnic/srcnic.h" "$top_srcdir/include/srcnic/status.h" |
    sort -u >"$work/api"
[ "$(wc -l <"$work/api")" -ge 30 ] || fail "found only $(wc -l <"$work/api") SRCNIC_API declarations"

for lib in "$top_builddir/src/.libs/libsrcnic.so" "$module"; do
    [ -e "$lib" ] || fail "not built: $lib"
    nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u >"$work/exported"
    extra=$(comm -13 "$work/api" "$work/exported")
    missing=$(comm -23 "$work/api" "$work/exported")
    [ -z "$extra" ] || fail "$(basename "$lib") exports what is not public API:
$(echo "$extra" | head -20)"
    [ -z "$missing" ] || fail "$(basename "$lib") does not export: $missing"
    echo "$(basename "$lib"): exports the $(wc -l <"$work/api") API functions and nothing else"
done
echo "PASS: exported symbols"
