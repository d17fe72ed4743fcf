#include "util/peer_memory.h"

#include <sys/prctl.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace tdist {

void allow_reads_by_peers() {
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef PR_SET_PTRACER
    // EINVAL without Yama: nothing restricts the reads then.
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
  });
}

std::string read_peer_memory(int pid, const void* remote, void* local, size_t n) {
  size_t done = 0;
  while (done < n) {
    iovec to{static_cast<char*>(local) + done, n - done};
    iovec from{const_cast<char*>(static_cast<const char*>(remote)) + done, n - done};
    const ssize_t got = process_vm_readv(pid, &to, 1, &from, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      return "process_vm_readv from pid " + std::to_string(pid) + ": " +
             (got < 0 ? std::strerror(errno) : "no bytes moved");
    done += static_cast<size_t>(got);  // a partial read stops at a page it could not reach: try the rest
  }
  return "";
}

std::string write_peer_memory(int pid, const void* local, void* remote, size_t n) {
  size_t done = 0;
  while (done < n) {
    iovec from{const_cast<char*>(static_cast<const char*>(local)) + done, n - done};
    iovec to{static_cast<char*>(remote) + done, n - done};
    const ssize_t put = process_vm_writev(pid, &from, 1, &to, 1, 0);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0)
      return "process_vm_writev to pid " + std::to_string(pid) + ": " +
             (put < 0 ? std::strerror(errno) : "no bytes moved");
    done += static_cast<size_t>(put);
  }
  return "";
}

}  // namespace tdist
