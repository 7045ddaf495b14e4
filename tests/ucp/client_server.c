/*
 * A UCP client/server program that connects by socket address (a listener and ucp_ep_create()
 * with a socket address, as UCX-Py, Dask or Spark's shuffle do), for tests/ucp/client_server.sh
 * and tests/cluster/netns_mpi.sh.
 *
 *   client_server server IP CLIENTS         listens on IP (port printed as "port N"), serves
 *                                           CLIENTS connections, then closes its listener
 *                                           ("listener closed") and exits 0 once every client
 *                                           that said goodbye did; a client that goes away
 *                                           without one is noted and dropped
 *   client_server client IP PORT ID ROUNDS [--leave] [--lanes]
 *                                           ROUNDS rounds of a tag message, a stream message
 *                                           and an active message, each echoed by the server
 *                                           and its bytes checked; --leave: close the endpoint
 *                                           after the first round without saying goodbye;
 *                                           --lanes: print the endpoint's lanes
 *                                           (ucp_ep_print_info) after the first round
 *
 * Every wait is bounded (SRC_CS_TIMEOUT seconds, default 60): a hang is a failure with a
 * message, never a stuck test. Exit status: 0 passed, 1 failed, 2 could not connect.
 */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AM_ECHO      1u        /* client -> server, echoed back with AM_REPLY */
#define AM_REPLY     2u
#define AM_BYE       3u        /* client -> server: done */
#define MAX_CLIENTS  64
#define MAX_PENDING  256
#define REPLY_BIT    (1ull << 63)   /* tag of the server's echo of a tag message */

static double g_deadline;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, ucs_status_t status)
{
    fprintf(stderr, "FAIL: %s: %s\n", what, ucs_status_string(status));
    exit(1);
}

static void check_time(const char *what)
{
    if (now_s() > g_deadline) {
        fprintf(stderr, "FAIL: timed out %s\n", what);
        exit(1);
    }
}

/* Message bytes of round r of client id: sizes cross UCP's eager, bcopy and rendezvous ranges. */
static size_t msg_size(unsigned r)
{
    static const size_t sizes[] = {8, 1000, 9000, 70000, 300000};

    return sizes[r % (sizeof(sizes) / sizeof(sizes[0]))];
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    size_t i;

    for (i = 0; i < n; ++i) {
        p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
    }
}

static int same(const uint8_t *p, size_t n, uint64_t seed)
{
    size_t i;

    for (i = 0; i < n; ++i) {
        if (p[i] != (uint8_t)(seed * 131 + i * 7 + (i >> 8))) {
            return 0;
        }
    }
    return 1;
}

/* Waits for a request (NULL: completed at once). */
static ucs_status_t wait_req(ucp_worker_h worker, void *req, const char *what)
{
    ucs_status_t status;

    if (req == NULL) {
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
        check_time(what);
    }
    ucp_request_free(req);
    return status;
}

static ucs_status_t init_ucp(ucp_context_h *ctx, ucp_worker_h *worker)
{
    ucp_params_t params;
    ucp_worker_params_t wparams;
    ucs_status_t status;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG | UCP_FEATURE_STREAM | UCP_FEATURE_AM;
    status = ucp_init(&params, NULL, ctx);
    if (status != UCS_OK) {
        return status;
    }
    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    return ucp_worker_create(*ctx, &wparams, worker);
}

static void make_addr(const char *ip, uint16_t port, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port   = htons(port);
    if (inet_pton(AF_INET, ip, &sa->sin_addr) != 1) {
        fprintf(stderr, "FAIL: '%s' is not an IPv4 address\n", ip);
        exit(1);
    }
}

static void flag_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    *(ucs_status_t*)arg = status;
}

/* ------------------------------------------------------------------ server */

typedef struct {
    ucp_ep_h      ep;
    ucs_status_t  error;        /* set by the error handler */
    uint64_t      id;           /* from its first stream message; 0 until known */
    uint64_t      id_buf;
    void         *id_req;       /* stream receive of the id */
    int           bye;
    int           gone;         /* closed (error or goodbye) */
    uint8_t      *stream_buf;   /* the stream echo in progress */
    size_t        stream_len;
    size_t        stream_got;
    void         *stream_req;
} client_t;

typedef struct {
    uint64_t  tag;              /* tag message: its tag (id << 32 | round); 0 for AM */
    ucp_ep_h  ep;               /* AM: where to echo */
    uint8_t  *data;
    size_t    len;
    void     *desc;             /* AM rendezvous: its data, still to fetch */
} pending_t;

static struct {
    ucp_worker_h worker;
    client_t     clients[MAX_CLIENTS];
    unsigned     accepted;
    pending_t    pending[MAX_PENDING];
    unsigned     num_pending;
    unsigned     byes;
} srv;

static void server_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    client_t *c = arg;

    (void)ep;
    c->error = status;
}

static void server_conn(ucp_conn_request_h req, void *arg)
{
    ucp_ep_params_t params;
    client_t *c;
    ucs_status_t status;

    (void)arg;
    if (srv.accepted == MAX_CLIENTS) {
        ucp_listener_reject(NULL, req);
        return;
    }
    c = &srv.clients[srv.accepted];
    memset(c, 0, sizeof(*c));
    memset(&params, 0, sizeof(params));
    params.field_mask      = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                             UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    params.conn_request    = req;
    params.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb  = server_ep_error;
    params.err_handler.arg = c;
    status = ucp_ep_create(srv.worker, &params, &c->ep);
    if (status != UCS_OK) {
        die("server ucp_ep_create", status);
    }
    ++srv.accepted;
}

static void queue(uint64_t tag, ucp_ep_h ep, const void *data, size_t len)
{
    pending_t *p;

    if (srv.num_pending == MAX_PENDING) {
        fprintf(stderr, "FAIL: server: more than %d echoes pending\n", MAX_PENDING);
        exit(1);
    }
    p       = &srv.pending[srv.num_pending++];
    p->tag  = tag;
    p->ep   = ep;
    p->len  = len;
    p->desc = NULL;
    p->data = malloc(len ? len : 1);
    if (data != NULL) {
        memcpy(p->data, data, len);
    }
}

static ucs_status_t server_am(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param)
{
    (void)header; (void)header_length;
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) {
        fprintf(stderr, "FAIL: server: an active message without its reply endpoint\n");
        exit(1);
    }
    if ((uintptr_t)arg == AM_BYE) {
        unsigned i;

        for (i = 0; i < srv.accepted; ++i) {
            if (!srv.clients[i].gone && (srv.clients[i].ep == param->reply_ep)) {
                srv.clients[i].bye = 1;
                ++srv.byes;
            }
        }
        return UCS_OK;
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        queue(0, param->reply_ep, data, length);
        return UCS_OK;
    }
    /* A rendezvous message: its data is fetched from the main loop (no progress in here). */
    queue(0, param->reply_ep, NULL, length);
    srv.pending[srv.num_pending - 1].desc = data;
    return UCS_INPROGRESS;
}

static ucp_ep_h ep_of(uint64_t id)
{
    unsigned i;

    for (i = 0; i < srv.accepted; ++i) {
        if (srv.clients[i].id == id && !srv.clients[i].gone) {
            return srv.clients[i].ep;
        }
    }
    return NULL;
}

/* Sends what can be echoed now; a failed send to a client that went away is dropped. */
static void server_send_pending(void)
{
    ucp_request_param_t rp;
    unsigned i = 0;
    ucp_ep_h ep;
    void *req;

    while (i < srv.num_pending) {
        pending_t *p = &srv.pending[i];

        ep = p->tag ? ep_of(p->tag >> 32) : p->ep;
        if (ep == NULL) {
            ++i;   /* the client's id is not known yet (its stream message is on the way) */
            continue;
        }
        memset(&rp, 0, sizeof(rp));
        if (p->desc != NULL) {
            req = ucp_am_recv_data_nbx(srv.worker, p->desc, p->data, p->len, &rp);
            p->desc = NULL;
            if (wait_req(srv.worker, req, "fetching an active message") != UCS_OK) {
                die("server ucp_am_recv_data_nbx", UCS_ERR_IO_ERROR);
            }
        }
        if (p->tag) {
            req = ucp_tag_send_nbx(ep, p->data, p->len, p->tag | REPLY_BIT, &rp);
        } else {
            rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            rp.flags        = UCP_AM_SEND_FLAG_REPLY;
            req = ucp_am_send_nbx(ep, AM_REPLY, NULL, 0, p->data, p->len, &rp);
        }
        if (wait_req(srv.worker, req, "echoing") != UCS_OK) {
            fprintf(stderr, "server: an echo failed (its client went away)\n");
        }
        free(p->data);
        srv.pending[i] = srv.pending[--srv.num_pending];
    }
}

/* Closes c's endpoint and gives back its receives (completed by the close). */
static void client_drop(client_t *c)
{
    ucp_request_param_t rp;

    c->gone = 1;
    memset(&rp, 0, sizeof(rp));
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    wait_req(srv.worker, ucp_ep_close_nbx(c->ep, &rp), "closing an endpoint");
    if ((c->id_req != NULL) && !UCS_PTR_IS_ERR(c->id_req)) {
        ucp_request_free(c->id_req);
    }
    if ((c->stream_req != NULL) && !UCS_PTR_IS_ERR(c->stream_req)) {
        ucp_request_free(c->stream_req);
    }
    c->id_req = c->stream_req = NULL;
}

static void server_streams(void)
{
    ucp_request_param_t rp;
    unsigned i;
    size_t len;
    void *req;

    for (i = 0; i < srv.accepted; ++i) {
        client_t *c = &srv.clients[i];

        if (c->gone) {
            continue;
        }
        if (c->error != UCS_OK) {
            /* Went away without its goodbye (or after it): forget it. */
            if (!c->bye) {
                printf("server: client %llu went away: %s\n", (unsigned long long)c->id,
                       ucs_status_string(c->error));
            }
            client_drop(c);
            continue;
        }
        memset(&rp, 0, sizeof(rp));
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags        = UCP_STREAM_RECV_FLAG_WAITALL;
        if (c->id == 0) {
            if (c->id_req == NULL) {
                c->id_req = ucp_stream_recv_nbx(c->ep, &c->id_buf, sizeof(c->id_buf), &len, &rp);
                if (c->id_req == NULL) {
                    c->id = c->id_buf;
                }
            } else if (!UCS_PTR_IS_ERR(c->id_req) &&
                       ucp_request_check_status(c->id_req) == UCS_OK) {
                ucp_request_free(c->id_req);
                c->id_req = NULL;
                c->id     = c->id_buf;
            }
            continue;
        }
        /* Stream echo: a length word, then that many bytes, returned as they came. */
        if (c->stream_buf == NULL) {
            if (c->stream_req == NULL) {
                c->stream_req = ucp_stream_recv_nbx(c->ep, &c->stream_len, sizeof(c->stream_len),
                                                    &len, &rp);
                if (c->stream_req != NULL) {
                    continue;
                }
            } else if (UCS_PTR_IS_ERR(c->stream_req) ||
                       ucp_request_check_status(c->stream_req) != UCS_OK) {
                continue;
            } else {
                ucp_request_free(c->stream_req);
            }
            c->stream_req = NULL;
            c->stream_buf = malloc(c->stream_len + sizeof(c->stream_len));
            memcpy(c->stream_buf, &c->stream_len, sizeof(c->stream_len));
            req = ucp_stream_recv_nbx(c->ep, c->stream_buf + sizeof(c->stream_len), c->stream_len,
                                      &len, &rp);
            if (wait_req(srv.worker, req, "receiving a stream message") != UCS_OK) {
                continue;   /* the error handler reports it */
            }
            memset(&rp, 0, sizeof(rp));
            req = ucp_stream_send_nbx(c->ep, c->stream_buf, c->stream_len + sizeof(c->stream_len),
                                      &rp);
            wait_req(srv.worker, req, "echoing a stream message");
            free(c->stream_buf);
            c->stream_buf = NULL;
        }
    }
}

static int run_server(const char *ip, unsigned clients)
{
    ucp_context_h ctx;
    ucp_listener_params_t lparams;
    ucp_listener_attr_t lattr;
    ucp_am_handler_param_t ap;
    ucp_listener_h listener;
    struct sockaddr_in sa;
    ucp_tag_recv_info_t info;
    ucp_request_param_t rp;
    uint8_t *buf = malloc(1 << 20);
    unsigned done, i;
    void *treq = NULL;
    ucs_status_t status;

    status = init_ucp(&ctx, &srv.worker);
    if (status != UCS_OK) {
        die("server init", status);
    }
    memset(&ap, 0, sizeof(ap));
    ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    ap.cb = server_am;
    ap.id = AM_ECHO;
    ap.arg = (void*)(uintptr_t)AM_ECHO;
    ucp_worker_set_am_recv_handler(srv.worker, &ap);
    ap.id = AM_BYE;
    ap.arg = (void*)(uintptr_t)AM_BYE;
    ucp_worker_set_am_recv_handler(srv.worker, &ap);

    make_addr(ip, 0, &sa);
    memset(&lparams, 0, sizeof(lparams));
    lparams.field_mask         = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                                 UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lparams.sockaddr.addr      = (struct sockaddr*)&sa;
    lparams.sockaddr.addrlen   = sizeof(sa);
    lparams.conn_handler.cb    = server_conn;
    status = ucp_listener_create(srv.worker, &lparams, &listener);
    if (status != UCS_OK) {
        die("ucp_listener_create", status);
    }
    lattr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    status = ucp_listener_query(listener, &lattr);
    if (status != UCS_OK) {
        die("ucp_listener_query", status);
    }
    printf("port %u\n", ntohs(((struct sockaddr_in*)&lattr.sockaddr)->sin_port));
    fflush(stdout);

    for (;;) {
        ucp_worker_progress(srv.worker);
        check_time("serving");
        if (listener != NULL && srv.accepted == clients) {
            ucp_listener_destroy(listener);
            listener = NULL;
            printf("listener closed\n");
            fflush(stdout);
        }
        /* Tag messages from any client: echoed to the client their tag names. Always as a
         * request, whose test gives the sender's tag (UCX 1.13 fills no recv_info). */
        memset(&rp, 0, sizeof(rp));
        rp.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        if (treq == NULL) {
            treq = ucp_tag_recv_nbx(srv.worker, buf, 1 << 20, 0, REPLY_BIT, &rp);
            if (UCS_PTR_IS_ERR(treq)) {
                die("server tag receive", UCS_PTR_STATUS(treq));
            }
        } else if ((status = ucp_tag_recv_request_test(treq, &info)) != UCS_INPROGRESS) {
            ucp_request_free(treq);
            treq = NULL;
            if (status != UCS_OK) {
                die("server tag receive", status);
            }
            queue(info.sender_tag, NULL, buf, info.length);
        }
        server_streams();
        server_send_pending();
        /* Done once every client said goodbye or went away, and every echo went out. */
        done = 0;
        for (i = 0; i < srv.accepted; ++i) {
            done += srv.clients[i].bye || srv.clients[i].gone;
        }
        if ((listener == NULL) && (done == clients) && (srv.num_pending == 0)) {
            break;
        }
    }
    printf("server: %u clients, %u said goodbye\n", srv.accepted, srv.byes);
    if (treq != NULL) {
        ucp_request_cancel(srv.worker, treq);
        wait_req(srv.worker, treq, "cancelling the tag receive");
    }
    for (i = 0; i < srv.accepted; ++i) {
        if (!srv.clients[i].gone) {
            client_drop(&srv.clients[i]);
        }
    }
    free(buf);
    ucp_worker_destroy(srv.worker);
    ucp_cleanup(ctx);
    return 0;
}

/* ------------------------------------------------------------------ client */

static struct {
    uint8_t *data;
    size_t   len;
    int      got;
} reply;

static ucs_status_t client_am(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param)
{
    (void)arg; (void)header; (void)header_length;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        reply.data = data;   /* a descriptor: fetched by the main loop */
        reply.len  = length;
        reply.got  = 2;
        return UCS_INPROGRESS;
    }
    reply.data = malloc(length ? length : 1);
    memcpy(reply.data, data, length);
    reply.len = length;
    reply.got = 1;
    return UCS_OK;
}

static int run_client(const char *ip, unsigned port, uint64_t id, unsigned rounds, int leave,
                      int lanes)
{
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_ep_params_t params;
    ucp_am_handler_param_t ap;
    ucp_request_param_t rp;
    ucs_status_t ep_status = UCS_OK;
    struct sockaddr_in sa;
    ucp_ep_h ep;
    uint8_t *out, *in;
    size_t len, got;
    unsigned r;
    void *req;
    ucs_status_t status;

    status = init_ucp(&ctx, &worker);
    if (status != UCS_OK) {
        die("client init", status);
    }
    memset(&ap, 0, sizeof(ap));
    ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
    ap.id = AM_REPLY;
    ap.cb = client_am;
    ucp_worker_set_am_recv_handler(worker, &ap);

    make_addr(ip, (uint16_t)port, &sa);
    memset(&params, 0, sizeof(params));
    params.field_mask       = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                              UCP_EP_PARAM_FIELD_ERR_HANDLER |
                              UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    params.flags            = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr    = (struct sockaddr*)&sa;
    params.sockaddr.addrlen = sizeof(sa);
    params.err_mode         = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb   = flag_cb;
    params.err_handler.arg  = &ep_status;
    status = ucp_ep_create(worker, &params, &ep);
    if (status != UCS_OK) {
        fprintf(stderr, "client %llu: could not connect: %s\n", (unsigned long long)id,
                ucs_status_string(status));
        return 2;
    }
    /* The id first, on the stream: the server echoes tag messages to the client it names. */
    memset(&rp, 0, sizeof(rp));
    status = wait_req(worker, ucp_stream_send_nbx(ep, &id, sizeof(id), &rp), "sending the id");
    if ((status != UCS_OK) || (ep_status != UCS_OK)) {
        fprintf(stderr, "client %llu: could not connect: %s\n", (unsigned long long)id,
                ucs_status_string(status != UCS_OK ? status : ep_status));
        return 2;
    }
    out = malloc(1 << 20);
    in  = malloc(1 << 20);
    for (r = 0; r < rounds; ++r) {
        const uint64_t tag  = id << 32 | r;
        const uint64_t seed = id * 1000 + r;

        len = msg_size(r);
        /* Tag: out, then the echo under the reply tag. */
        fill(out, len, seed);
        memset(&rp, 0, sizeof(rp));
        req = ucp_tag_recv_nbx(worker, in, len, tag | REPLY_BIT, UINT64_MAX, &rp);
        memset(&rp, 0, sizeof(rp));
        status = wait_req(worker, ucp_tag_send_nbx(ep, out, len, tag, &rp), "sending a tag message");
        if ((status != UCS_OK) || (wait_req(worker, req, "the tag echo") != UCS_OK) ||
            !same(in, len, seed)) {
            fprintf(stderr, "FAIL: client %llu round %u: tag message of %zu bytes: %s\n",
                    (unsigned long long)id, r, len, ucs_status_string(status));
            return 1;
        }
        /* Stream: a length word and the bytes; the echo comes back whole. */
        fill(out + sizeof(len), len, seed + 1);
        memcpy(out, &len, sizeof(len));
        memset(&rp, 0, sizeof(rp));
        status = wait_req(worker, ucp_stream_send_nbx(ep, out, len + sizeof(len), &rp),
                          "sending a stream message");
        memset(&rp, 0, sizeof(rp));
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags        = UCP_STREAM_RECV_FLAG_WAITALL;
        req = ucp_stream_recv_nbx(ep, in, len + sizeof(len), &got, &rp);
        if ((status != UCS_OK) || (wait_req(worker, req, "the stream echo") != UCS_OK) ||
            memcmp(in, &len, sizeof(len)) || !same(in + sizeof(len), len, seed + 1)) {
            fprintf(stderr, "FAIL: client %llu round %u: stream message of %zu bytes\n",
                    (unsigned long long)id, r, len);
            return 1;
        }
        /* Active message, echoed as one. */
        fill(out, len, seed + 2);
        reply.got = 0;
        memset(&rp, 0, sizeof(rp));
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags        = UCP_AM_SEND_FLAG_REPLY;
        status = wait_req(worker, ucp_am_send_nbx(ep, AM_ECHO, NULL, 0, out, len, &rp),
                          "sending an active message");
        while ((status == UCS_OK) && !reply.got && (ep_status == UCS_OK)) {
            ucp_worker_progress(worker);
            check_time("waiting for the active message echo");
        }
        if (reply.got == 2) {
            uint8_t *buf = malloc(reply.len);

            memset(&rp, 0, sizeof(rp));
            status = wait_req(worker, ucp_am_recv_data_nbx(worker, reply.data, buf, reply.len,
                                                           &rp), "fetching the echo");
            reply.data = buf;
        }
        if ((status != UCS_OK) || !reply.got || (reply.len != len) ||
            !same(reply.data, len, seed + 2)) {
            fprintf(stderr, "FAIL: client %llu round %u: active message of %zu bytes: %s\n",
                    (unsigned long long)id, r, len,
                    ucs_status_string(status != UCS_OK ? status : ep_status));
            return 1;
        }
        free(reply.data);
        if (r == 0 && lanes) {
            ucp_ep_print_info(ep, stdout);
            fflush(stdout);
        }
        if (r == 0 && leave) {
            break;
        }
    }
    if (!leave) {
        memset(&rp, 0, sizeof(rp));
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags        = UCP_AM_SEND_FLAG_REPLY;
        status = wait_req(worker, ucp_am_send_nbx(ep, AM_BYE, NULL, 0, NULL, 0, &rp),
                          "saying goodbye");
        if (status != UCS_OK) {
            die("goodbye", status);
        }
        /* Flush before the close, so that the goodbye is there before the endpoint goes. */
        memset(&rp, 0, sizeof(rp));
        wait_req(worker, ucp_ep_flush_nbx(ep, &rp), "flushing");
    }
    memset(&rp, 0, sizeof(rp));
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags        = leave ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    wait_req(worker, ucp_ep_close_nbx(ep, &rp), "closing");
    printf("client %llu: %u rounds passed%s\n", (unsigned long long)id, leave ? 1 : rounds,
           leave ? ", left without a goodbye" : "");
    free(out);
    free(in);
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    const char *t = getenv("SRC_CS_TIMEOUT");
    int i, leave = 0, lanes = 0;

    g_deadline = now_s() + (t ? atof(t) : 60.0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((argc == 4) && !strcmp(argv[1], "server")) {
        return run_server(argv[2], (unsigned)atoi(argv[3]));
    }
    if ((argc >= 6) && !strcmp(argv[1], "client")) {
        for (i = 6; i < argc; ++i) {
            leave |= !strcmp(argv[i], "--leave");
            lanes |= !strcmp(argv[i], "--lanes");
        }
        return run_client(argv[2], (unsigned)atoi(argv[3]), strtoull(argv[4], NULL, 10),
                          (unsigned)atoi(argv[5]), leave, lanes);
    }
    fprintf(stderr, "usage: %s server IP CLIENTS | client IP PORT ID ROUNDS [--leave] [--lanes]\n",
            argv[0]);
    return 1;
}
