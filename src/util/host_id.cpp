#include "util/host_id.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>

#include "util/settings.h"

namespace tdist {

std::string hostname() {
  char buf[HOST_NAME_MAX + 1] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

// Kept for the process's life: the ranks compare it when every group is made,
// and a process cannot move to another host.
const std::string& host_id() {
  static const std::string id = [] {
    // Set: the ranks' own word for their host (emulated hosts in tests).
    if (auto given = settings::get<"TDIST_HOST_ID">()) return "id:" + *given;
    std::string boot;
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, boot);
    // Network namespaces share hostname and boot id but not loopback, so the
    // namespace is part of the identity (multi-host tests use namespaces).
    char ns[256] = {0};
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    std::string netns = n > 0 ? std::string(ns, static_cast<size_t>(n)) : "";
    return hostname() + "/" + boot + "/" + netns;
  }();
  return id;
}

std::string machine_of(const std::string& id) {
  // hostname/boot/netns, where a hostname has no '/'.
  const size_t first = id.find('/');
  const size_t second = first == std::string::npos ? first : id.find('/', first + 1);
  if (id.rfind("id:", 0) == 0 || second == std::string::npos) return id;
  return id.substr(first + 1, second - first - 1);
}

}  // namespace tdist
