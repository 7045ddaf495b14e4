// The operating system's randomness (getrandom, /dev/urandom) and the counter-mode generator.
#include "core/secure_random.h"

#include "core/log.h"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

namespace srcnic {

namespace {

// Reads len bytes from /dev/urandom; false if it cannot.
bool urandom(uint8_t *p, size_t len)
{
    const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    while (len > 0) {
        const ssize_t n = ::read(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            ::close(fd);
            return false;
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
    ::close(fd);
    return true;
}

} // namespace

void os_random(void *buf, size_t len)
{
    uint8_t *p = static_cast<uint8_t *>(buf);
    while (len > 0) {
        // Flags 0: blocks only until the kernel's pool is first initialised, at boot.
        const ssize_t n = ::getrandom(p, len, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (errno == ENOSYS && urandom(p, len)) {
                return;
            }
            SRCNIC_LOG_ERROR("no randomness from getrandom() or /dev/urandom (%m): the engine "
                             "cannot make keys a peer could not guess");
            std::abort();
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
}

uint64_t os_random_nonzero()
{
    uint64_t v = 0;
    while (v == 0) {
        os_random(&v, sizeof(v));
    }
    return v;
}

SecureRandom::SecureRandom()
{
    os_random(&key_, sizeof(key_));
}

uint64_t SecureRandom::next_nonzero()
{
    uint64_t v = next();
    while (v == 0) {
        v = next();
    }
    return v;
}

} // namespace srcnic
