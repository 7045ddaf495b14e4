// Descriptors this process holds (entries of /proc/self/fd, the directory's own included): the
// tests that check what opens a descriptor compare two readings.
#ifndef SRCNIC_TESTS_OPEN_FDS_H
#define SRCNIC_TESTS_OPEN_FDS_H

#include <dirent.h>

#include <cstddef>

namespace srcnic {
namespace test {

inline size_t open_fds()
{
    size_t n = 0;
    if (DIR *d = opendir("/proc/self/fd")) {
        while (readdir(d) != nullptr) {
            ++n;
        }
        closedir(d);
    }
    return n;
}

} // namespace test
} // namespace srcnic

#endif
