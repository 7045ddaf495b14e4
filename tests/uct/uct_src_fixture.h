// Fixture for the src transport's UCT tests: the src component's MD, two interfaces ("a" and
// "b") on lo in one process, each with its own worker so that a test can progress one side
// and not the other, endpoints both ways, and bounded progress loops (a watchdog on every wait,
// never a bare sleep). Tests see only the public UCT API (uct/api/uct.h); src_internal.h adds
// the few white-box hooks they need (engine counters, a quiet side, the endpoint's size).
#ifndef UCT_SRC_TESTS_UCT_SRC_FIXTURE_H
#define UCT_SRC_TESTS_UCT_SRC_FIXTURE_H

#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace uct_src_test {

constexpr const char *kTlName   = "src";
constexpr const char *kDevName  = "lo";   // tests send only to loopback addresses
constexpr size_t kRxHeadroom    = 24;         // what UCP would ask for, bytes
constexpr uint8_t kAmId         = 5;          // the id the recording handlers listen on
constexpr double kWatchdog      = 20.0;       // default bound of every wait, s
// The payload of a zero-length send. A null one is tested on its own
// (am_short__null_payload_of_zero_length_accepted): passing it everywhere would abort the whole
// program under UBSan while the transport hands it to memcpy().
constexpr uint8_t kNoPayload[1] = {0};

double now_sec();

// A transport bug the test detected (its diagnosis in _what, which names the defect so that a
// regression says at once what came back). The bugs these guard were fixed; each now fails.
#define UCT_SRC_KNOWN_BUG(_what) FAIL() << "transport bug: " << _what

// The seed of a test's random generator: UCT_SRC_TEST_SEED if set, else fresh. Printed, so that
// a failure can be replayed.
uint32_t test_seed();

// Fills a buffer with a pattern that differs for each (seed, offset).
void fill_pattern(void *buf, size_t length, uint32_t seed);

// A UCX configuration knob "NAME=value" (the name without the UCX_SRC_ prefix).
using ConfigKv = std::pair<std::string, std::string>;

// Collects UCX warnings and errors: a test fails if UCX printed any it did not expect.
class LogCapture {
public:
    static void install();
    static void uninstall();
    // While an ExpectErrors object lives, warnings and errors are counted and not printed.
    struct ExpectErrors {
        ExpectErrors();
        ~ExpectErrors();
        size_t count() const;
    };
    static std::vector<std::string> take_unexpected();
};

// A completion that remembers how many times it fired and with which status.
struct Completion {
    uct_completion_t uct;
    int fired = 0;
    ucs_status_t status = UCS_OK;

    explicit Completion(int count = 1);
    void reset(int count = 1);
};

// One received active message.
struct AmRecord {
    uint8_t id;
    std::vector<uint8_t> data;
    unsigned flags;
};

struct EpError {
    uct_ep_h ep;
    ucs_status_t status;
};

// One interface with its worker and addresses. Each side has its own async context, as two
// processes (or two UCP workers) do: a test that spins on one side's progress holds that
// side's async lock, and must not starve the other side's background progress (UCX's async
// thread skips a tick whose context it finds taken, and only UCP's worker progress runs the
// ticks it missed).
struct Side {
    const char *name = "";
    uct_md_h md = nullptr;
    ucs_async_context_t *async = nullptr;
    uct_worker_h worker = nullptr;
    uct_iface_h iface = nullptr;
    uct_iface_attr_t attr{};
    std::vector<uint8_t> dev_addr;
    std::vector<uint8_t> iface_addr;
    std::vector<AmRecord> rx;            // what the recording handler received
    std::vector<EpError> errors;         // what the iface error handler was told
    std::mutex errors_lock;              // the handler may run in the async thread

    const uct_device_addr_t *dev() const { return (const uct_device_addr_t *)dev_addr.data(); }
    const uct_iface_addr_t *addr() const { return (const uct_iface_addr_t *)iface_addr.data(); }
    size_t num_errors();
    unsigned progress() { return (worker != nullptr) ? uct_worker_progress(worker) : 0; }
};

class UctSrc : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

    // Knobs applied to a side's iface configuration before it opens (side 0 = a, 1 = b).
    virtual std::vector<ConfigKv> config_for(int side) const { return {}; }
    // A quiet side has no background progress: its engine runs only when the test progresses
    // it, so it acknowledges nothing meanwhile.
    virtual bool quiet(int side) const { return false; }

    // Whether the ifaces run on the node agent (UCX_SRC_MODE=agent, or auto with an agent).
    bool agent_mode() const;
    // Opens a side's worker, iface and handlers (used by SetUp, and by tests for extra ifaces).
    void open_side(Side *side, uct_md_h md, const std::vector<ConfigKv> &config);
    void close_side(Side *side);
    uct_ep_h create_ep(Side *from, const Side &to);
    // An endpoint to an iface that was opened and closed again: no one listens there.
    uct_ep_h create_ep_to_closed_iface(Side *from);
    void destroy_ep(uct_ep_h ep);
    // Purges and flushes an ep (with CANCEL if a plain flush does not finish), bounded.
    void quiesce_ep(uct_ep_h ep);

    // Runs the current test again, alone, in a fresh process (this program re-executed with
    // UCT_SRC_TEST_ISOLATED=1), for a call that may abort the process; bounded by `seconds`.
    // Returns true if it passed; *output gets what it printed.
    bool run_isolated(std::string *output, double seconds = 60.0);
    // True inside that process.
    static bool isolated();

    // Progress both sides (or one) until done() or the watchdog; returns done().
    bool wait_for(const std::function<bool()> &done, double seconds = kWatchdog);
    bool wait_for_side(Side *side, const std::function<bool()> &done,
                       double seconds = kWatchdog);
    void progress() { a_.progress(); b_.progress(); }
    // Progresses both sides for a while (when a test must show that something does NOT happen).
    void progress_for(double seconds, Side *only = nullptr);

    // Sends, retrying on NO_RESOURCE with progress (bounded); returns the final status.
    ucs_status_t am_short(uct_ep_h ep, uint64_t header, const void *payload, unsigned length,
                          uint8_t id = kAmId);
    ssize_t am_bcopy(uct_ep_h ep, const void *payload, size_t length, uint8_t id = kAmId);
    // Waits until the peer acknowledged everything sent on ep (flush with a completion).
    void flush_ep(uct_ep_h ep);

    // Completions owned by the fixture: they outlive the test body, so that an operation a
    // failed test left behind can still complete into valid memory during TearDown.
    Completion &completion(int count = 1);
    std::vector<Completion> &completions(size_t n);

    // Registers memory on a side's MD and unpacks the rkey a peer would use.
    struct Region {
        uct_md_h md = nullptr;
        uct_mem_h memh = UCT_MEM_HANDLE_NULL;
        uct_rkey_bundle_t rkey{};
        bool unpacked = false;
    };
    void mem_reg(uct_md_h md, void *addr, size_t length, Region *region);
    void mem_dereg(Region *region);

    static ucs_status_t record_am(void *arg, void *data, size_t length, unsigned flags);
    static ucs_status_t record_error(void *arg, uct_ep_h ep, ucs_status_t status);

    uct_component_h component_ = nullptr;
    uct_md_h md_a_ = nullptr;
    uct_md_h md_b_ = nullptr;
    Side a_, b_;
    uct_ep_h ep_ab_ = nullptr;      // a -> b
    uct_ep_h ep_ba_ = nullptr;      // b -> a
    std::vector<uct_ep_h> extra_eps_;  // created by tests, destroyed by TearDown
    std::deque<Completion> completions_;
    std::deque<std::vector<Completion>> completion_sets_;
};

// Skips a test whose premise holds only in embedded mode: the node agent acknowledges,
// retransmits and serves remote accesses whether or not a process progresses, so a side is
// never quiet there.
#define UCT_SRC_SKIP_WITH_AGENT(_why) \
    do { \
        if (agent_mode()) { \
            GTEST_SKIP() << "with the node agent " _why; \
        } \
    } while (0)

// Peer b does no background progress: it acknowledges nothing until the test progresses it.
class UctSrcQuietPeer : public UctSrc {
protected:
    bool quiet(int side) const override { return side == 1; }
};

}  // namespace uct_src_test

#endif
