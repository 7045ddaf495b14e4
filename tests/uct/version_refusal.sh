#!/bin/sh
# The module refuses to register in a UCX of another minor version than the one it was built
# for (UCX's internal structs, which it uses, change between minor versions): loaded into a
# process whose ucp_get_version reports another minor version, it logs a warning naming both
# versions, and ucx_info -d lists no src transport or memory domain. ucp_get_version comes from
# a small preloaded object that stands in for UCP's; with it reporting the version the module
# was built for, src is registered as usual (so the stand-in alone changes nothing else).
. "$top_srcdir/tests/common.sh"

[ -r "$module" ] || fail "module not built: $module"
[ -n "$ucx_version" ] || fail "ucx_version is not set"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

major=${ucx_version%%.*}
rest=${ucx_version#*.}
minor=${rest%%.*}

# stand_in MINOR: a shared object whose ucp_get_version reports MAJOR.MINOR.99.
stand_in() {
    cat >"$scratch/v$1.c" <<EOF
void ucp_get_version(unsigned *major_p, unsigned *minor_p, unsigned *release_p)
{
    *major_p   = $major;
    *minor_p   = $1;
    *release_p = 99;
}
EOF
    $CC -shared -fPIC -o "$scratch/v$1.so" "$scratch/v$1.c" || fail "compiling the stand-in failed"
    echo "$scratch/v$1.so"
}

# info MINOR: ucx_info -d with the module and a ucp_get_version reporting MAJOR.MINOR.99 (the
# stand-in after the module, but before libucp, which ucx_info loads after every preload).
info() {
    so=$(stand_in "$1")
    LD_PRELOAD="$(module_preload):$so" run_bounded 60 ucx_info -d 2>&1 ||
        fail "ucx_info -d failed with UCX reported as $major.$1.99"
}

# The version it was built for: registered.
out=$(info "$minor")
echo "$out" | grep -q "Transport: src$" ||
    { echo "$out"; fail "no src transport with UCX reported as $major.$minor.99 (the version built for)"; }
if echo "$out" | grep -q "built for UCX"; then
    echo "$out"; fail "refusal warning although the minor version matches"
fi

# Another minor version, above and below: not registered, and a warning names both versions.
for other in $((minor + 1)) $((minor - 1)); do
    [ "$other" -ge 0 ] || continue
    out=$(info "$other")
    if echo "$out" | grep -q "Transport: src$\|Memory domain: src$"; then
        echo "$out"; fail "src registered in UCX reported as $major.$other.99 (built for $ucx_version)"
    fi
    echo "$out" | grep "built for UCX $ucx_version but is loaded into UCX $major.$other.99" ||
        { echo "$out"; fail "no warning naming UCX $ucx_version and $major.$other.99"; }
    # The rest of UCX is untouched: its own transports are still listed.
    echo "$out" | grep -q "Transport: self$" ||
        { echo "$out"; fail "ucx_info -d lost UCX's own transports with UCX reported as $major.$other.99"; }
done
echo "PASS: the module registers in UCX $major.$minor only, and says why it does not elsewhere"
