// Peer failure across two processes: a child (this program re-executed, see ChildEntry) opens
// its own src iface on lo, hands its addresses and an rkey over a pipe and serves active
// messages and RMA; the parent kills it with SIGKILL while operations are outstanding. With
// UCX_SRC_PEER_TIMEOUT=1s the parent's error handler reports the ep within the bound, the
// outstanding operations complete with an error, and the ep can still be flushed with CANCEL
// and destroyed. Every wait is bounded and an alarm guards each test.
#include "uct/uct_src_fixture.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace uct_src_test {
namespace {

constexpr const char *kChildEnv = "UCT_SRC_TEST_CHILD_FD";
constexpr size_t kChildBuf = 1 << 20;
constexpr double kChildLifetime = 120.0;   // the child exits on its own after this, s

// --- the child ------------------------------------------------------------------------------

#define CHILD_CHECK(_cond) \
    do { \
        if (!(_cond)) { \
            std::fprintf(stderr, "uct_tests child: '%s' failed at %s:%d\n", #_cond, __FILE__, \
                         __LINE__); \
            _exit(3); \
        } \
    } while (0)

void write_all(int fd, const void *buf, size_t len)
{
    const auto *p = static_cast<const uint8_t *>(buf);
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        CHILD_CHECK(n > 0);
        p += n;
        len -= static_cast<size_t>(n);
    }
}

ucs_status_t child_am(void *arg, void *data, size_t length, unsigned flags)
{
    uint64_t hdr = 0;
    std::memcpy(&hdr, data, std::min(length, sizeof(hdr)));
    write_all(*static_cast<int *>(arg), &hdr, sizeof(hdr));
    return UCS_OK;
}

// Hello: [u32 dev_len][dev][u32 iface_len][iface][u64 buf][u32 rkey_len][rkey]
int child_serve(int wfd)
{
    static int fd = wfd;
    ucs_async_context_t *async;
    CHILD_CHECK(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) == UCS_OK);
    uct_worker_h worker;
    CHILD_CHECK(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker) == UCS_OK);
    uct_component_h *components, component = nullptr;
    unsigned num;
    CHILD_CHECK(uct_query_components(&components, &num) == UCS_OK);
    for (unsigned i = 0; i < num; ++i) {
        uct_component_attr_t attr{};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        CHILD_CHECK(uct_component_query(components[i], &attr) == UCS_OK);
        if (std::strcmp(attr.name, kTlName) == 0) {
            component = components[i];
        }
    }
    uct_release_component_list(components);
    CHILD_CHECK(component != nullptr);
    uct_md_config_t *md_config;
    CHILD_CHECK(uct_md_config_read(component, nullptr, nullptr, &md_config) == UCS_OK);
    uct_md_h md;
    CHILD_CHECK(uct_md_open(component, kTlName, md_config, &md) == UCS_OK);
    uct_config_release(md_config);
    uct_iface_config_t *iface_config;
    CHILD_CHECK(uct_md_iface_config_read(md, kTlName, nullptr, nullptr, &iface_config) == UCS_OK);
    uct_iface_params_t params{};
    params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name = kTlName;
    params.mode.device.dev_name = kDevName;
    uct_iface_h iface;
    CHILD_CHECK(uct_iface_open(md, worker, &params, iface_config, &iface) == UCS_OK);
    uct_config_release(iface_config);
    CHILD_CHECK(uct_iface_set_am_handler(iface, kAmId, child_am, &fd, 0) == UCS_OK);
    uct_iface_progress_enable(iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);

    uct_iface_attr_t attr;
    CHILD_CHECK(uct_iface_query(iface, &attr) == UCS_OK);
    std::vector<uint8_t> dev(attr.device_addr_len), addr(attr.iface_addr_len);
    CHILD_CHECK(uct_iface_get_device_address(iface, (uct_device_addr_t *)dev.data()) == UCS_OK);
    CHILD_CHECK(uct_iface_get_address(iface, (uct_iface_addr_t *)addr.data()) == UCS_OK);
    static std::vector<uint8_t> buf(kChildBuf);
    uct_mem_h memh;
    CHILD_CHECK(uct_md_mem_reg(md, buf.data(), buf.size(), UCT_MD_MEM_ACCESS_ALL, &memh) ==
                UCS_OK);
    uct_md_attr_t md_attr;
    CHILD_CHECK(uct_md_query(md, &md_attr) == UCS_OK);
    std::vector<uint8_t> rkey(md_attr.rkey_packed_size);
    CHILD_CHECK(uct_md_mkey_pack(md, memh, rkey.data()) == UCS_OK);

    std::vector<uint8_t> hello;
    auto put = [&](const void *p, size_t n) {
        hello.insert(hello.end(), static_cast<const uint8_t *>(p),
                     static_cast<const uint8_t *>(p) + n);
    };
    const uint32_t dev_len = static_cast<uint32_t>(dev.size());
    const uint32_t addr_len = static_cast<uint32_t>(addr.size());
    const uint32_t rkey_len = static_cast<uint32_t>(rkey.size());
    const uint64_t buf_addr = (uint64_t)(uintptr_t)buf.data();
    put(&dev_len, sizeof(dev_len));
    put(dev.data(), dev.size());
    put(&addr_len, sizeof(addr_len));
    put(addr.data(), addr.size());
    put(&buf_addr, sizeof(buf_addr));
    put(&rkey_len, sizeof(rkey_len));
    put(rkey.data(), rkey.size());
    write_all(fd, hello.data(), hello.size());

    // Serve until killed; never outlive the test.
    const double deadline = now_sec() + kChildLifetime;
    while (now_sec() < deadline && getppid() != 1) {
        uct_worker_progress(worker);
    }
    return 0;
}

// Runs the child before main() when this program was re-executed as one.
struct ChildEntry {
    ChildEntry()
    {
        const char *env = std::getenv(kChildEnv);
        if (env != nullptr) {
            _exit(child_serve(std::atoi(env)));
        }
    }
} g_child_entry;

// --- the parent -----------------------------------------------------------------------------

class UctSrcPeerProcess : public UctSrc {
protected:
    std::vector<ConfigKv> config_for(int side) const override
    {
        return {{"PEER_TIMEOUT", "1s"}};
    }

    void SetUp() override
    {
        alarm(120);   // whole-test watchdog: a hang kills the run instead of blocking it
        UctSrc::SetUp();
    }

    void TearDown() override
    {
        if (child_ > 0) {
            kill(child_, SIGKILL);
            waitpid(child_, nullptr, 0);
            child_ = -1;
        }
        if (rfd_ >= 0) {
            close(rfd_);
            rfd_ = -1;
        }
        release_rkey();
        UctSrc::TearDown();
        alarm(0);
    }

    // Re-executes this program as a child serving on lo; reads its hello.
    void spawn_child()
    {
        char exe[PATH_MAX];
        const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        ASSERT_GT(n, 0);
        exe[n] = '\0';
        int p[2];
        ASSERT_EQ(0, pipe(p));
        // Everything the child needs is prepared before fork(): after it, only exec.
        std::vector<std::string> env_strings;
        for (char **e = environ; *e != nullptr; ++e) {
            if (std::strncmp(*e, kChildEnv, std::strlen(kChildEnv)) != 0) {
                env_strings.emplace_back(*e);
            }
        }
        env_strings.push_back(std::string(kChildEnv) + "=" + std::to_string(p[1]));
        std::vector<char *> envp;
        for (std::string &s : env_strings) {
            envp.push_back(&s[0]);
        }
        envp.push_back(nullptr);
        char *argv[] = {exe, nullptr};

        child_ = fork();
        ASSERT_GE(child_, 0) << "fork: " << std::strerror(errno);
        if (child_ == 0) {
            close(p[0]);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            execve(exe, argv, envp.data());
            _exit(127);
        }
        close(p[1]);
        rfd_ = p[0];

        uint32_t len;
        ASSERT_TRUE(read_exact(&len, sizeof(len)));
        peer_.dev_addr.resize(len);
        ASSERT_TRUE(read_exact(peer_.dev_addr.data(), len));
        ASSERT_TRUE(read_exact(&len, sizeof(len)));
        peer_.iface_addr.resize(len);
        ASSERT_TRUE(read_exact(peer_.iface_addr.data(), len));
        ASSERT_TRUE(read_exact(&peer_buf_, sizeof(peer_buf_)));
        ASSERT_TRUE(read_exact(&len, sizeof(len)));
        std::vector<uint8_t> packed(len);
        ASSERT_TRUE(read_exact(packed.data(), len));
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(component_, packed.data(), &peer_rkey_));
        rkey_unpacked_ = true;
        ASSERT_TRUE(uct_iface_is_reachable(a_.iface, peer_.dev(), peer_.addr()));
    }

    // Reads exactly len bytes from the child, progressing a meanwhile (bounded).
    bool read_exact(void *buf, size_t len, double seconds = 20.0)
    {
        auto *p = static_cast<uint8_t *>(buf);
        const double deadline = now_sec() + seconds;
        while (len > 0) {
            if (now_sec() > deadline) {
                ADD_FAILURE() << "the child did not answer within " << seconds << " s";
                return false;
            }
            struct pollfd pfd = {rfd_, POLLIN, 0};
            if (poll(&pfd, 1, 1) > 0) {
                ssize_t n = read(rfd_, p, len);
                if (n <= 0) {
                    ADD_FAILURE() << "the child closed its pipe";
                    return false;
                }
                p += n;
                len -= static_cast<size_t>(n);
            }
            a_.progress();
        }
        return true;
    }

    // Proves the child serves: AMs arrive in order, RMA round-trips through its memory.
    void exercise_child(uct_ep_h ep)
    {
        for (uint64_t i = 0; i < 100; ++i) {
            ASSERT_EQ(UCS_OK, am_short(ep, i, kNoPayload, 0));
        }
        for (uint64_t i = 0; i < 100; ++i) {
            uint64_t got;
            ASSERT_TRUE(read_exact(&got, sizeof(got)));
            ASSERT_EQ(i, got);
        }
        std::vector<uint8_t> out(64 * 1024), back(64 * 1024, 0);
        fill_pattern(out.data(), out.size(), 99);
        Completion &comp = completion(2);
        uct_iov_t put_iov{out.data(), out.size(), UCT_MEM_HANDLE_NULL, 0, 1};
        ucs_status_t status;
        ASSERT_TRUE(wait_for([&] {
            status = uct_ep_put_zcopy(ep, &put_iov, 1, peer_buf_, peer_rkey_.rkey, &comp.uct);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_INPROGRESS, status);
        uct_iov_t get_iov{back.data(), back.size(), UCT_MEM_HANDLE_NULL, 0, 1};
        ASSERT_TRUE(wait_for([&] {
            status = uct_ep_get_zcopy(ep, &get_iov, 1, peer_buf_, peer_rkey_.rkey, &comp.uct);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_INPROGRESS, status);
        ASSERT_TRUE(wait_for([&] { return comp.fired > 0; }));
        ASSERT_EQ(UCS_OK, comp.status);
        ASSERT_EQ(out, back);
    }

    void stop_child()
    {
        ASSERT_EQ(0, kill(child_, SIGSTOP));
        int st;
        ASSERT_EQ(child_, waitpid(child_, &st, WUNTRACED));
        ASSERT_TRUE(WIFSTOPPED(st));
    }

    void kill_child()
    {
        ASSERT_EQ(0, kill(child_, SIGKILL));
        ASSERT_EQ(child_, waitpid(child_, nullptr, 0));
        child_ = -1;
    }

    // Waits for the error report on ep; returns its status.
    ucs_status_t wait_error(uct_ep_h ep, double *elapsed)
    {
        const double start = now_sec();
        EXPECT_TRUE(wait_for([&] { return a_.num_errors() > 0; }, 15.0))
            << "no error reported for the dead peer";
        *elapsed = now_sec() - start;
        std::lock_guard<std::mutex> guard(a_.errors_lock);
        if (a_.errors.empty()) {
            return UCS_OK;
        }
        EXPECT_EQ(1u, a_.errors.size()) << "the error must be reported once";
        EXPECT_EQ(ep, a_.errors[0].ep);
        ucs_status_t status = a_.errors[0].status;
        a_.errors.clear();
        return status;
    }

    // A failed ep stays valid: sends fail, flush(CANCEL) completes, destroy works.
    void discard_failed_ep(uct_ep_h ep)
    {
        ucs_status_t status = uct_ep_am_short(ep, kAmId, 0, kNoPayload, 0);
        EXPECT_TRUE(UCS_STATUS_IS_ERR(status) && status != UCS_ERR_NO_RESOURCE)
            << "send on a failed ep: " << ucs_status_string(status);
        Completion &comp = completion();
        status = uct_ep_flush(ep, UCT_FLUSH_FLAG_CANCEL, &comp.uct);
        if (status == UCS_INPROGRESS) {
            EXPECT_TRUE(wait_for([&] { return comp.fired > 0; }, 5.0))
                << "flush(CANCEL) of a failed ep never completed";
        } else {
            EXPECT_TRUE(status == UCS_OK || UCS_STATUS_IS_ERR(status))
                << ucs_status_string(status);
        }
        destroy_ep(ep);
    }

    void release_rkey()
    {
        if (rkey_unpacked_) {
            uct_rkey_release(component_, &peer_rkey_);
            rkey_unpacked_ = false;
        }
    }

    pid_t child_ = -1;
    int rfd_ = -1;
    Side peer_;
    uint64_t peer_buf_ = 0;
    uct_rkey_bundle_t peer_rkey_{};
    bool rkey_unpacked_ = false;
};

// What UCX's own peer-failure tests accept (CONNECTION_RESET also where, on the node agent,
// the peer's node still answers and only its QP is gone).
bool is_peer_failure(ucs_status_t status)
{
    return status == UCS_ERR_ENDPOINT_TIMEOUT || status == UCS_ERR_CONNECTION_RESET;
}

TEST_F(UctSrcPeerProcess, peer_killed__outstanding_fail_and_error_reported_in_bound)
{
    UCT_SRC_SKIP_WITH_AGENT("a stopped process's memory and receive buffers are still served, "
                            "so nothing stays outstanding to fail (tests/agent covers a process "
                            "killed mid-transfer)");
    ASSERT_NO_FATAL_FAILURE(spawn_child());
    uct_ep_h ep = create_ep(&a_, peer_);
    ASSERT_NE(nullptr, ep);
    extra_eps_.push_back(ep);
    ASSERT_NO_FATAL_FAILURE(exercise_child(ep));

    // Freeze the child, so that nothing more is acknowledged, then post operations.
    ASSERT_NO_FATAL_FAILURE(stop_child());
    std::vector<uint8_t> data(256 * 1024, 0x42), back(256 * 1024);
    std::vector<Completion> &comps = completions(10);
    for (size_t i = 0; i < comps.size(); ++i) {
        uct_iov_t iov{data.data(), (i % 3 == 0) ? 2000 : data.size(), UCT_MEM_HANDLE_NULL, 0, 1};
        uct_iov_t get_iov{back.data(), back.size(), UCT_MEM_HANDLE_NULL, 0, 1};
        ucs_status_t status;
        if (i % 3 == 0) {
            status = uct_ep_am_zcopy(ep, kAmId, nullptr, 0, &iov, 1, 0, &comps[i].uct);
        } else if (i % 3 == 1) {
            status = uct_ep_put_zcopy(ep, &iov, 1, peer_buf_, peer_rkey_.rkey, &comps[i].uct);
        } else {
            status = uct_ep_get_zcopy(ep, &get_iov, 1, peer_buf_, peer_rkey_.rkey,
                                      &comps[i].uct);
        }
        ASSERT_EQ(UCS_INPROGRESS, status) << "operation " << i;
    }
    progress_for(0.2, &a_);
    for (const Completion &c : comps) {
        ASSERT_EQ(0, c.fired) << "completed although the child is stopped";
    }

    // The failure goes to the error handler, not to UCX's log as a warning (the fixture fails
    // on one, as UCX's own UCT tests do): no ExpectErrors here.
    ASSERT_NO_FATAL_FAILURE(kill_child());
    double elapsed;
    const ucs_status_t status = wait_error(ep, &elapsed);
    EXPECT_TRUE(is_peer_failure(status)) << ucs_status_string(status);
    EXPECT_LT(elapsed, 6.0) << "UCX_SRC_PEER_TIMEOUT is 1 s";

    ASSERT_TRUE(wait_for([&] {
        for (const Completion &c : comps) {
            if (c.fired == 0) {
                return false;
            }
        }
        return true;
    }, 10.0)) << "outstanding operations on the dead peer never completed";
    for (size_t i = 0; i < comps.size(); ++i) {
        EXPECT_EQ(1, comps[i].fired);
        EXPECT_TRUE(UCS_STATUS_IS_ERR(comps[i].status))
            << "operation " << i << " completed with " << ucs_status_string(comps[i].status);
    }
    discard_failed_ep(ep);
    release_rkey();
    // The iface survives: its other endpoints work.
    ASSERT_EQ(UCS_OK, am_short(ep_ab_, 1, kNoPayload, 0));
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() == 1; }));
}

TEST_F(UctSrcPeerProcess, peer_killed__ep_check_detects_idle_peer)
{
    ASSERT_NO_FATAL_FAILURE(spawn_child());
    uct_ep_h ep = create_ep(&a_, peer_);
    ASSERT_NE(nullptr, ep);
    extra_eps_.push_back(ep);
    ASSERT_NO_FATAL_FAILURE(exercise_child(ep));
    ASSERT_NO_FATAL_FAILURE(flush_ep(ep));
    // The failure goes to the error handler, not to UCX's log as a warning (the fixture fails
    // on one, as UCX's own UCT tests do): no ExpectErrors here.
    ASSERT_NO_FATAL_FAILURE(kill_child());
    // Nothing is outstanding: only a probe can find out.
    progress_for(1.5, &a_);
    EXPECT_EQ(0u, a_.num_errors()) << "an idle ep must not fail on its own";
    ASSERT_EQ(UCS_OK, uct_ep_check(ep, 0, nullptr));
    double elapsed;
    const ucs_status_t status = wait_error(ep, &elapsed);
    EXPECT_TRUE(is_peer_failure(status)) << ucs_status_string(status);
    EXPECT_LT(elapsed, 6.0);
    discard_failed_ep(ep);
    release_rkey();
}

}  // namespace
}  // namespace uct_src_test
