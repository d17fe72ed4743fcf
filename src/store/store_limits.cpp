// StoreLimits from the environment (TDIST_STORE_*), and the descriptor cap.
#include <sys/resource.h>

#include <algorithm>

#include "store/tcp_store_server.h"
#include "tdist/errors.h"
#include "util/settings.h"

namespace tdist::store_detail {

StoreLimits StoreLimits::from_environment() {
  StoreLimits l;
  // The registry holds the defaults and keeps each one positive (the idle timeout: 0 or more, 0 for never).
  l.max_bytes = static_cast<size_t>(settings::get<"TDIST_STORE_MAX_BYTES">());
  l.max_answer_bytes = static_cast<size_t>(settings::get<"TDIST_STORE_MAX_ANSWER_BYTES">());
  l.max_buffered_bytes = static_cast<size_t>(settings::get<"TDIST_STORE_MAX_BUFFERED_BYTES">());
  l.max_connections = static_cast<size_t>(settings::get<"TDIST_STORE_MAX_CONNECTIONS">());
  l.handshake_time = settings::get<"TDIST_STORE_HANDSHAKE_MS">();
  l.idle_timeout = settings::get<"TDIST_STORE_IDLE_TIMEOUT_S">();
  const std::string_view torch = settings::get<"TDIST_STORE_TORCH_CLIENTS">();
  l.torch_clients = torch == "ALL"      ? TorchClients::kAll
                    : torch == "REFUSE" ? TorchClients::kRefuse
                                        : TorchClients::kLocal;
  // The server shares the process's descriptors with its rank: leave it half,
  // so that a flood of connections cannot starve the rank's own sockets.
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    l.max_connections = std::min<size_t>(l.max_connections, std::max<size_t>(r.rlim_cur / 2, 16));
  return l;
}

}  // namespace tdist::store_detail
