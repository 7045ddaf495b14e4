/* UCP wire-up time for the side-by-side comparisons (perf/compare.sh): from ucp_ep_create() on
 * the client to the first tagged message delivered at the server, the first time in fresh
 * processes (cold: the transport connects) and again with new endpoints between the same
 * workers (warm). Both processes run on one machine, in one network namespace or two, so they
 * read the same CLOCK_MONOTONIC and the server's receive time minus the client's creation time
 * is the wire-up time. The transport is chosen as usual (UCX_TLS, UCX_NET_DEVICES).
 *
 * usage: ucp_wireup -l ADDR [-p PORT] [-r ROUNDS]          server, bootstrap socket on ADDR
 *        ucp_wireup -c ADDR [-p PORT] [-r ROUNDS] [--json] client, prints the result
 * The worker address goes over a TCP socket to ADDR (loopback or a test-bed address). */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WIREUP_TAG       0x5157u
#define WIREUP_MAX_ROUND 1000

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "ucp_wireup: %s: %s\n", what, why);
    exit(1);
}

static void xfer(int fd, void *buf, size_t len, int send_it)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = send_it ? send(fd, (char*)buf + done, len - done, MSG_NOSIGNAL) :
                              recv(fd, (char*)buf + done, len - done, 0);
        if (n <= 0) {
            die("bootstrap socket", n == 0 ? "closed by peer" : "i/o error");
        }
        done += (size_t)n;
    }
}

static void wait_request(ucp_worker_h worker, void *req, const char *what)
{
    ucs_status_t status;

    if (req == NULL) {
        return;
    }
    if (UCS_PTR_IS_ERR(req)) {
        die(what, ucs_status_string(UCS_PTR_STATUS(req)));
    }
    do {
        ucp_worker_progress(worker);
        status = ucp_request_check_status(req);
    } while (status == UCS_INPROGRESS);
    ucp_request_free(req);
    if (status != UCS_OK) {
        die(what, ucs_status_string(status));
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static int bootstrap(const char *addr, int port, int server)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, lfd, tries;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port   = htons((uint16_t)port);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        die(addr, "not a numeric IPv4 address");
    }
    if (server) {
        lfd = fd;
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if ((bind(lfd, (struct sockaddr*)&sa, sizeof(sa)) != 0) || (listen(lfd, 1) != 0)) {
            die("bind/listen", addr);
        }
        fd = accept(lfd, NULL, NULL);
        close(lfd);
        if (fd < 0) {
            die("accept", addr);
        }
    } else {
        /* The server may still be starting: retry for up to 10 s. */
        for (tries = 0; connect(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0; ++tries) {
            if (tries == 1000) {
                die("connect", addr);
            }
            close(fd);
            usleep(10000);
            fd = socket(AF_INET, SOCK_STREAM, 0);
        }
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

int main(int argc, char **argv)
{
    const char *addr = NULL;
    int server = -1, port = 13400, rounds = 20, json = 0, i, fd;
    ucp_params_t params;
    ucp_worker_params_t wparams;
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_address_t *waddr;
    size_t waddr_len;
    ucs_status_t status;
    double t_round[WIREUP_MAX_ROUND], t_create[WIREUP_MAX_ROUND];

    for (i = 1; i < argc; ++i) {
        if ((!strcmp(argv[i], "-l") || !strcmp(argv[i], "-c")) && (i + 1 < argc)) {
            server = argv[i][1] == 'l';
            addr   = argv[++i];
        } else if (!strcmp(argv[i], "-p") && (i + 1 < argc)) {
            port = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-r") && (i + 1 < argc)) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            server = -1;
            break;
        }
    }
    if ((server < 0) || (rounds < 1) || (rounds > WIREUP_MAX_ROUND)) {
        fprintf(stderr, "usage: ucp_wireup -l ADDR | -c ADDR [-p PORT] [-r ROUNDS] [--json]\n");
        return 2;
    }

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG;
    status = ucp_init(&params, NULL, &context);
    if (status != UCS_OK) {
        die("ucp_init", ucs_status_string(status));
    }
    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(context, &wparams, &worker);
    if (status != UCS_OK) {
        die("ucp_worker_create", ucs_status_string(status));
    }

    fd = bootstrap(addr, port, server);
    if (server) {
        uint64_t len;
        status = ucp_worker_get_address(worker, &waddr, &waddr_len);
        if (status != UCS_OK) {
            die("ucp_worker_get_address", ucs_status_string(status));
        }
        len = waddr_len;
        xfer(fd, &len, sizeof(len), 1);
        xfer(fd, waddr, waddr_len, 1);
        ucp_worker_release_address(worker, waddr);
        for (i = 0; i < rounds; ++i) {
            ucp_request_param_t rp = {0};
            double sent, t1;
            void *req = ucp_tag_recv_nbx(worker, &sent, sizeof(sent), WIREUP_TAG, (ucp_tag_t)-1,
                                         &rp);
            wait_request(worker, req, "tag receive");
            t1 = now_us();
            xfer(fd, &t1, sizeof(t1), 1);
        }
        /* Keep progressing until the client is done closing its endpoints (closing flushes,
         * which may need this side to answer). */
        for (;;) {
            struct pollfd pfd = {fd, POLLIN, 0};
            ucp_worker_progress(worker);
            if (poll(&pfd, 1, 0) > 0) {
                char bye;
                xfer(fd, &bye, 1, 0);
                break;
            }
        }
    } else {
        uint64_t len;
        ucp_address_t *remote;
        xfer(fd, &len, sizeof(len), 0);
        remote = malloc(len);
        xfer(fd, remote, len, 0);
        for (i = 0; i < rounds; ++i) {
            ucp_ep_params_t ep_params;
            ucp_request_param_t rp = {0};
            ucp_ep_h ep;
            double t0 = now_us(), t1;
            void *req;

            memset(&ep_params, 0, sizeof(ep_params));
            ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
            ep_params.address    = remote;
            status = ucp_ep_create(worker, &ep_params, &ep);
            if (status != UCS_OK) {
                die("ucp_ep_create", ucs_status_string(status));
            }
            t_create[i] = now_us() - t0;
            req = ucp_tag_send_nbx(ep, &t0, sizeof(t0), WIREUP_TAG, &rp);
            wait_request(worker, req, "tag send");
            xfer(fd, &t1, sizeof(t1), 0);
            t_round[i] = t1 - t0;
            rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            rp.flags        = 0; /* flush, then close */
            wait_request(worker, ucp_ep_close_nbx(ep, &rp), "ep close");
        }
        {
            char bye = 0;
            xfer(fd, &bye, 1, 1);
        }
        if (rounds > 1) {
            qsort(t_round + 1, (size_t)rounds - 1, sizeof(double), cmp_double);
            qsort(t_create + 1, (size_t)rounds - 1, sizeof(double), cmp_double);
        }
        if (json) {
            printf("{\"first_us\": %.3f, \"next_us\": %.3f, \"ep_create_first_us\": %.3f, "
                   "\"ep_create_next_us\": %.3f, \"rounds\": %d}\n", t_round[0],
                   rounds > 1 ? t_round[1 + (rounds - 1) / 2] : t_round[0], t_create[0],
                   rounds > 1 ? t_create[1 + (rounds - 1) / 2] : t_create[0], rounds);
        } else {
            printf("first endpoint: %.1f us to the first message delivered (ep_create %.1f us)\n"
                   "later endpoints (median of %d): %.1f us (ep_create %.1f us)\n", t_round[0],
                   t_create[0], rounds - 1,
                   rounds > 1 ? t_round[1 + (rounds - 1) / 2] : t_round[0],
                   rounds > 1 ? t_create[1 + (rounds - 1) / 2] : t_create[0]);
        }
        free(remote);
    }
    close(fd);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    return 0;
}
