#!/usr/bin/env bash
# Run UCX's own UCT conformance tests (the gtest of UCX 1.13 or 1.18, whichever is installed)
# against the src transport.
#
# usage: contrib/ucx-gtest.sh [--rev REV | --module FILE] [--filter GTEST_FILTER]
#
#   --rev REV       build the module from commit REV (default: the working tree as it is,
#                   including uncommitted and untracked files)
#   --module FILE   use an already built libuct_src.so instead of building one
#   --filter F      gtest filter (default 'src/*': every UCT and MD suite instantiated for src)
#
# Steps, all in a scratch directory outside the repository (SRC_UCX_GTEST_DIR, default
# ~/.cache/srcucx/gtest), each reused when already done:
#   1. installs the packages it needs with apt-get if missing, fetches the UCX source package
#      matching the installed UCX (contrib/get-ucx-src.sh) and copies it to the scratch dir;
#   2. applies Debian's patches if needed, then the test patch for the installed UCX's minor
#      version: contrib/ucx-gtest.patch for 1.13, contrib/ucx-gtest-1.18.patch for 1.18 (both
#      add src to the UCT, MD and flush-cancel test lists, cap test_uct_perf's iterations for
#      src as for tcp, and restrict src to the devices in GTEST_UCT_SRC_DEVICES, default lo);
#      configures UCX like Debian (without verbs/rdmacm, with gtest, with the installed UCX's
#      logging option) and builds it (~10 min on 2 cores the first time for 1.13, ~8 min for
#      1.18; only the patched test files are rebuilt when the patch changes);
#   3. builds the module the ordinary way, against the installed UCX, from a snapshot of the
#      sources. Preloaded into the gtest binary it binds to the build tree's libuct/libucs,
#      since only one instance of a soname is loaded (checked here), and the script checks that
#      the module's ABI-relevant definitions match the build tree's config.h;
#   4. lists the tests (refusing to run if a src test would use a device other than the
#      allowed ones), then runs them suite by suite with LD_PRELOAD=<module>
#      UCX_HANDLE_ERRORS=bt, each test bounded by gtest's watchdog and each run by `timeout`;
#      a suite that crashes resumes after the crashed test. Writes a log and a per-test result
#      list, prints the summary, and exits non-zero if any test failed, crashed or did not run.
#
# Environment: SRC_UCX_GTEST_DIR (scratch dir), SRC_UCX_SRC (use this UCX source tree instead of
# fetching one; the caller vouches that it is the source of the installed UCX), GTEST_UCT_SRC_DEVICES (default lo), SRC_UCX_GTEST_TEST_TIMEOUT (per test,
# default 300 s), SRC_UCX_GTEST_RUN_TIMEOUT (per gtest process, default 900 s),
# SRC_UCX_GTEST_TIMEOUT (whole run, default 3600 s), SRC_UCX_GTEST_SEED (gtest random seed).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "ucx-gtest: $*" >&2; exit 2; }
note() { echo "=== $*"; }

rev=""
module=""
filter="src/*"
while [ $# -gt 0 ]; do
    case "$1" in
        --rev) rev=${2:?--rev needs a revision}; shift 2 ;;
        --module) module=${2:?--module needs a file}; shift 2 ;;
        --filter) filter=${2:?--filter needs a gtest filter}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

dir=${SRC_UCX_GTEST_DIR:-$HOME/.cache/srcucx/gtest}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
case "$dir/" in "$top"/*) die "the scratch directory $dir must be outside the repository" ;; esac
devices=${GTEST_UCT_SRC_DEVICES:-lo}
test_timeout=${SRC_UCX_GTEST_TEST_TIMEOUT:-300}
run_timeout=${SRC_UCX_GTEST_RUN_TIMEOUT:-900}
total_timeout=${SRC_UCX_GTEST_TIMEOUT:-3600}
seed=${SRC_UCX_GTEST_SEED:-$((RANDOM % 32768))}
jobs=$(nproc 2>/dev/null || echo 2)
[ -z "$module" ] || module=$(cd "$(dirname "$module")" && pwd)/$(basename "$module")
[ -z "$module" ] || [ -f "$module" ] || die "no module $module"

# --- 1. packages and the UCX source --------------------------------------------------------------
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
packages=(build-essential autoconf automake libtool pkg-config patch libnuma-dev
          libucx-dev ucx-utils dpkg-dev coreutils git)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    note "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

version=$(pkg-config --modversion ucx)
# The test patch edits UCX's test files, which differ between minor versions.
case "$version" in
    1.13.*) patchfile=$top/contrib/ucx-gtest.patch ;;
    1.18.*) patchfile=$top/contrib/ucx-gtest-1.18.patch ;;
    *) die "no test patch for UCX $version (contrib/ucx-gtest.patch is for 1.13, ucx-gtest-1.18.patch for 1.18)" ;;
esac
[ -f "$patchfile" ] || die "missing $patchfile"
ucx_src=${SRC_UCX_SRC:-$("$top/contrib/get-ucx-src.sh")}
ucx_src=$(cd "$ucx_src" && pwd)
[ -f "$ucx_src/test/gtest/uct/uct_test.h" ] || die "$ucx_src is not a UCX source tree with tests"
src=$dir/ucx-$version-src          # patched copy
build=$dir/ucx-$version-build      # UCX build tree with test/gtest/gtest
logs=$dir/logs
mkdir -p "$logs"

if [ ! -f "$src/.srcucx-copied" ]; then
    note "copying $ucx_src to $src"
    rm -rf "$src" "$build"
    cp -a "$ucx_src" "$src"
    # get-ucx-src.sh applies Debian's patches; a tree unpacked otherwise may lack them.
    if [ -f "$src/debian/patches/series" ]; then
        while read -r p; do
            case "$p" in ''|'#'*) continue ;; esac
            if ! (cd "$src" && patch -p1 -R -s -f --dry-run <"debian/patches/$p" >/dev/null); then
                echo "applying Debian patch $p"
                (cd "$src" && patch -p1 -s -f <"debian/patches/$p")
            fi
        done <"$src/debian/patches/series"
    fi
    [ -f "$src/debian/copyright" ] || die "$src lacks debian/copyright, which UCX's configure links"
    touch "$src/.srcucx-copied"
fi

# --- 2. the test patch, configure and build UCX ----------------------------------------------
patch_sum=$(sha256sum <"$patchfile" | cut -c1-16)
if [ "$(cat "$src/.srcucx-patched" 2>/dev/null)" != "$patch_sum" ]; then
    note "applying contrib/$(basename "$patchfile")"
    for f in $(sed -n 's|^+++ b/||p' "$patchfile"); do
        cp "$ucx_src/$f" "$src/$f"      # back to pristine, with a new mtime for make
    done
    (cd "$src" && patch -p1 -s -f <"$patchfile")
    echo "$patch_sum" >"$src/.srcucx-patched"
fi

# GCC 12 flags test/gtest/ucm/malloc_hook.cc with use-after-free, and UCX builds with -Werror.
# UCX's configure empties CXXFLAGS (its own flags are BASE_CXXFLAGS), so test/gtest's make gets
# it; not the top-level make, where it would replace what src/tools/perf/lib appends to CXXFLAGS.
cxxflags=""
if echo 'int x;' | g++ -Werror -Wno-error=use-after-free -x c++ -c - -o /dev/null 2>/dev/null; then
    cxxflags="-Wno-error=use-after-free"
fi
# The log level is ABI-relevant (UCS_MAX_LOG_LEVEL, checked in step 3): take the installed UCX's
# option (Debian 12's 1.13.1 has --disable-logging, Debian 13's 1.18.1 --enable-logging).
logging=$(ucx_info -v 2>/dev/null | sed -n 's/^# Configured with: //p' | tr ' ' '\n' |
          grep -E '^--(enable|disable)-logging(=|$)' | tail -n 1 || true)
ucx_opts=(--prefix="$dir/ucx-$version-install" --enable-mt ${logging:+"$logging"} --enable-devel-headers
          --enable-cma --disable-backtrace-detail --enable-gtest --without-verbs --without-rdmacm
          --without-java --without-go --without-cuda --without-rocm --without-knem --without-xpmem
          --without-ugni --disable-doxygen-doc)
if [ "$(cat "$build/.srcucx-configured" 2>/dev/null)" != "${ucx_opts[*]}" ]; then
    note "UCX $version: autogen and configure (about 40 s)"
    rm -rf "$build" && mkdir -p "$build"
    [ -x "$src/configure" ] || (cd "$src" && ./autogen.sh) >"$logs/ucx-autogen.log" 2>&1 ||
        { tail -n 30 "$logs/ucx-autogen.log"; die "UCX autogen failed"; }
    (cd "$build" && "$src/configure" "${ucx_opts[@]}") >"$logs/ucx-configure.log" 2>&1 ||
        { tail -n 30 "$logs/ucx-configure.log"; die "UCX configure failed"; }
    echo "${ucx_opts[*]}" >"$build/.srcucx-configured"
fi
gtest=$build/test/gtest/gtest
if [ "$(cat "$build/.srcucx-built" 2>/dev/null)" != "$patch_sum" ] || [ ! -x "$gtest" ]; then
    note "UCX $version: building the libraries and gtest with $jobs jobs (about 10 min the first time)"
    start=$SECONDS
    # Only what the gtest links (libraries, transport modules, libucxperf), then the gtest.
    (for d in src/ucm src/ucs src/uct src/ucp src/tools/perf/lib; do
         make -C "$build/$d" -j"$jobs" || exit 1
     done
     make -C "$build/test/gtest" -j"$jobs" CXXFLAGS="$cxxflags") >"$logs/ucx-make.log" 2>&1 ||
        { tail -n 40 "$logs/ucx-make.log"; die "UCX build failed (log: $logs/ucx-make.log)"; }
    echo "built in $((SECONDS - start)) s"
    echo "$patch_sum" >"$build/.srcucx-built"
fi
[ -x "$gtest" ] || die "no gtest binary at $gtest"

# --- 3. the module -------------------------------------------------------------------------------
if [ -z "$module" ]; then
    mod=$dir/module
    rm -rf "$mod/snapshot.new" && mkdir -p "$mod/snapshot.new"
    if [ -n "$rev" ]; then
        what="commit $(git -C "$top" rev-parse --short "$rev^{commit}")"
        git -C "$top" archive --format=tar "$rev" | tar -x -C "$mod/snapshot.new"
    else
        what="working tree"
        # Tracked and untracked files, without the products of an in-tree build.
        (cd "$top" && git ls-files -z -c -o --exclude-standard -x Makefile -x config.status \
                -x config.log -x config.h -x stamp-h1 -x libtool -x '*.o' -x '*.lo' -x '*.la' \
                -x .deps -x .libs -x '*.so' -x '*.a' -x '*.log' -x '*.trs' |
            while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
            tar --null -T - -cf -) | tar -x -C "$mod/snapshot.new"
    fi
    snap_sum=$( (cd "$mod/snapshot.new" && find . -type f -print0 | LC_ALL=C sort -z |
                 xargs -0 sha256sum) | sha256sum | cut -c1-16)
    module=$mod/build/uct_src/.libs/libuct_src.so
    if [ "$(cat "$mod/.srcucx-built" 2>/dev/null)" = "$snap_sum" ] && [ -f "$module" ]; then
        note "module: reusing the build of the same sources ($what)"
        rm -rf "$mod/snapshot.new"
    else
        note "module: building libuct_src.so from the $what"
        rm -rf "$mod/snapshot" "$mod/build" "$mod/.srcucx-built"
        mv "$mod/snapshot.new" "$mod/snapshot"
        mkdir -p "$mod/build"
        (cd "$mod/snapshot" && ./autogen.sh && cd "$mod/build" &&
            "$mod/snapshot/configure" --with-ucx-src="$ucx_src" --without-mpi &&
            make -j"$jobs" -C src libsrcnic_core.la && make -j"$jobs" -C uct_src libuct_src.la) \
            >"$logs/module-build.log" 2>&1 ||
            { tail -n 40 "$logs/module-build.log"; die "module build failed (log: $logs/module-build.log)"; }
        echo "$snap_sum" >"$mod/.srcucx-built"
    fi
    # The module's ABI-relevant definitions must be those the gtest's UCX was built with.
    abi=$(sed -n 's/^UCX_ABI_CPPFLAGS = //p' "$mod/build/uct_src/Makefile")
    for def in ENABLE_ASSERT ENABLE_PARAMS_CHECK ENABLE_DEBUG_DATA ENABLE_STATS \
               ENABLE_BUILTIN_MEMCPY HAVE_ATTRIBUTE_NOOPTIMIZE UCS_MAX_LOG_LEVEL; do
        m=$(printf '%s\n' $abi | sed -n "s/^-D$def=//p")
        b=$(sed -n "s/^#define $def \(.*\)$/\1/p" "$build/config.h")
        [ "$def" = ENABLE_DEBUG_DATA ] && [ "$b" = "" ] && b=0
        [ "$m" = "$b" ] || die "ABI mismatch: module has $def='$m', UCX build tree has '$b'"
    done
else
    what="$module"
fi
note "module: $module"

# --- 4. list and run -----------------------------------------------------------------------------
stamp=$(date +%Y%m%d-%H%M%S)
log=$logs/gtest-$stamp.log
results=$logs/results-$stamp.txt
ln -sfn "$(basename "$log")" "$logs/gtest-latest.log"
ln -sfn "$(basename "$results")" "$logs/results-latest.txt"
export UCX_HANDLE_ERRORS=bt GTEST_UCT_SRC_DEVICES=$devices
cd "$build/test/gtest"

list=$logs/list-$stamp.txt
LD_DEBUG=libs LD_DEBUG_OUTPUT=$logs/ld-$stamp LD_PRELOAD=$module \
    ./gtest --gtest_list_tests --gtest_filter="$filter" >"$list" 2>&1 ||
    { cat "$list"; die "gtest could not list the tests"; }
# Only the build tree's libuct/libucs may be initialised; a second copy would hold its own
# component list, and the module would be registered where the tests do not look.
inits=$(cat "$logs"/ld-"$stamp".* | sed -n 's/.*calling init: \(.*\/lib\(uct\|ucs\)\.so[.0-9]*\)$/\1/p' | sort -u)
rm -f "$logs"/ld-"$stamp".*
[ "$(echo "$inits" | grep -c .)" -eq 2 ] && ! echo "$inits" | grep -qv "^$build/" ||
    die "libuct/libucs are not the build tree's alone: $(echo $inits)"
awk '/^[^ \[].*\.$/ { suite = $1 } /^  [^ ]/ { print suite $1 "\t" $0 }' "$list" |
    sed 's/\t *[^ ]* *# *GetParam() = /\t/' >"$list.tests"
ntests=$(grep -c . "$list.tests" || true)
[ "$ntests" -gt 0 ] || { cat "$list"; die "no test matches '$filter'"; }
# Never test a src device other than the allowed ones (they would send beyond loopback).
bad=$(awk -F'\t' '$2 ~ /^src\/./ { split($2, p, "/"); print p[2] }' "$list.tests" | sort -u |
      grep -vxF -f <(tr ',' '\n' <<<"$devices") || true)
[ -z "$bad" ] || die "the test list has src devices outside GTEST_UCT_SRC_DEVICES=$devices: $bad"
used=$(cut -f2 "$list.tests" | sed -n 's|^src/\([^/]*\).*|\1|p' | sort -u | xargs)
note "$ntests tests (src devices: ${used:-none, MD tests only}), seed $seed, log $log"

# run_tests NAME...: one gtest process; appends to $log, prints the verdict lines for the tests
# it reached as "VERDICT<TAB>name<TAB>detail".
run_tests() {
    local out=$logs/run.tmp rc=0
    # (in a subshell that does not exec it, so that bash's "Aborted" notice goes to the log)
    (LD_PRELOAD=$module timeout -k 10 "$run_timeout" ./gtest -s "$seed" -t "$test_timeout" \
        --gtest_filter="$(IFS=:; echo "$*")"; exit $?) >"$out" 2>&1 || rc=$?
    cat "$out" >>"$log"
    awk -v rc="$rc" '
        / - abort testing$/ { watchdog = 1 }
        /^\[ RUN      \] / { cur = $4; skip = ""; next }
        /^\[     SKIP \] / { sub(/^\[     SKIP \] */, ""); skip = $0; next }
        /^\[       OK \] / { if ($4 == cur) { print (skip != "" ? "SKIP" : "PASS") "\t" cur "\t" skip; cur = "" } next }
        /^\[  FAILED  \] .*\([0-9]+ ms\)$/ { sub(/,$/, "", $4); if ($4 == cur) { print "FAIL\t" cur "\t"; cur = "" } next }
        END { if (cur != "") print ((watchdog || rc == 124 || rc == 137) ? "TIMEOUT" : "CRASH") "\t" cur "\texit status " rc }
    ' "$out"
    rm -f "$out"
}

deadline=$((SECONDS + total_timeout))
run_start=$SECONDS
: >"$results"
for suite in $(cut -f1 "$list.tests" | sed 's/\.[^.]*$//' | uniq); do
    mapfile -t todo < <(awk -F'\t' -v s="$suite" 'index($1, s ".") == 1 { print $1 }' "$list.tests")
    t0=$SECONDS
    while [ ${#todo[@]} -gt 0 ]; do
        if [ $SECONDS -ge $deadline ]; then
            for t in "${todo[@]}"; do printf 'NOTRUN\t%s\twhole-run timeout\n' "$t" >>"$results"; done
            break
        fi
        before=$(wc -l <"$results")
        run_tests "${todo[@]}" >>"$results"
        if [ "$(wc -l <"$results")" -eq "$before" ]; then
            for t in "${todo[@]}"; do printf 'NOTRUN\t%s\tgtest ended before reaching it\n' "$t" >>"$results"; done
            break
        fi
        # Resume after a crash with the tests the process did not reach.
        mapfile -t todo < <(printf '%s\n' "${todo[@]}" | grep -vxF -f <(cut -f2 "$results") || true)
    done
    printf '%-50s %4d s  %s\n' "$suite" $((SECONDS - t0)) \
        "$(awk -F'\t' -v s="$suite" 'index($2, s ".") == 1 { n[$1]++ } END { for (v in n) printf "%s %d  ", v, n[v] }' "$results")"
done
elapsed=$((SECONDS - run_start))

count() { awk -F'\t' -v v="$1" '$1 == v' "$results" | wc -l; }
npass=$(count PASS); nskip=$(count SKIP); nfail=$(count FAIL)
ncrash=$(count CRASH); ntimeout=$(count TIMEOUT); nnotrun=$(count NOTRUN)
echo
note "skipped tests, by reason"
awk -F'\t' '$1 == "SKIP" { r = $3; if (r ~ /check_atomics/) r = "(atomic operations: not supported)"
                            split($2, n, "."); print r "  [" n[1] "]" }' "$results" |
    sort | uniq -c | sort -rn
if [ $((nfail + ncrash + ntimeout + nnotrun)) -gt 0 ]; then
    note "tests that did not pass"
    awk -F'\t' '$1 != "PASS" && $1 != "SKIP" { printf "%-8s %s %s\n", $1, $2, $3 }' "$results"
fi
echo
echo "module: $what"
echo "log: $log   results: $results"
echo "ucx-gtest: $ntests tests, $((npass + nskip)) passed ($nskip of them skipped), $nfail failed," \
     "$ncrash crashed, $ntimeout timed out, $nnotrun not run, in $elapsed s"
[ $((nfail + ncrash + ntimeout + nnotrun)) -eq 0 ]
