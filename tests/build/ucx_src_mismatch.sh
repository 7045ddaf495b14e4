#!/bin/sh
# configure refuses a UCX source tree whose version differs from the installed UCX, naming both.
. "$top_srcdir/tests/common.sh"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# A tree that looks like UCX's but claims another version.
mkdir -p "$scratch/ucx/src/uct/base" "$scratch/build"
cp "$ucx_src_dir/src/uct/base/uct_iface.h" "$scratch/ucx/src/uct/base/"
sed -e 's/^define(\[ucx_ver_minor\], *[0-9]*)/define([ucx_ver_minor], 99)/' \
    "$ucx_src_dir/configure.ac" >"$scratch/ucx/configure.ac"
fake_version=$(echo "$ucx_version" | sed 's/^\([0-9]*\)\.[0-9]*/\1.99/')

configure=$(linked_source_tree "$scratch/src")

cd "$scratch/build"
if run_bounded 120 "$configure" --with-ucx-src="$scratch/ucx" >out.txt 2>&1; then
    fail "configure accepted UCX source $fake_version for installed UCX $ucx_version"
fi
grep -q "is version $fake_version, but the installed UCX libraries are version $ucx_version" out.txt ||
    { cat out.txt; fail "configure's message does not name both versions"; }

# And a directory that is no UCX tree at all gets the how-to-fix message.
if run_bounded 120 "$configure" --with-ucx-src="$scratch/nothing" >out2.txt 2>&1; then
    fail "configure accepted a missing UCX source tree"
fi
grep -q "contrib/get-ucx-src.sh" out2.txt || { cat out2.txt; fail "no hint how to get the source"; }
echo "PASS: mismatch ($fake_version vs $ucx_version) and missing tree are refused"
