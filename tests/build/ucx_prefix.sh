#!/bin/sh
# configure --with-ucx=PREFIX: builds against the UCX whose ucx.pc is under PREFIX (a site's own
# UCX, as Spack or a module system installs it), with a run path to its libraries; a PREFIX
# without ucx.pc stops with a message that says what to pass.
. "$top_srcdir/tests/common.sh"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
configure=$(linked_source_tree "$scratch/src")

# A prefix of its own, as a site's install has: its ucx.pc names the installed libraries and
# headers (this machine's, so that the build works) under a prefix that pkg-config's default
# path does not know.
site="$scratch/site-ucx"
mkdir -p "$site/lib/pkgconfig" "$scratch/build" "$scratch/bad/lib"
libdir=$(pkg-config --variable=libdir ucx)
includedir=$(pkg-config --variable=includedir ucx)
cat >"$site/lib/pkgconfig/ucx.pc" <<PC
prefix=$site
libdir=$libdir
includedir=$includedir

Name: ucx
Description: the site's UCX (test)
Version: $ucx_version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lucp -luct -lucs
PC

cd "$scratch/build"
run_bounded 300 env PKG_CONFIG_PATH=/nonexistent "$configure" --with-ucx="$site" \
    --with-ucx-src="$ucx_src_dir" >out.txt 2>&1 || { tail -n 30 out.txt; fail "configure --with-ucx=$site failed"; }
grep -q "checking for ucx.pc under $site... $site/lib/pkgconfig" out.txt ||
    { grep ucx.pc out.txt; fail "configure did not take ucx.pc from $site/lib/pkgconfig"; }
grep -q "^UCX_LIBS = .*-Wl,-rpath,$libdir" Makefile ||
    { grep "^UCX_LIBS" Makefile; fail "no run path to the prefix's libraries"; }

# A prefix without ucx.pc: refused, saying what to pass.
mkdir "$scratch/build2" && cd "$scratch/build2"
if run_bounded 120 "$configure" --with-ucx="$scratch/bad" --with-ucx-src="$ucx_src_dir" >out.txt 2>&1; then
    fail "configure accepted --with-ucx=$scratch/bad, which has no ucx.pc"
fi
grep -q -- "--with-ucx=$scratch/bad: no ucx.pc" out.txt && grep -q "ucx_info -v" out.txt ||
    { tail -n 5 out.txt; fail "the refusal does not say what is missing and what to pass"; }
echo "PASS: --with-ucx=PREFIX builds against PREFIX's ucx.pc with a run path; a prefix without one is refused"
