// Choosing each peer's data path from TDIST_TRANSPORTS, over the freshly
// connected (still blocking) sockets, before the progress thread starts.
#include <algorithm>
#include <string>

#include "tdist/errors.h"
#include "transport/shm/shm_path.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_transport.h"
#include "util/env.h"
#include "util/host_id.h"

namespace tdist {

// Both ends of a pair must pick the same path. A pair sets up rings only when
// both ends rank shm above tcp (each declines otherwise: connect_shm_links),
// so rings exist on both ends or on neither; then each end takes the first
// of its list that the pair has.
void TcpTransport::attach_data_paths(Deadline deadline) {
  const std::vector<std::string> order = data_path_order();
  const auto shm_at = std::find(order.begin(), order.end(), "shm");
  const auto tcp_at = std::find(order.begin(), order.end(), "tcp");
  const bool want_shm = shm_at != order.end() && shm_at < tcp_at;

  std::vector<ShmCandidate> candidates;
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_ && peers_[peer]->host_id == host_id())
      candidates.push_back(ShmCandidate{peer, peers_[peer]->fd.get(), describe_peer(peer)});
  auto links = connect_shm_links(rank_, candidates, want_shm, deadline, options_.label);
  std::vector<std::unique_ptr<ShmLink>> link_of(size_);
  for (size_t i = 0; i < candidates.size(); ++i) link_of[candidates[i].peer] = std::move(links[i]);

  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    Peer& p = *peers_[peer];
    if (link_of[peer]) {
      p.path = std::make_unique<ShmPath>(std::move(link_of[peer]), static_cast<PathHost&>(*this), peer);
      continue;
    }
    if (tcp_at != order.end()) continue;  // the socket carries the data
    const bool local = p.host_id == host_id();
    throw DistValueError(options_.label + ": TDIST_TRANSPORTS=" + get_env("TDIST_TRANSPORTS").value_or("") +
                         " reaches no path to " + describe_peer(peer) +
                         (local ? " (no shared memory with it: see the warnings above, or its TDIST_TRANSPORTS)"
                                : " (it runs on another host, which only tcp reaches)"));
  }
}

}  // namespace tdist
