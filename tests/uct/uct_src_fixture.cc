// The UCT test fixture (uct_src_fixture.h): opening and closing the src MD and interfaces,
// bounded waits, and the recording AM and error handlers.
#include "uct/uct_src_fixture.h"

#include "uct/src_internal.h"

#include <ucs/debug/log_def.h>

#include <chrono>
#include <climits>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace uct_src_test {

double now_sec()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

uint32_t test_seed()
{
    const char *env = std::getenv("UCT_SRC_TEST_SEED");
    const uint32_t seed = (env != nullptr) ? static_cast<uint32_t>(std::strtoul(env, nullptr, 0))
                                           : std::random_device{}();
    std::printf("[ SEED     ] %u (replay with UCT_SRC_TEST_SEED=%u)\n", seed, seed);
    ::testing::Test::RecordProperty("seed", std::to_string(seed));
    return seed;
}

void fill_pattern(void *buf, size_t length, uint32_t seed)
{
    auto *p = static_cast<uint8_t *>(buf);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < length; ++i) {
        x = x * 1103515245u + 12345u;
        p[i] = static_cast<uint8_t>((x >> 16) ^ i);
    }
}

// --- LogCapture ----------------------------------------------------------------------------

namespace {

std::mutex g_log_lock;
std::vector<std::string> g_unexpected;
size_t g_expected_count = 0;
int g_expect_depth = 0;

ucs_log_func_rc_t log_handler(const char *file, unsigned line, const char *function,
                              ucs_log_level_t level, const ucs_log_component_config_t *comp_conf,
                              const char *message, va_list ap)
{
    if (level > UCS_LOG_LEVEL_WARN) {
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
    char text[512];
    va_list copy;
    va_copy(copy, ap);
    std::vsnprintf(text, sizeof(text), message, copy);
    va_end(copy);
    std::lock_guard<std::mutex> guard(g_log_lock);
    if (g_expect_depth > 0) {
        ++g_expected_count;
        return UCS_LOG_FUNC_RC_STOP;
    }
    g_unexpected.push_back(std::string(ucs_log_level_names[level]) + " " + file + ":" +
                           std::to_string(line) + " " + text);
    return UCS_LOG_FUNC_RC_CONTINUE;
}

}  // namespace

void LogCapture::install()
{
    ucs_log_push_handler(log_handler);
}

void LogCapture::uninstall()
{
    ucs_log_pop_handler();
}

LogCapture::ExpectErrors::ExpectErrors()
{
    std::lock_guard<std::mutex> guard(g_log_lock);
    if (g_expect_depth++ == 0) {
        g_expected_count = 0;
    }
}

LogCapture::ExpectErrors::~ExpectErrors()
{
    std::lock_guard<std::mutex> guard(g_log_lock);
    --g_expect_depth;
}

size_t LogCapture::ExpectErrors::count() const
{
    std::lock_guard<std::mutex> guard(g_log_lock);
    return g_expected_count;
}

std::vector<std::string> LogCapture::take_unexpected()
{
    std::lock_guard<std::mutex> guard(g_log_lock);
    std::vector<std::string> v;
    v.swap(g_unexpected);
    return v;
}

// --- Completion ----------------------------------------------------------------------------

static void completion_cb(uct_completion_t *self)
{
    auto *c = reinterpret_cast<Completion *>(self);
    ++c->fired;
    c->status = self->status;
}

Completion::Completion(int count)
{
    reset(count);
}

void Completion::reset(int count)
{
    uct.func = completion_cb;
    uct.count = count;
    uct.status = UCS_OK;
    fired = 0;
    status = UCS_OK;
}

size_t Side::num_errors()
{
    std::lock_guard<std::mutex> guard(errors_lock);
    return errors.size();
}

// --- UctSrc --------------------------------------------------------------------------------

ucs_status_t UctSrc::record_am(void *arg, void *data, size_t length, unsigned flags)
{
    auto *side = static_cast<Side *>(arg);
    const auto *p = static_cast<const uint8_t *>(data);
    side->rx.push_back(AmRecord{kAmId, std::vector<uint8_t>(p, p + length), flags});
    return UCS_OK;
}

ucs_status_t UctSrc::record_error(void *arg, uct_ep_h ep, ucs_status_t status)
{
    auto *side = static_cast<Side *>(arg);
    std::lock_guard<std::mutex> guard(side->errors_lock);
    side->errors.push_back(EpError{ep, status});
    return UCS_OK;
}

void UctSrc::SetUp()
{
    LogCapture::install();

    uct_component_h *components;
    unsigned num_components;
    ASSERT_EQ(UCS_OK, uct_query_components(&components, &num_components));
    for (unsigned i = 0; i < num_components; ++i) {
        uct_component_attr_t attr{};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        ASSERT_EQ(UCS_OK, uct_component_query(components[i], &attr));
        if (std::strcmp(attr.name, kTlName) == 0) {
            component_ = components[i];
        }
    }
    uct_release_component_list(components);
    ASSERT_NE(nullptr, component_) << "component \"src\" is not registered: the module's "
                                      "constructor did not run (is the test linked with it?)";

    uct_md_config_t *md_config;
    ASSERT_EQ(UCS_OK, uct_md_config_read(component_, nullptr, nullptr, &md_config));
    ucs_status_t sa = uct_md_open(component_, kTlName, md_config, &md_a_);
    ucs_status_t sb = uct_md_open(component_, kTlName, md_config, &md_b_);
    uct_config_release(md_config);
    ASSERT_EQ(UCS_OK, sa);
    ASSERT_EQ(UCS_OK, sb);

    a_.name = "a";
    b_.name = "b";
    ASSERT_NO_FATAL_FAILURE(open_side(&a_, md_a_, config_for(0)));
    ASSERT_NO_FATAL_FAILURE(open_side(&b_, md_b_, config_for(1)));
    for (int side : {0, 1}) {
        if (quiet(side)) {
            uct_src_test_stop_async_progress((side == 0) ? a_.iface : b_.iface);
        }
    }
    ep_ab_ = create_ep(&a_, b_);
    ep_ba_ = create_ep(&b_, a_);
    ASSERT_NE(nullptr, ep_ab_);
    ASSERT_NE(nullptr, ep_ba_);
}

bool UctSrc::agent_mode() const
{
    return a_.iface != nullptr && uct_src_test_attached(a_.iface);
}

void UctSrc::open_side(Side *side, uct_md_h md, const std::vector<ConfigKv> &config)
{
    side->md = md;
    ASSERT_EQ(UCS_OK, ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &side->async));
    ASSERT_EQ(UCS_OK, uct_worker_create(side->async, UCS_THREAD_MODE_SINGLE, &side->worker));

    uct_iface_config_t *iface_config;
    ASSERT_EQ(UCS_OK, uct_md_iface_config_read(md, kTlName, nullptr, nullptr, &iface_config));
    for (const ConfigKv &kv : config) {
        // UCX 1.13 takes the bare name; later versions want it with the transport's prefix.
        ucs_status_t status = uct_config_modify(iface_config, kv.first.c_str(), kv.second.c_str());
        if (status == UCS_ERR_NO_ELEM) {
            status = uct_config_modify(iface_config, ("SRC_" + kv.first).c_str(),
                                       kv.second.c_str());
        }
        ASSERT_EQ(UCS_OK, status) << kv.first << "=" << kv.second;
    }

    uct_iface_params_t params{};
    params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                        UCT_IFACE_PARAM_FIELD_RX_HEADROOM |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name = kTlName;
    params.mode.device.dev_name = kDevName;
    params.rx_headroom = kRxHeadroom;
    params.err_handler = record_error;
    params.err_handler_arg = side;
    params.err_handler_flags = 0;
    ucs_status_t status = uct_iface_open(md, side->worker, &params, iface_config, &side->iface);
    uct_config_release(iface_config);
    ASSERT_EQ(UCS_OK, status) << "cannot open " << kTlName << "/" << kDevName;

    ASSERT_EQ(UCS_OK, uct_iface_query(side->iface, &side->attr));
    side->dev_addr.resize(side->attr.device_addr_len);
    side->iface_addr.resize(side->attr.iface_addr_len);
    ASSERT_EQ(UCS_OK, uct_iface_get_device_address(
                          side->iface, (uct_device_addr_t *)side->dev_addr.data()));
    ASSERT_EQ(UCS_OK, uct_iface_get_address(side->iface,
                                            (uct_iface_addr_t *)side->iface_addr.data()));
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(side->iface, kAmId, record_am, side, 0));
    uct_iface_progress_enable(side->iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

uct_ep_h UctSrc::create_ep(Side *from, const Side &to)
{
    uct_ep_params_t params{};
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface = from->iface;
    params.dev_addr = to.dev();
    params.iface_addr = to.addr();
    uct_ep_h ep = nullptr;
    EXPECT_EQ(UCS_OK, uct_ep_create(&params, &ep));
    return ep;
}

uct_ep_h UctSrc::create_ep_to_closed_iface(Side *from)
{
    Side gone;
    gone.name = "gone";
    open_side(&gone, md_b_, {});
    close_side(&gone);
    uct_ep_h ep = create_ep(from, gone);
    if (ep != nullptr) {
        extra_eps_.push_back(ep);
    }
    return ep;
}

void UctSrc::destroy_ep(uct_ep_h ep)
{
    for (uct_ep_h *p : {&ep_ab_, &ep_ba_}) {
        if (*p == ep) {
            *p = nullptr;
        }
    }
    for (auto it = extra_eps_.begin(); it != extra_eps_.end(); ++it) {
        if (*it == ep) {
            extra_eps_.erase(it);
            break;
        }
    }
    uct_ep_pending_purge(ep, nullptr, nullptr);
    uct_ep_destroy(ep);
}

void UctSrc::close_side(Side *side)
{
    if (side->iface != nullptr) {
        uct_iface_close(side->iface);
        side->iface = nullptr;
    }
    if (side->worker != nullptr) {
        uct_worker_destroy(side->worker);
        side->worker = nullptr;
    }
    if (side->async != nullptr) {
        ucs_async_context_destroy(side->async);
        side->async = nullptr;
    }
}

void UctSrc::quiesce_ep(uct_ep_h ep)
{
    uct_ep_pending_purge(ep, nullptr, nullptr);
    for (unsigned flags : {0u, unsigned(UCT_FLUSH_FLAG_CANCEL)}) {
        Completion &comp = completion();
        ucs_status_t status = UCS_ERR_NO_RESOURCE;
        const bool done = wait_for([&] {
            if (status == UCS_ERR_NO_RESOURCE) {
                status = uct_ep_flush(ep, flags, &comp.uct);
            }
            return status != UCS_ERR_NO_RESOURCE && (status != UCS_INPROGRESS || comp.fired > 0);
        }, 5.0);
        if (done) {
            return;
        }
    }
    ADD_FAILURE() << "ep " << ep << " could not be flushed, not even with CANCEL";
}

void UctSrc::TearDown()
{
    std::vector<uct_ep_h> eps = extra_eps_;
    eps.push_back(ep_ab_);
    eps.push_back(ep_ba_);
    // Quiet first, as UCP does before destroying: an ep destroyed with sends in flight is
    // tested on its own (iface_close__frees_eps_destroyed_with_sends_in_flight).
    for (uct_ep_h ep : eps) {
        if (ep != nullptr) {
            quiesce_ep(ep);
        }
    }
    for (uct_ep_h ep : eps) {
        if (ep != nullptr) {
            destroy_ep(ep);
        }
    }
    close_side(&a_);
    close_side(&b_);
    for (uct_md_h md : {md_a_, md_b_}) {
        if (md != nullptr) {
            uct_md_close(md);
        }
    }
    for (Side *side : {&a_, &b_}) {
        for (const EpError &e : side->errors) {
            ADD_FAILURE() << "unexpected error on iface " << side->name << " ep " << e.ep
                          << ": " << ucs_status_string(e.status);
        }
    }
    for (const std::string &msg : LogCapture::take_unexpected()) {
        ADD_FAILURE() << "UCX printed: " << msg;
    }
    LogCapture::uninstall();
}

bool UctSrc::isolated()
{
    return std::getenv("UCT_SRC_TEST_ISOLATED") != nullptr;
}

bool UctSrc::run_isolated(std::string *output, double seconds)
{
    const ::testing::TestInfo *info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string filter = std::string("--gtest_filter=") + info->test_suite_name() + "." +
                               info->name();
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        ADD_FAILURE() << "readlink(/proc/self/exe): " << std::strerror(errno);
        return false;
    }
    exe[n] = '\0';
    char log_path[] = "/tmp/uct_tests_isolated_XXXXXX";
    const int log_fd = mkstemp(log_path);
    if (log_fd < 0) {
        ADD_FAILURE() << "mkstemp: " << std::strerror(errno);
        return false;
    }
    std::vector<std::string> env_strings;
    for (char **e = environ; *e != nullptr; ++e) {
        env_strings.emplace_back(*e);
    }
    env_strings.emplace_back("UCT_SRC_TEST_ISOLATED=1");
    std::vector<char *> envp;
    for (std::string &s : env_strings) {
        envp.push_back(&s[0]);
    }
    envp.push_back(nullptr);
    std::vector<char> filter_arg(filter.begin(), filter.end());
    filter_arg.push_back('\0');
    char *argv[] = {exe, filter_arg.data(), nullptr};

    // The child holds the write end of this pipe until it exits: poll() on the read end is
    // the bounded wait for its end.
    int alive[2];
    if (pipe(alive) != 0) {
        ADD_FAILURE() << "pipe: " << std::strerror(errno);
        close(log_fd);
        return false;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        close(alive[0]);
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        execve(exe, argv, envp.data());
        _exit(127);
    }
    close(alive[1]);
    close(log_fd);
    int status = 0;
    bool exited = false;
    if (pid > 0) {
        struct pollfd pfd = {alive[0], POLLIN, 0};
        const int ready = poll(&pfd, 1, static_cast<int>(seconds * 1000));
        if (ready <= 0) {
            kill(pid, SIGKILL);
        }
        exited = (waitpid(pid, &status, 0) == pid) && ready > 0;
    }
    close(alive[0]);
    std::ifstream log(log_path);
    std::stringstream text;
    text << log.rdbuf();
    *output = text.str();
    unlink(log_path);
    if (pid < 0) {
        ADD_FAILURE() << "fork: " << std::strerror(errno);
        return false;
    }
    if (!exited) {
        *output += "\n(killed after " + std::to_string(seconds) + " s)";
    }
    return exited && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool UctSrc::wait_for(const std::function<bool()> &done, double seconds)
{
    const double deadline = now_sec() + seconds;
    while (!done()) {
        if (now_sec() > deadline) {
            return false;
        }
        progress();
    }
    return true;
}

bool UctSrc::wait_for_side(Side *side, const std::function<bool()> &done, double seconds)
{
    const double deadline = now_sec() + seconds;
    while (!done()) {
        if (now_sec() > deadline) {
            return false;
        }
        side->progress();
    }
    return true;
}

void UctSrc::progress_for(double seconds, Side *only)
{
    const double deadline = now_sec() + seconds;
    while (now_sec() < deadline) {
        if (only != nullptr) {
            only->progress();
        } else {
            progress();
        }
    }
}

ucs_status_t UctSrc::am_short(uct_ep_h ep, uint64_t header, const void *payload,
                              unsigned length, uint8_t id)
{
    ucs_status_t status;
    wait_for([&] {
        status = uct_ep_am_short(ep, id, header, payload, length);
        return status != UCS_ERR_NO_RESOURCE;
    });
    return status;
}

namespace {
struct PackArgs {
    const void *payload;
    size_t length;
};

size_t pack_copy(void *dest, void *arg)
{
    auto *args = static_cast<PackArgs *>(arg);
    std::memcpy(dest, args->payload, args->length);
    return args->length;
}
}  // namespace

ssize_t UctSrc::am_bcopy(uct_ep_h ep, const void *payload, size_t length, uint8_t id)
{
    PackArgs args{payload, length};
    ssize_t ret;
    wait_for([&] {
        ret = uct_ep_am_bcopy(ep, id, pack_copy, &args, 0);
        return ret != UCS_ERR_NO_RESOURCE;
    });
    return ret;
}

void UctSrc::flush_ep(uct_ep_h ep)
{
    Completion &comp = completion();
    ucs_status_t status;
    ASSERT_TRUE(wait_for([&] {
        status = uct_ep_flush(ep, 0, &comp.uct);
        return status != UCS_ERR_NO_RESOURCE;
    })) << "flush kept returning NO_RESOURCE";
    if (status == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return comp.fired > 0; })) << "flush never completed";
        ASSERT_EQ(UCS_OK, comp.status);
    } else {
        ASSERT_EQ(UCS_OK, status);
    }
}

Completion &UctSrc::completion(int count)
{
    completions_.emplace_back(count);
    return completions_.back();
}

std::vector<Completion> &UctSrc::completions(size_t n)
{
    completion_sets_.emplace_back(n);
    return completion_sets_.back();
}

void UctSrc::mem_reg(uct_md_h md, void *addr, size_t length, Region *region)
{
    region->md = md;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(md, addr, length, UCT_MD_MEM_ACCESS_ALL, &region->memh));
    uct_md_attr_t md_attr;
    ASSERT_EQ(UCS_OK, uct_md_query(md, &md_attr));
    std::vector<uint8_t> packed(md_attr.rkey_packed_size);
    // Packed as UCP packs for endpoints with peer error handling, so that the region may be
    // deregistered with invalidation.
    ASSERT_EQ(UCS_OK, uct_src_test_mkey_pack_invalidate(md, region->memh, packed.data()));
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(component_, packed.data(), &region->rkey));
    region->unpacked = true;
}

void UctSrc::mem_dereg(Region *region)
{
    if (region->unpacked) {
        EXPECT_EQ(UCS_OK, uct_rkey_release(component_, &region->rkey));
        region->unpacked = false;
    }
    if (region->memh != UCT_MEM_HANDLE_NULL) {
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(region->md, region->memh));
        region->memh = UCT_MEM_HANDLE_NULL;
    }
}

}  // namespace uct_src_test
