/**
 * The "src" component and memory domain: one protection domain per process whose regions every
 * src iface serves; rkeys are the engine's 64-bit region keys, checked by the target engine on
 * every remote access.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "uct_src.h"

#include <ucs/async/async.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>

#include <ifaddrs.h>
#include <string.h>


/* srcnic_status_t is handed to UCX unchanged: its values must be ucs_status_t's. */
#define UCT_SRC_CHECK_STATUS(_name, _value, _desc) \
    UCS_STATIC_ASSERT((int)SRCNIC_##_name == (int)UCS_##_name);
static void __attribute__((unused)) uct_src_check_status_values(void)
{
    SRCNIC_FOREACH_STATUS(UCT_SRC_CHECK_STATUS)
}


static ucs_config_field_t uct_src_md_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_src_md_config_t, super), UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {NULL}
};


static ucs_status_t uct_src_md_caps(uct_md_h md, uct_src_md_caps_t *caps)
{
    caps->flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY |
                             UCT_SRC_MD_FLAG_INVALIDATE;
    caps->reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    caps->access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    /* A registration stays valid as long as it is not deregistered (it pins nothing): UCP may
     * cache it (UCX 1.18's zero-copy protocols require it). */
    caps->cache_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    caps->max_reg          = ULONG_MAX;
    caps->rkey_packed_size = sizeof(uint64_t);
    /* A table insert under a lock: no pinning, no page walk (measured well under 1 us). */
    caps->reg_cost         = ucs_linear_func_make(0.3e-6, 0);
    return UCS_OK;
}

UCT_SRC_MD_QUERY_FUNC(uct_src_md_query, uct_src_md_caps)

/* Registrations of one (address, length): invalidation completes when the last is gone. */
struct uct_src_region {
    uct_src_region_key_t key;
    unsigned         refcount;
    unsigned         num_comps;
    uct_completion_t **comps;       /* invalidating deregistrations waiting for the last one */
};

KHASH_IMPL(uct_src_regions, uct_src_region_key_t, uct_src_region_t*, 1,
           uct_src_region_key_hash, uct_src_region_key_equal)

static ucs_status_t uct_src_mem_reg_impl(uct_md_h tl_md, void *address, size_t length,
                                         uint64_t flags, uct_mem_h *memh_p)
{
    uct_src_md_t *md = ucs_derived_of(tl_md, uct_src_md_t);
    srcnic_mr_t *mr;
    srcnic_status_t status;
    uct_src_mem_t *mem;
    uct_src_region_t *r;
    uct_src_region_key_t key;
    khiter_t iter;
    int ret;

    if (length == 0) {
        length = 1; /* a zero-length region still needs a valid key */
    }
    status = srcnic_pd_mr_reg(md->pd, address, length,
                              SRCNIC_ACCESS_REMOTE_READ | SRCNIC_ACCESS_REMOTE_WRITE, &mr);
    if (status != SRCNIC_OK) {
        ucs_error("src: failed to register %p length %zu: %s", address, length,
                  srcnic_status_string(status));
        return (ucs_status_t)status;
    }
    mem = ucs_malloc(sizeof(*mem), "src_mem");
    if (mem == NULL) {
        srcnic_mr_dereg(mr);
        ucs_error("src: failed to allocate a memory handle");
        return UCS_ERR_NO_MEMORY;
    }
    key.address = (uintptr_t)address;
    key.length  = length;
    pthread_mutex_lock(&md->lock);
    iter = kh_put(uct_src_regions, &md->regions, key, &ret);
    if (ret == UCS_KH_PUT_FAILED) {
        r = NULL;
    } else if (ret == UCS_KH_PUT_KEY_PRESENT) {
        r = kh_val(&md->regions, iter);
    } else {
        r = ucs_calloc(1, sizeof(*r), "src_region");
        if (r == NULL) {
            kh_del(uct_src_regions, &md->regions, iter);
        } else {
            r->key                       = key;
            kh_val(&md->regions, iter) = r;
        }
    }
    if (r == NULL) {
        pthread_mutex_unlock(&md->lock);
        ucs_free(mem);
        srcnic_mr_dereg(mr);
        ucs_error("src: failed to allocate a region record");
        return UCS_ERR_NO_MEMORY;
    }
    ++r->refcount;
    pthread_mutex_unlock(&md->lock);
    mem->mr                = mr;
    mem->region            = r;
    mem->access            = flags & UCT_MD_MEM_ACCESS_ALL;
    mem->packed_invalidate = 0;
    *memh_p                = mem;
    return UCS_OK;
}

UCT_SRC_MD_MEM_REG_FUNC(uct_src_mem_reg, uct_src_mem_reg_impl)

/* Invalidation: after the keys of a range died, waits until no engine serving this md can still
 * touch it. Each engine checks the key again before every packet that reads or writes memory;
 * holding an iface's async lock keeps its engine out of its progress (every engine call runs
 * under it), so none is between such a check and its access, and srcnic_nic_fence_memory()
 * writes what the engine collected (and, attached, waits for the agent's current pass). */
static void uct_src_md_fence(uct_src_md_t *md)
{
    uct_src_iface_t *iface;
    ucs_async_context_t *async;

    pthread_mutex_lock(&md->ifaces_lock);
    ucs_list_for_each(iface, &md->ifaces, md_elem) {
        async = iface->super.worker->async;
        if (async != NULL) {
            UCS_ASYNC_BLOCK(async);
        }
        srcnic_nic_fence_memory(iface->nic);
        if (async != NULL) {
            UCS_ASYNC_UNBLOCK(async);
        }
    }
    pthread_mutex_unlock(&md->ifaces_lock);
}

static ucs_status_t uct_src_mem_dereg(uct_md_h tl_md, const uct_md_mem_dereg_params_t *params)
{
    uct_src_md_t *md = ucs_derived_of(tl_md, uct_src_md_t);
    uct_src_mem_t *mem;
    uct_src_region_t *r;
    khiter_t iter;
    unsigned i;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 1);
    if (UCT_SRC_DEREG_INVALIDATE_CHECKS &&
        (UCT_MD_MEM_DEREG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0) &
         UCT_MD_MEM_DEREG_FLAG_INVALIDATE)) {
        /* Refused before anything changes: the registration stays as it was (compat.h). */
        mem = params->memh;
        if ((mem->access & UCT_MD_MEM_ACCESS_REMOTE_ATOMIC) &&
            !(mem->access & (UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_REMOTE_GET))) {
            ucs_debug("src: cannot invalidate a registration for remote atomics alone");
            return UCS_ERR_UNSUPPORTED;
        }
        if (!__atomic_load_n(&mem->packed_invalidate, __ATOMIC_RELAXED)) {
            ucs_debug("src: invalidating deregistration of %p: its rkey was not packed with "
                      "UCT_MD_MKEY_PACK_FLAG_INVALIDATE_RMA", params->memh);
            return UCS_ERR_INVALID_PARAM;
        }
    }

    /* The key dies at once: an access that arrives later is refused by the target engine. */
    mem = params->memh;
    r   = mem->region;
    srcnic_mr_dereg(mem->mr);
    ucs_free(mem);
    pthread_mutex_lock(&md->lock);
    if (UCT_MD_MEM_DEREG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0) &
        UCT_MD_MEM_DEREG_FLAG_INVALIDATE) {
        r->comps = ucs_realloc(r->comps, sizeof(*r->comps) * (r->num_comps + 1), "src_comps");
        r->comps[r->num_comps++] = params->comp;
    }
    if (--r->refcount == 0) {
        iter = kh_get(uct_src_regions, &md->regions, r->key);
        ucs_assert(iter != kh_end(&md->regions));
        kh_del(uct_src_regions, &md->regions, iter);
    } else {
        r = NULL;
    }
    pthread_mutex_unlock(&md->lock);
    if ((r != NULL) && (r->num_comps != 0)) {
        uct_src_md_fence(md);
    }
    if (r != NULL) {
        for (i = 0; i < r->num_comps; ++i) {
            uct_invoke_completion(r->comps[i], UCS_OK);
        }
        ucs_free(r->comps);
        ucs_free(r);
    }
    return UCS_OK;
}

static ucs_status_t uct_src_mkey_pack_impl(uct_md_h md, uct_mem_h memh, uint64_t flags,
                                           void *rkey_buffer)
{
    uct_src_mem_t *mem = memh;
    uint64_t rkey      = srcnic_mr_rkey(mem->mr);

    if (flags & UCT_SRC_MKEY_PACK_FLAG_INVALIDATE) {
        /* The key is the same either way: every key is checked at every access. */
        __atomic_store_n(&mem->packed_invalidate, 1, __ATOMIC_RELAXED);
    }
    memcpy(rkey_buffer, &rkey, sizeof(rkey)); /* UCP packs it at any alignment */
    return UCS_OK;
}

UCT_SRC_MD_MKEY_PACK_FUNC(uct_src_mkey_pack, uct_src_mkey_pack_impl)

static void uct_src_md_close(uct_md_h tl_md)
{
    uct_src_md_t *md = ucs_derived_of(tl_md, uct_src_md_t);

    uct_src_region_t *r;

    /* Ranges still registered (the user did not deregister): forget their records. */
    kh_foreach_value(&md->regions, r, {
        ucs_debug("src: memory domain closed with %p length %zu still registered",
                  (void*)r->key.address, r->key.length);
        ucs_free(r->comps);
        ucs_free(r);
    });
    kh_destroy_inplace(uct_src_regions, &md->regions);
    srcnic_pd_destroy(md->pd);
    ucs_free(md);
}

static uct_md_ops_t uct_src_md_ops = {
    .close              = uct_src_md_close,
    .query              = uct_src_md_query,
    .mem_alloc          = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free           = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_advise         = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg            = uct_src_mem_reg,
    .mem_dereg          = uct_src_mem_dereg,
    .mem_query          = (uct_md_mem_query_func_t)ucs_empty_function_return_unsupported,
    .mkey_pack          = uct_src_mkey_pack,
    .detect_memory_type = (uct_md_detect_memory_type_func_t)ucs_empty_function_return_unsupported,
    UCT_SRC_MD_OPS_VERSIONED
};

static ucs_status_t uct_src_md_open(uct_component_t *component, const char *md_name,
                                    const uct_md_config_t *config, uct_md_h *md_p)
{
    uct_src_md_t *md;
    srcnic_status_t status;

    md = ucs_calloc(1, sizeof(*md), "src_md");
    if (md == NULL) {
        ucs_error("src: failed to allocate the memory domain");
        return UCS_ERR_NO_MEMORY;
    }
    status = srcnic_pd_create(&md->pd);
    if (status != SRCNIC_OK) {
        ucs_free(md);
        return (ucs_status_t)status;
    }
    pthread_mutex_init(&md->lock, NULL);
    kh_init_inplace(uct_src_regions, &md->regions);
    pthread_mutex_init(&md->ifaces_lock, NULL);
    ucs_list_head_init(&md->ifaces);
    md->super.ops       = &uct_src_md_ops;
    md->super.component = &uct_src_component;
    *md_p               = &md->super;
    return UCS_OK;
}

static ucs_status_t uct_src_rkey_unpack(uct_component_t *component, const void *rkey_buffer,
                                        uct_rkey_t *rkey_p, void **handle_p)
{
    uint64_t rkey;

    memcpy(&rkey, rkey_buffer, sizeof(rkey));
    *rkey_p   = rkey;
    *handle_p = NULL;
    return UCS_OK;
}

ucs_status_t uct_src_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                   unsigned *num_devices_p)
{
    uct_tl_device_resource_t *devices = NULL, *tmp;
    unsigned num_devices              = 0;
    struct ifaddrs *ifaddrs, *ifa;
    unsigned i;

    if (getifaddrs(&ifaddrs) != 0) {
        ucs_error("src: getifaddrs() failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    for (ifa = ifaddrs; ifa != NULL; ifa = ifa->ifa_next) {
        if ((ifa->ifa_addr == NULL) || (ifa->ifa_addr->sa_family != AF_INET) ||
            !(ifa->ifa_flags & IFF_UP) || !(ifa->ifa_flags & IFF_RUNNING) ||
            (strlen(ifa->ifa_name) >= UCT_DEVICE_NAME_MAX)) {
            continue;
        }
        for (i = 0; i < num_devices; ++i) {
            if (!strcmp(devices[i].name, ifa->ifa_name)) {
                break; /* one device per interface, even with several addresses */
            }
        }
        if (i < num_devices) {
            continue;
        }
        tmp = ucs_realloc(devices, sizeof(*devices) * (num_devices + 1), "src_devices");
        if (tmp == NULL) {
            ucs_free(devices);
            freeifaddrs(ifaddrs);
            return UCS_ERR_NO_MEMORY;
        }
        devices = tmp;
        /* Named after the interface, as UCX's tcp names its devices: UCX_NET_DEVICES=eth0
         * selects both, and UCP's client/server flow, which resolves a socket address to an
         * interface name, finds src there. */
        ucs_strncpy_zero(devices[num_devices].name, ifa->ifa_name, sizeof(devices->name));
        devices[num_devices].type       = UCT_DEVICE_TYPE_NET;
        devices[num_devices].sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
        ++num_devices;
    }
    freeifaddrs(ifaddrs);
    *devices_p     = devices;
    *num_devices_p = num_devices;
    return UCS_OK;
}

uct_component_t uct_src_component = {
    .query_md_resources = uct_md_query_single_md_resource,
    .md_open            = uct_src_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_src_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)ucs_empty_function_return_unsupported,
    .rkey_release       = (uct_component_rkey_release_func_t)ucs_empty_function_return_success,
    UCT_SRC_COMPONENT_OPS_VERSIONED
    .name               = UCT_SRC_NAME,
    .md_config          = {
        .name           = "SRC memory domain",
        .prefix         = UCT_SRC_CONFIG_PREFIX,
        .table          = uct_src_md_config_table,
        .size           = sizeof(uct_src_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_src_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function
};
