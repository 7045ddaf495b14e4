/**
 * What differs between the UCX versions the transport builds against (UCX 1.13 and 1.18 are
 * the tested ones). configure tests each of UCX's internal interfaces that the transport uses
 * and that changed (m4/ucx.m4, the UCT_SRC_HAVE_* definitions in config.h); this header alone
 * looks at them, so the transport's own files have no conditional on UCX:
 *
 *  - memory domain: the query's attribute struct (uct_md_attr_t, uct_md_attr_v2_t), mem_reg's
 *    flags or parameter struct, mkey_pack's arguments, the ops that came and went
 *    (is_sockaddr_accessible, mem_attach), the invalidation flag;
 *  - component: rkey_compare;
 *  - interface: iface_is_reachable_v2 (with the reason for "unreachable" and the device scope),
 *    ep_connect_to_ep_v2, ep_is_connected, uct_iface_local_is_reachable's arguments;
 *  - UCS: memory pool parameters, one-shot progress callbacks;
 *  - the check, when the module is loaded, that the UCX it is loaded into is of the minor
 *    version it was built for.
 *
 * The transport writes each such piece once, in a form of its own (uct_src_md_caps_t,
 * uct_src_reach_query_t, ...); the adapters here give it the signature the UCX in use wants.
 */
#ifndef UCT_SRC_COMPAT_H
#define UCT_SRC_COMPAT_H

#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <ucs/datastruct/callbackq.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/debug/log.h>

#include <dlfcn.h>
#include <string.h>

#if !defined(UCT_SRC_UCX_MAJOR) || !defined(UCT_SRC_HAVE_MD_QUERY_V2)
#  error "config.h from srcucx's configure is needed (UCT_SRC_UCX_* and UCT_SRC_HAVE_*)"
#endif


/* --- memory domain ---------------------------------------------------------------------- */

/* What the md reports; the rest is UCX's default for the version. */
typedef struct uct_src_md_caps {
    uint64_t          flags;             /* UCT_MD_FLAG_* (with UCT_SRC_MD_FLAG_INVALIDATE) */
    uint64_t          reg_mem_types;
    uint64_t          access_mem_types;
    uint64_t          cache_mem_types;   /* registrations UCP may keep in its cache */
    size_t            max_reg;
    size_t            rkey_packed_size;
    ucs_linear_func_t reg_cost;
} uct_src_md_caps_t;

#if UCT_SRC_HAVE_MD_FLAG_INVALIDATE_RMA
/* Remote reads and writes stop at deregistration with invalidation; there are no atomics. */
#  define UCT_SRC_MD_FLAG_INVALIDATE UCT_MD_FLAG_INVALIDATE_RMA
#else
#  define UCT_SRC_MD_FLAG_INVALIDATE UCT_MD_FLAG_INVALIDATE
#endif

#if UCT_SRC_HAVE_MD_QUERY_V2
typedef uct_md_attr_v2_t uct_src_md_attr_t;
#  define UCT_SRC_MD_ATTR_FLAGS(_attr) ((_attr)->flags)

static inline void uct_src_md_attr_fill(uct_src_md_attr_t *attr, const uct_src_md_caps_t *caps)
{
    uct_md_base_md_query(attr);
    attr->flags            = caps->flags;
    attr->reg_mem_types    = caps->reg_mem_types;
    attr->access_mem_types = caps->access_mem_types;
    attr->cache_mem_types  = caps->cache_mem_types;
    attr->max_reg          = caps->max_reg;
    attr->rkey_packed_size = caps->rkey_packed_size;
    attr->reg_cost         = caps->reg_cost;
}
#else
typedef uct_md_attr_t uct_src_md_attr_t;
#  define UCT_SRC_MD_ATTR_FLAGS(_attr) ((_attr)->cap.flags)

static inline void uct_src_md_attr_fill(uct_src_md_attr_t *attr, const uct_src_md_caps_t *caps)
{
    attr->cap.flags            = caps->flags;
    attr->cap.reg_mem_types    = caps->reg_mem_types;
    attr->cap.alloc_mem_types  = 0;
    attr->cap.access_mem_types = caps->access_mem_types;
    attr->cap.detect_mem_types = 0;
    attr->cap.max_alloc        = 0;
    attr->cap.max_reg          = caps->max_reg;
    attr->rkey_packed_size     = caps->rkey_packed_size;
    attr->reg_cost             = caps->reg_cost;
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
}
#endif

/* UCT_SRC_MD_QUERY_FUNC(name, impl): the md's query op, impl(md, uct_src_md_caps_t*) filling
 * the capabilities. */
#define UCT_SRC_MD_QUERY_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, uct_src_md_attr_t *attr) \
    { \
        uct_src_md_caps_t caps; \
        ucs_status_t status = _impl(md, &caps); \
        if (status == UCS_OK) { \
            uct_src_md_attr_fill(attr, &caps); \
        } \
        return status; \
    }

/* UCT_SRC_MD_MEM_REG_FUNC(name, impl): mem_reg, impl(md, address, length, uint64_t flags,
 * memh_p). */
#if UCT_SRC_HAVE_MEM_REG_PARAMS
#  define UCT_SRC_MD_MEM_REG_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, void *address, size_t length, \
                              const uct_md_mem_reg_params_t *params, uct_mem_h *memh_p) \
    { \
        return _impl(md, address, length, \
                     UCT_MD_MEM_REG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0), memh_p); \
    }
#else
#  define UCT_SRC_MD_MEM_REG_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, void *address, size_t length, unsigned flags, \
                              uct_mem_h *memh_p) \
    { \
        return _impl(md, address, length, flags, memh_p); \
    }
#endif

/* UCT_SRC_MD_MKEY_PACK_FUNC(name, impl): mkey_pack, impl(md, memh, uint64_t flags, buffer)
 * with the UCT_MD_MKEY_PACK_FLAG_* of the call (0 when it gives none). */
#define UCT_SRC_MKEY_PACK_FLAGS(_params) \
    ((((_params) != NULL) && ((_params)->field_mask & UCT_MD_MKEY_PACK_FIELD_FLAGS)) ? \
     (uint64_t)(_params)->flags : 0)
#if UCT_SRC_HAVE_MKEY_PACK_ADDRESS
#  define UCT_SRC_MD_MKEY_PACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, uct_mem_h memh, void *address, size_t length, \
                              const uct_md_mkey_pack_params_t *params, void *buffer) \
    { \
        return _impl(md, memh, UCT_SRC_MKEY_PACK_FLAGS(params), buffer); \
    }
#else
#  define UCT_SRC_MD_MKEY_PACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, uct_mem_h memh, \
                              const uct_md_mkey_pack_params_t *params, void *buffer) \
    { \
        return _impl(md, memh, UCT_SRC_MKEY_PACK_FLAGS(params), buffer); \
    }
#endif

/* Invalidating deregistration (UCT_MD_MEM_DEREG_FLAG_INVALIDATE). UCX 1.18's contract, checked
 * by its md conformance test (test_md.dereg_bad_arg) where parameters are checked: the rkey must
 * have been packed with UCT_MD_MKEY_PACK_FLAG_INVALIDATE_RMA (else UCS_ERR_INVALID_PARAM), and a
 * registration for remote atomics alone cannot be invalidated by an md without
 * UCT_MD_FLAG_INVALIDATE_AMO (UCS_ERR_UNSUPPORTED). UCX 1.13 (UCT_MD_MKEY_PACK_FLAG_INVALIDATE,
 * one UCT_MD_FLAG_INVALIDATE) asks neither: UCT_SRC_DEREG_INVALIDATE_CHECKS is 0 there. */
#if UCT_SRC_HAVE_MD_FLAG_INVALIDATE_RMA
#  define UCT_SRC_MKEY_PACK_FLAG_INVALIDATE UCT_MD_MKEY_PACK_FLAG_INVALIDATE_RMA
#  define UCT_SRC_DEREG_INVALIDATE_CHECKS   ENABLE_PARAMS_CHECK
#else
#  define UCT_SRC_MKEY_PACK_FLAG_INVALIDATE UCT_MD_MKEY_PACK_FLAG_INVALIDATE
#  define UCT_SRC_DEREG_INVALIDATE_CHECKS   0
#endif

/* The md ops that only some versions have: none of them is supported. */
#if UCT_SRC_HAVE_MD_IS_SOCKADDR_ACCESSIBLE
#  define UCT_SRC_MD_OPS_SOCKADDR \
    .is_sockaddr_accessible = \
        (uct_md_is_sockaddr_accessible_func_t)ucs_empty_function_return_zero_int,
#else
#  define UCT_SRC_MD_OPS_SOCKADDR
#endif
#if UCT_SRC_HAVE_MD_MEM_ATTACH
#  define UCT_SRC_MD_OPS_ATTACH \
    .mem_attach = (uct_md_mem_attach_func_t)ucs_empty_function_return_unsupported,
#else
#  define UCT_SRC_MD_OPS_ATTACH
#endif
#define UCT_SRC_MD_OPS_VERSIONED UCT_SRC_MD_OPS_SOCKADDR UCT_SRC_MD_OPS_ATTACH

/* Remote keys are the engine's 64-bit region keys: UCX's comparison of the values is exact. */
#if UCT_SRC_HAVE_RKEY_COMPARE
#  define UCT_SRC_COMPONENT_OPS_VERSIONED .rkey_compare = uct_base_rkey_compare,
#else
#  define UCT_SRC_COMPONENT_OPS_VERSIONED
#endif


/* --- interface: reachability and connections -------------------------------------------- */

/* UCX 1.14 and later: an interface that reaches other hosts says so (UCT_IFACE_FLAG_INTER_NODE),
 * and UCP's network-only worker address (UCP_WORKER_ADDRESS_FLAG_NET_ONLY, which Open MPI 5's
 * pml/ucx gives the peers on other nodes) holds only such interfaces. UCX 1.13 has no flag. */
#ifdef UCT_IFACE_FLAG_INTER_NODE
#  define UCT_SRC_IFACE_FLAG_INTER_NODE UCT_IFACE_FLAG_INTER_NODE
#else
#  define UCT_SRC_IFACE_FLAG_INTER_NODE 0
#endif

/* A reachability question, whichever way UCX asked it. */
typedef struct uct_src_reach_query {
    const uct_device_addr_t *dev_addr;       /* NULL if not given */
    const uct_iface_addr_t  *iface_addr;     /* NULL if not given */
    size_t                  dev_addr_len;    /* 0 if not given */
    size_t                  iface_addr_len;  /* 0 if not given */
    int                     device_scope;    /* only: is it this very device? */
    char                    *info;           /* why not reachable, or NULL */
    size_t                  info_len;
} uct_src_reach_query_t;

#if UCT_SRC_HAVE_LOCAL_IS_REACHABLE_PARAMS
static inline int uct_src_local_is_reachable(uct_iface_local_addr_ns_t *addr_ns)
{
    uct_iface_is_reachable_params_t params = {.field_mask = 0};

    return uct_iface_local_is_reachable(addr_ns, UCS_SYS_NS_TYPE_NET, &params);
}
#else
static inline int uct_src_local_is_reachable(uct_iface_local_addr_ns_t *addr_ns)
{
    return uct_iface_local_is_reachable(addr_ns, UCS_SYS_NS_TYPE_NET);
}
#endif

/* UCT_SRC_IFACE_IS_REACHABLE_FUNCS(impl): uct_src_iface_is_reachable (the iface op) and, where
 * UCX has it, uct_src_iface_is_reachable_v2 (the internal op), both answered by
 * impl(iface, const uct_src_reach_query_t*). */
#if UCT_SRC_HAVE_IS_REACHABLE_V2
#  define UCT_SRC_IFACE_IS_REACHABLE_FUNCS(_impl) \
    static int uct_src_iface_is_reachable_v2(const uct_iface_h iface, \
                                             const uct_iface_is_reachable_params_t *params) \
    { \
        uct_src_reach_query_t q; \
        if (!uct_iface_is_reachable_params_valid(params, \
                                                 UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR)) { \
            return 0; \
        } \
        q.dev_addr       = params->device_addr; \
        q.iface_addr     = UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, iface_addr, \
                                           IFACE_ADDR, NULL); \
        q.dev_addr_len   = UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, \
                                           device_addr_length, DEVICE_ADDR_LENGTH, 0); \
        q.iface_addr_len = UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, \
                                           iface_addr_length, IFACE_ADDR_LENGTH, 0); \
        q.device_scope   = UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, scope, \
                                           SCOPE, UCT_IFACE_REACHABILITY_SCOPE_NETWORK) == \
                           UCT_IFACE_REACHABILITY_SCOPE_DEVICE; \
        q.info           = UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, info_string, \
                                           INFO_STRING, NULL); \
        q.info_len       = UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, \
                                           info_string_length, INFO_STRING_LENGTH, 0); \
        if (q.info_len == 0) { \
            q.info = NULL; \
        } \
        return _impl(iface, &q); \
    } \
    UCT_SRC_IFACE_IS_REACHABLE_V1(_impl)
#  define UCT_SRC_IFACE_INTERNAL_OPS_REACHABLE \
    .iface_is_reachable_v2 = uct_src_iface_is_reachable_v2,
#else
#  define UCT_SRC_IFACE_IS_REACHABLE_FUNCS(_impl) UCT_SRC_IFACE_IS_REACHABLE_V1(_impl)
#  define UCT_SRC_IFACE_INTERNAL_OPS_REACHABLE
#endif

#define UCT_SRC_IFACE_IS_REACHABLE_V1(_impl) \
    static int uct_src_iface_is_reachable(const uct_iface_h iface, \
                                          const uct_device_addr_t *dev_addr, \
                                          const uct_iface_addr_t *iface_addr) \
    { \
        uct_src_reach_query_t q = {.dev_addr = dev_addr, .iface_addr = iface_addr}; \
        return _impl(iface, &q); \
    }

/* UCT_SRC_EP_IS_CONNECTED_FUNC(impl): where UCX has it, uct_src_ep_is_connected, answered by
 * impl(ep, dev_addr, iface_addr). The transport connects to interfaces only: an endpoint
 * address in the question (a peer-to-peer lane) is never this transport's. */
#if UCT_SRC_HAVE_EP_IS_CONNECTED
#  define UCT_SRC_EP_IS_CONNECTED_FUNC(_impl) \
    static int uct_src_ep_is_connected(uct_ep_h ep, const uct_ep_is_connected_params_t *params) \
    { \
        UCT_EP_IS_CONNECTED_CHECK_DEV_IFACE_ADDRS(params); \
        if (params->field_mask & UCT_EP_IS_CONNECTED_FIELD_EP_ADDR) { \
            return 0; \
        } \
        return _impl(ep, params->device_addr, params->iface_addr); \
    }
#  define UCT_SRC_IFACE_INTERNAL_OPS_CONNECTED .ep_is_connected = uct_src_ep_is_connected,
#else
#  define UCT_SRC_EP_IS_CONNECTED_FUNC(_impl)
#  define UCT_SRC_IFACE_INTERNAL_OPS_CONNECTED
#endif

/* Endpoints connect to interfaces (UCT_IFACE_FLAG_CONNECT_TO_IFACE), never to endpoints. */
#if UCT_SRC_HAVE_EP_CONNECT_TO_EP_V2
#  define UCT_SRC_IFACE_INTERNAL_OPS_CONNECT_EP \
    .ep_connect_to_ep_v2 = (uct_ep_connect_to_ep_v2_func_t)ucs_empty_function_return_unsupported,
#else
#  define UCT_SRC_IFACE_INTERNAL_OPS_CONNECT_EP
#endif

#define UCT_SRC_IFACE_INTERNAL_OPS_VERSIONED \
    UCT_SRC_IFACE_INTERNAL_OPS_REACHABLE \
    UCT_SRC_IFACE_INTERNAL_OPS_CONNECTED \
    UCT_SRC_IFACE_INTERNAL_OPS_CONNECT_EP


/* --- UCS ------------------------------------------------------------------------------- */

/* A memory pool whose chunks all hold elems_per_chunk elements. */
static inline ucs_status_t
uct_src_mpool_init(ucs_mpool_t *mp, size_t priv_size, size_t elem_size, size_t align_offset,
                   size_t alignment, unsigned elems_per_chunk, unsigned max_elems,
                   ucs_mpool_ops_t *ops, const char *name)
{
#if UCT_SRC_HAVE_MPOOL_PARAMS
    ucs_mpool_params_t params;

    ucs_mpool_params_reset(&params);
    params.priv_size       = priv_size;
    params.elem_size       = elem_size;
    params.align_offset    = align_offset;
    params.alignment       = alignment;
    params.elems_per_chunk = elems_per_chunk;
    params.max_elems       = max_elems;
    params.grow_factor     = 1.0;
    params.ops             = ops;
    params.name            = name;
    return ucs_mpool_init(&params, mp);
#else
    return ucs_mpool_init(mp, priv_size, elem_size, align_offset, alignment, elems_per_chunk,
                          max_elems, ops, name);
#endif
}

/* A callback run once from the worker's progress, added from any thread; *id_p tells whether
 * it is scheduled (UCS_CALLBACKQ_ID_NULL: not). The callback sets *id_p to
 * UCS_CALLBACKQ_ID_NULL itself when it runs. */
#if UCT_SRC_HAVE_CALLBACKQ_ONESHOT
static inline int uct_src_oneshot_match(const ucs_callbackq_elem_t *elem, void *arg)
{
    return elem->cb == (ucs_callback_t)arg;
}

static inline void uct_src_oneshot_add(ucs_callbackq_t *cbq, void *key, ucs_callback_t cb,
                                       int16_t *id_p)
{
    ucs_callbackq_add_oneshot(cbq, key, cb, key);
    *id_p = 0;
}

static inline void uct_src_oneshot_remove(ucs_callbackq_t *cbq, void *key, ucs_callback_t cb,
                                          int16_t *id_p)
{
    ucs_callbackq_remove_oneshot(cbq, key, uct_src_oneshot_match, (void*)cb);
    *id_p = UCS_CALLBACKQ_ID_NULL;
}
#else
static inline void uct_src_oneshot_add(ucs_callbackq_t *cbq, void *key, ucs_callback_t cb,
                                       int16_t *id_p)
{
    *id_p = ucs_callbackq_add_safe(cbq, cb, key, UCS_CALLBACKQ_FLAG_ONESHOT);
}

static inline void uct_src_oneshot_remove(ucs_callbackq_t *cbq, void *key, ucs_callback_t cb,
                                          int16_t *id_p)
{
    ucs_callbackq_remove_safe(cbq, *id_p);
    *id_p = UCS_CALLBACKQ_ID_NULL;
}
#endif


/* --- the UCX the module is loaded into --------------------------------------------------- */

/* Whether the UCX this process runs is of the major and minor version the module was built
 * for: UCX's internal structs, which the module uses, change between minor versions. The
 * version is UCP's (ucp_get_version), the only part of UCX that reports one; UCT and UCS come
 * from the same build. A process without UCP (a program on UCT alone) cannot tell: the module
 * then registers, as it would have before this check. Logs why it refuses. */
static inline int uct_src_ucx_version_matches(void)
{
    typedef void (*get_version_func_t)(unsigned*, unsigned*, unsigned*);
    get_version_func_t get_version;
    unsigned major, minor, release;

    get_version = (get_version_func_t)dlsym(RTLD_DEFAULT, "ucp_get_version");
    if (get_version == NULL) {
        ucs_debug("src: no UCP in this process to tell the UCX version; assuming UCX %s, "
                  "which the module was built for", UCT_SRC_UCX_VERSION);
        return 1;
    }
    get_version(&major, &minor, &release);
    if ((major == UCT_SRC_UCX_MAJOR) && (minor == UCT_SRC_UCX_MINOR)) {
        return 1;
    }
    ucs_warn("src: the transport module was built for UCX %s but is loaded into UCX "
             "%u.%u.%u: UCX's internal interfaces differ between minor versions, so the src "
             "transport is not registered; build srcucx against UCX %u.%u (configure "
             "--with-ucx-src with its source tree)", UCT_SRC_UCX_VERSION, major, minor,
             release, major, minor);
    return 0;
}

#endif
