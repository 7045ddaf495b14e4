#!/bin/sh
# srcrun launches an Open MPI job on pml/ucx (which Debian disables by default) with the module
# loaded into every rank, keeping an existing LD_PRELOAD.
. "$top_srcdir/tests/common.sh"

srcrun="$top_builddir/contrib/srcrun"
prog="$top_builddir/tests/mpi/mpi_check"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_oversubscribe

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"

# An existing LD_PRELOAD value is kept after the module (an empty stand-in module, so that
# this check also holds in sanitizer builds, whose module needs the sanitizer runtime first).
echo 'int srcrun_stand_in;' >stand_in.c
$CC -shared -fPIC -o stand_in.so stand_in.c
keep=$(LD_PRELOAD=libc.so.6 "$srcrun" --module "$scratch/stand_in.so" sh -c 'echo "$LD_PRELOAD"')
[ "$keep" = "$scratch/stand_in.so:libc.so.6" ] || fail "LD_PRELOAD not kept: '$keep'"

# A missing module is a clear error, not a silent run without it.
if "$srcrun" --module /nonexistent/libuct_src.so true 2>err.txt; then fail "missing module accepted"; fi
grep -q "not found" err.txt || fail "unclear message for a missing module"

# Each MPI launch draws a job key of its own, the same in every rank, unless one is set.
keys() { run_bounded 120 "$srcrun" --module "$scratch/stand_in.so" "$MPIRUN" -np 2 sh -c 'echo "key=$UCX_SRC_JOB_KEY"' | sort -u; }
first=$(keys); second=$(keys)
[ "$(echo "$first" | wc -l)" -eq 1 ] || fail "ranks of one launch got different job keys: $first"
case "$first" in key=|key=0) fail "no job key drawn: '$first'" ;; esac
[ "$first" != "$second" ] || fail "two launches drew the same job key ($first)"
set_key=$(UCX_SRC_JOB_KEY=7 keys)
[ "$set_key" = "key=7" ] || fail "a job key set by the caller was replaced: '$set_key'"
echo "job keys: one per launch ($first, $second), the caller's kept"

# A module that writes to standard output when it loads (UCX does, with UCX_LOG_LEVEL=debug)
# changes nothing srcrun decides: pml/ucx is still selected and the job key is a number.
printf '#include <stdio.h>\n__attribute__((constructor)) static void noise(void) { puts("[noise] loaded"); }\n' >noisy.c
$CC -shared -fPIC -o noisy.so noisy.c
noisy=$(run_bounded 120 "$srcrun" --module "$scratch/noisy.so" "$MPIRUN" -np 1 \
    sh -c 'echo "pml=$OMPI_MCA_pml key=$UCX_SRC_JOB_KEY"' | grep '^pml=')
case "$noisy" in
"pml=ucx key="*[!0-9]*|"pml=ucx key=") fail "job key spoiled by a module's output: '$noisy'" ;;
"pml=ucx key="*) echo "a module's output on load: $noisy" ;;
*) fail "srcrun did not select pml/ucx when the module writes on load: '$noisy'" ;;
esac

# The installed MCA parameter file selects what srcrun selects, given to mpirun --tune (with the
# module and the UCX variables passed by hand): Open MPI 4.1 reads it as a parameter file, Open
# MPI 5 (PRRTE) wants param=value lines.
LD_PRELOAD=$(module_preload) UCX_TLS=src,self UCX_NET_DEVICES=lo \
    run_bounded 300 "$MPIRUN" --tune "$top_srcdir/contrib/srcucx-mca-params.conf" \
    -x LD_PRELOAD -x UCX_TLS -x UCX_NET_DEVICES -x UCX_SRC_MODE -np 2 \
    --mca pml_base_verbose 10 "$prog" >out.txt 2>&1 ||
    { cat out.txt; fail "MPI job with mpirun --tune srcucx-mca-params.conf failed"; }
grep -q "selected ucx" out.txt || { cat out.txt; fail "--tune srcucx-mca-params.conf did not select pml/ucx"; }
grep -q "mpi_check: 2 ranks passed" out.txt || { cat out.txt; fail "mpi_check did not pass under --tune"; }
echo "PASS: mpirun --tune srcucx-mca-params.conf (Open MPI $(ompi_major))"

# The MPI jobs: ranks must run on pml/ucx (OMPI_MCA_pml=ucx makes MPI_Init fail otherwise)
# over the src transport only (plus self, and sm in one variant), on the loopback device (tests
# send to no other address).
for tls in src,self src,self,sm; do
    for np in 2 4 8; do
        LD_PRELOAD=$(module_preload) UCX_TLS=$tls UCX_NET_DEVICES=lo \
            run_bounded 300 "$srcrun" --module "$module" "$MPIRUN" -np $np \
            --mca pml_base_verbose 10 "$prog" >out.txt 2>&1 ||
            { cat out.txt; fail "MPI job (UCX_TLS=$tls, np=$np) failed"; }
        grep -q "selected ucx" out.txt || { cat out.txt; fail "pml/ucx was not selected"; }
        grep -q "mpi_check: $np ranks passed" out.txt ||
            { cat out.txt; fail "mpi_check did not pass (UCX_TLS=$tls, np=$np)"; }
    done
done

# Beyond the connection budget: 8 ranks, each engine with 2 connections, so most peers go over
# DC streams (PROTOCOL.md §8), with 2 DCIs shared in turn and 4 target contexts.
LD_PRELOAD=$(module_preload) UCX_TLS=src,self UCX_NET_DEVICES=lo UCX_SRC_MODE=embedded \
    UCX_SRC_MAX_CONNECTIONS=2 UCX_SRC_NUM_DCI=2 UCX_SRC_DC_TARGETS=4 \
    run_bounded 300 "$srcrun" --module "$module" "$MPIRUN" -np 8 "$prog" >out.txt 2>&1 ||
    { cat out.txt; fail "MPI job with UCX_SRC_MAX_CONNECTIONS=2 failed"; }
grep -q "mpi_check: 8 ranks passed" out.txt ||
    { cat out.txt; fail "mpi_check did not pass with UCX_SRC_MAX_CONNECTIONS=2"; }
echo "PASS: 8 ranks over a budget of 2 connections each (DC for the rest)"
echo "PASS: srcrun runs MPI jobs on pml/ucx with the module loaded"
