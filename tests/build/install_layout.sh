#!/bin/sh
# make install DESTDIR=... puts the module, headers, pkg-config file, srcrun and the MCA
# parameter file where README.md says, and srcrun points at the installed module.
. "$top_srcdir/tests/common.sh"

dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
run_bounded 300 make -s -C "$top_builddir" install DESTDIR="$dest" >"$dest/install.log" 2>&1 ||
    { cat "$dest/install.log"; fail "make install failed"; }
eval "$(sed -n 's/^\(prefix\|exec_prefix\|libdir\|includedir\|ucxmoduledir\)=\(.*\)/\1="\2"/p' \
        "$top_builddir/srcnic.pc")"
bindir=$(sed -n 's/^bindir = //p' "$top_builddir/Makefile")
datadir=$(sed -n 's/^datadir = //p' "$top_builddir/Makefile")
bindir=$(echo "$bindir" | sed "s|\${exec_prefix}|$exec_prefix|")
datadir=$(echo "$datadir" | sed "s|\${datarootdir}|$prefix/share|")
for f in "$ucxmoduledir/libuct_src.so" "$libdir/libsrcnic.so" "$includedir/srcnic/srcnic.h" \
         "$includedir/srcnic/status.h" "$libdir/pkgconfig/srcnic.pc" "$bindir/srcrun" \
         "$datadir/srcucx/srcucx-mca-params.conf"; do
    [ -e "$dest$f" ] || fail "not installed: $f"
done
[ ! -e "$dest$ucxmoduledir/libuct_src.la" ] || fail "libtool archive installed next to the module"
grep -q "^module=\"$ucxmoduledir/libuct_src.so\"" "$dest$bindir/srcrun" ||
    fail "srcrun does not point at $ucxmoduledir/libuct_src.so"
echo "PASS: install layout under DESTDIR"
