// StoreLimits from the environment (TDIST_STORE_*), and the descriptor cap.
#include <sys/resource.h>

#include <algorithm>

#include "store/tcp_store_server.h"
#include "tdist/errors.h"
#include "util/env.h"

namespace tdist::store_detail {

namespace {

size_t positive(const char* name, size_t fallback) {
  auto v = get_env_int(name);
  if (!v) return fallback;
  if (*v <= 0) throw DistValueError(std::string(name) + "=" + std::to_string(*v) + " must be positive");
  return static_cast<size_t>(*v);
}

}  // namespace

StoreLimits StoreLimits::from_environment() {
  StoreLimits l;
  l.max_bytes = positive("TDIST_STORE_MAX_BYTES", l.max_bytes);
  l.max_answer_bytes = positive("TDIST_STORE_MAX_ANSWER_BYTES", l.max_answer_bytes);
  l.max_buffered_bytes = positive("TDIST_STORE_MAX_BUFFERED_BYTES", l.max_buffered_bytes);
  l.max_connections = positive("TDIST_STORE_MAX_CONNECTIONS", l.max_connections);
  l.handshake_time = Millis(positive("TDIST_STORE_HANDSHAKE_MS", l.handshake_time.count()));
  if (auto idle = get_env_int("TDIST_STORE_IDLE_TIMEOUT_S"); idle && *idle > 0) l.idle_timeout = Millis(*idle * 1000);
  // The server shares the process's descriptors with its rank: leave it half,
  // so that a flood of connections cannot starve the rank's own sockets.
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    l.max_connections = std::min<size_t>(l.max_connections, std::max<size_t>(r.rlim_cur / 2, 16));
  return l;
}

}  // namespace tdist::store_detail
