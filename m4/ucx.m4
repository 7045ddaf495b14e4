# SRC_UCX_CHECK: find the installed UCX (pkg-config, 1.13 or newer; --with-ucx=PREFIX for one
# installed elsewhere), UCX's internal headers (--with-ucx-src=DIR, the unpacked source tree of
# the same version), and the ABI-relevant definitions the installed libraries were built with.
#
# Sets and substitutes: UCX_CFLAGS, UCX_LIBS, UCX_LIBDIR, UCX_VERSION, UCX_SRC_DIR,
# UCX_ABI_CPPFLAGS, UCX_UCT_LIBS, ucxmoduledir.
AC_DEFUN([SRC_UCX_CHECK], [
    AC_ARG_WITH([ucx],
        AS_HELP_STRING([--with-ucx=PREFIX],
            [the UCX installed under PREFIX (a site's own build: Spack, a module system) instead
             of the one pkg-config finds; its ucx.pc is looked for in PREFIX/lib/pkgconfig,
             PREFIX/lib64/pkgconfig and PREFIX/lib/MULTIARCH/pkgconfig]),
        [], [with_ucx=])
    ucx_rpath=
    AS_CASE(["$with_ucx"],
        [""|yes], [],
        [no], [AC_MSG_ERROR([--without-ucx: the transport is a UCX module and needs UCX])],
        [ucx_pc_dir=
         ucx_multiarch=`$CC -print-multiarch 2>/dev/null`
         for ucx_dir in "$with_ucx/lib/pkgconfig" "$with_ucx/lib64/pkgconfig" \
                        ${ucx_multiarch:+"$with_ucx/lib/$ucx_multiarch/pkgconfig"}; do
             AS_IF([test -f "$ucx_dir/ucx.pc"], [ucx_pc_dir=$ucx_dir; break])
         done
         AC_MSG_CHECKING([for ucx.pc under $with_ucx])
         AS_IF([test -n "$ucx_pc_dir"], [AC_MSG_RESULT([$ucx_pc_dir])],
               [AC_MSG_RESULT([no])
                AC_MSG_ERROR([--with-ucx=$with_ucx: no ucx.pc in lib/pkgconfig, lib64/pkgconfig or lib/${ucx_multiarch:-MULTIARCH}/pkgconfig under it.
Pass the prefix UCX was installed to (the directory that holds its lib/ and include/; 'ucx_info -v'
prints it as --prefix).])])
         PKG_CONFIG_PATH="$ucx_pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
         export PKG_CONFIG_PATH
         ucx_rpath=yes])
    PKG_CHECK_MODULES([UCX], [ucx >= 1.13], [],
        [AC_MSG_ERROR([installed UCX 1.13 or newer not found by pkg-config ($UCX_PKG_ERRORS).
Install it (Debian/Ubuntu: apt-get install libucx-dev ucx-utils) or point PKG_CONFIG_PATH at its lib/pkgconfig.])])
    UCX_VERSION=`$PKG_CONFIG --modversion ucx`
    UCX_LIBDIR=`$PKG_CONFIG --variable=libdir ucx`
    UCX_UCT_LIBS="-L$UCX_LIBDIR -luct -lucs"
    # A UCX outside the system's library path: programs and tests built here find it without
    # LD_LIBRARY_PATH (the module is loaded by that UCX, which is already in the process).
    AS_IF([test -n "$ucx_rpath"],
          [UCX_LIBS="$UCX_LIBS -Wl,-rpath,$UCX_LIBDIR"
           UCX_UCT_LIBS="$UCX_UCT_LIBS -Wl,-rpath,$UCX_LIBDIR"])

    AC_ARG_WITH([ucx-src],
        AS_HELP_STRING([--with-ucx-src=DIR],
            [unpacked UCX source tree of exactly the installed version, for UCX's internal headers
             (default: ~/.cache/srcucx/ucx-VERSION, where contrib/get-ucx-src.sh puts it)]),
        [], [with_ucx_src="$HOME/.cache/srcucx/ucx-$UCX_VERSION"])
    AC_MSG_CHECKING([for UCX internal headers in $with_ucx_src])
    AS_IF([test -f "$with_ucx_src/src/uct/base/uct_iface.h" && test -f "$with_ucx_src/configure.ac"],
          [AC_MSG_RESULT([yes])],
          [AC_MSG_RESULT([no])
           AC_MSG_ERROR([UCX's internal headers (src/uct/base/uct_iface.h) were not found in '$with_ucx_src'.
The transport needs the source tree of the installed UCX $UCX_VERSION. Get it with
    contrib/get-ucx-src.sh            (Debian/Ubuntu: fetches it from the distribution's source archive)
and pass the directory it prints as --with-ucx-src=DIR.])])
    UCX_SRC_DIR=`cd "$with_ucx_src" && pwd`

    # The transport uses UCX's internal structs, so the headers must be of the installed version.
    AC_MSG_CHECKING([version of the UCX source tree])
    ucx_src_version=
    for ucx_part in major minor patch; do
        ucx_num=`sed -n "s/.*ucx_ver_$ucx_part[[^,]]*, *\([[0-9]][[0-9]]*\)).*/\1/p" "$UCX_SRC_DIR/configure.ac" | head -n 1`
        ucx_src_version="$ucx_src_version${ucx_src_version:+.}$ucx_num"
    done
    AC_MSG_RESULT([${ucx_src_version:-unknown}])
    AS_IF([test "x$ucx_src_version" != "x$UCX_VERSION"],
          [AC_MSG_ERROR([the UCX source tree '$UCX_SRC_DIR' is version ${ucx_src_version:-unknown}, but the installed UCX libraries are version $UCX_VERSION.
Their internal structs may differ, so the transport would not be ABI-compatible. Use the source of
UCX $UCX_VERSION: contrib/get-ucx-src.sh fetches it, then pass --with-ucx-src=DIR.])])

    # UCX's ucs/sys/checker.h, which the internal headers the transport uses include, includes
    # valgrind/memcheck.h (unless NVALGRIND): a missing one is a configure error, not a build one.
    AS_IF([grep -q 'valgrind/memcheck.h' "$UCX_SRC_DIR/src/ucs/sys/checker.h" 2>/dev/null],
          [AC_CHECK_HEADER([valgrind/memcheck.h], [],
               [AC_MSG_ERROR([UCX's internal headers include valgrind/memcheck.h, which is not installed (Debian: apt-get install valgrind)])])])

    # ABI-relevant definitions, read off the installed libraries.
    ucx_libucs="$UCX_LIBDIR/libucs.so.0"
    AS_IF([test -r "$ucx_libucs"], [],
          [AC_MSG_ERROR([cannot read $ucx_libucs to learn how the installed UCX was built])])
    UCX_ABI_CPPFLAGS="-DENABLE_PARAMS_CHECK=1 -DENABLE_DEBUG_DATA=0 -DENABLE_BUILTIN_MEMCPY=1 -DHAVE_ATTRIBUTE_NOOPTIMIZE=1"
    AC_MSG_CHECKING([whether the installed UCX has assertions enabled])
    AS_IF([grep -q "Assertion \`%s' failed" "$ucx_libucs"],
          [AC_MSG_RESULT([yes]); UCX_ABI_CPPFLAGS="$UCX_ABI_CPPFLAGS -DENABLE_ASSERT=1"],
          [AC_MSG_RESULT([no])])
    AC_MSG_CHECKING([whether the installed UCX has statistics enabled])
    AS_IF([grep -q "ucs_stats_node_alloc" "$ucx_libucs"],
          [AC_MSG_RESULT([yes]); UCX_ABI_CPPFLAGS="$UCX_ABI_CPPFLAGS -DENABLE_STATS=1"],
          [AC_MSG_RESULT([no])])
    AC_PATH_PROG([UCX_INFO], [ucx_info], [], [$PATH:`$PKG_CONFIG --variable=prefix ucx`/bin])
    ucx_log_level=UCS_LOG_LEVEL_TRACE_POLL
    AS_IF([test -n "$UCX_INFO"],
          [ucx_configured=`$UCX_INFO -v 2>/dev/null | sed -n 's/^# Configured with: //p'`
           AS_CASE([" $ucx_configured "],
                   [*" --disable-logging "*], [ucx_log_level=UCS_LOG_LEVEL_DEBUG],
                   [*" --enable-logging=warn "*], [ucx_log_level=UCS_LOG_LEVEL_WARN],
                   [*" --enable-logging=info "*], [ucx_log_level=UCS_LOG_LEVEL_INFO],
                   [*" --enable-logging=debug "*], [ucx_log_level=UCS_LOG_LEVEL_DEBUG])],
          [AC_MSG_WARN([ucx_info not found (Debian: ucx-utils); assuming UCX was built with full logging])])
    AC_MSG_CHECKING([the installed UCX's highest log level])
    AC_MSG_RESULT([$ucx_log_level])
    UCX_ABI_CPPFLAGS="$UCX_ABI_CPPFLAGS -DUCS_MAX_LOG_LEVEL=$ucx_log_level"

    SRC_UCX_INTERFACE_CHECKS

    AC_ARG_WITH([ucx-module-dir],
        AS_HELP_STRING([--with-ucx-module-dir=DIR], [where to install libuct_src.so (default: LIBDIR/ucx)]),
        [ucxmoduledir=$withval], [ucxmoduledir='${libdir}/ucx'])

    # The version the module is built for: it refuses to register in a UCX of another minor
    # version (uct_src/compat.h).
    ucx_major=`echo "$UCX_VERSION" | cut -d. -f1`
    ucx_minor=`echo "$UCX_VERSION" | cut -d. -f2`
    AC_DEFINE_UNQUOTED([UCT_SRC_UCX_MAJOR], [$ucx_major], [Major version of the UCX the module is built for])
    AC_DEFINE_UNQUOTED([UCT_SRC_UCX_MINOR], [$ucx_minor], [Minor version of the UCX the module is built for])
    AC_DEFINE_UNQUOTED([UCT_SRC_UCX_VERSION], ["$UCX_VERSION"], [Version of the UCX the module is built for])

    AC_SUBST([UCX_VERSION])
    AC_SUBST([UCX_LIBDIR])
    AC_SUBST([UCX_SRC_DIR])
    AC_SUBST([UCX_ABI_CPPFLAGS])
    AC_SUBST([UCX_UCT_LIBS])
    AC_SUBST([ucxmoduledir])
])


# SRC_UCX_FEATURE(NAME, TEST, DESCRIPTION): defines UCT_SRC_HAVE_NAME to 1 if TEST (C statements
# after UCX's internal uct/ucs headers) compiles against the UCX source tree, else to 0.
AC_DEFUN([SRC_UCX_FEATURE], [
    AC_MSG_CHECKING([UCX: $3])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <uct/base/uct_component.h>
#include <uct/api/v2/uct_v2.h>
#include <ucs/datastruct/callbackq.h>
#include <ucs/datastruct/mpool.h>
]], [[$2]])],
        [AC_MSG_RESULT([yes]); ucx_feature=1],
        [AC_MSG_RESULT([no]); ucx_feature=0])
    AC_DEFINE_UNQUOTED([UCT_SRC_HAVE_$1], [$ucx_feature], [UCX: $3])
])

# SRC_UCX_INTERFACE_CHECKS: which of UCX's internal interfaces the UCX source tree has, for
# uct_src/compat.h: each one that differs between UCX 1.13 and 1.18 and that the transport uses,
# tested by its exact type, so that a version in between gets what it has.
AC_DEFUN([SRC_UCX_INTERFACE_CHECKS], [
    AC_LANG_PUSH([C])
    ucx_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS -I$UCX_SRC_DIR/src $UCX_ABI_CPPFLAGS"
    AC_MSG_CHECKING([whether UCX's internal headers compile])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <uct/base/uct_iface.h>]], [[return 0;]])],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([UCX's internal headers in '$UCX_SRC_DIR/src' do not compile here; see config.log])])
    SRC_UCX_FEATURE([MD_QUERY_V2],
        [_Static_assert(__builtin_types_compatible_p(uct_md_query_func_t,
                             ucs_status_t (*)(uct_md_h, uct_md_attr_v2_t*)), "");],
        [md query fills uct_md_attr_v2_t])
    SRC_UCX_FEATURE([MEM_REG_PARAMS],
        [_Static_assert(__builtin_types_compatible_p(uct_md_mem_reg_func_t,
                             ucs_status_t (*)(uct_md_h, void*, size_t,
                                              const uct_md_mem_reg_params_t*, uct_mem_h*)), "");],
        [mem_reg takes uct_md_mem_reg_params_t])
    SRC_UCX_FEATURE([MKEY_PACK_ADDRESS],
        [_Static_assert(__builtin_types_compatible_p(uct_md_mkey_pack_func_t,
                             ucs_status_t (*)(uct_md_h, uct_mem_h, void*, size_t,
                                              const uct_md_mkey_pack_params_t*, void*)), "");],
        [mkey_pack takes the address and length])
    SRC_UCX_FEATURE([MD_MEM_ATTACH],
        [uct_md_ops_t ops = {.mem_attach = NULL}; (void)ops;],
        [md ops have mem_attach])
    SRC_UCX_FEATURE([MD_IS_SOCKADDR_ACCESSIBLE],
        [uct_md_ops_t ops = {.is_sockaddr_accessible = NULL}; (void)ops;],
        [md ops have is_sockaddr_accessible])
    SRC_UCX_FEATURE([MD_FLAG_INVALIDATE_RMA],
        [uint64_t f = UCT_MD_FLAG_INVALIDATE_RMA; (void)f;],
        [UCT_MD_FLAG_INVALIDATE_RMA])
    SRC_UCX_FEATURE([RKEY_COMPARE],
        [uct_component_t c = {.rkey_compare = uct_base_rkey_compare}; (void)c;],
        [components compare remote keys])
    SRC_UCX_FEATURE([IS_REACHABLE_V2],
        [uct_iface_internal_ops_t ops = {.iface_is_reachable_v2 = NULL}; (void)ops;],
        [iface_is_reachable_v2])
    SRC_UCX_FEATURE([EP_CONNECT_TO_EP_V2],
        [uct_iface_internal_ops_t ops = {.ep_connect_to_ep_v2 = NULL}; (void)ops;],
        [ep_connect_to_ep_v2])
    SRC_UCX_FEATURE([EP_IS_CONNECTED],
        [uct_iface_internal_ops_t ops = {.ep_is_connected = NULL}; (void)ops;],
        [ep_is_connected])
    SRC_UCX_FEATURE([LOCAL_IS_REACHABLE_PARAMS],
        [_Static_assert(__builtin_types_compatible_p(__typeof__(&uct_iface_local_is_reachable),
                             int (*)(uct_iface_local_addr_ns_t*, ucs_sys_namespace_type_t,
                                     const uct_iface_is_reachable_params_t*)), "");],
        [uct_iface_local_is_reachable reports why])
    SRC_UCX_FEATURE([MPOOL_PARAMS],
        [ucs_mpool_params_t p; ucs_mpool_params_reset(&p);],
        [memory pools take ucs_mpool_params_t])
    SRC_UCX_FEATURE([CALLBACKQ_ONESHOT],
        [void (*f)(ucs_callbackq_t*, ucs_callbackq_key_t, ucs_callback_t, void*) =
             ucs_callbackq_add_oneshot; (void)f;],
        [one-shot callbacks by key])
    CPPFLAGS=$ucx_save_CPPFLAGS
    AC_LANG_POP([C])
])
