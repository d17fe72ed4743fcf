// Choosing a peer's data path from TDIST_TRANSPORTS, over the pair's freshly
// connected (still blocking) socket, before the transport reads it.
#include <algorithm>
#include <string>

#include "tdist/errors.h"
#include "transport/shm/shm_path.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_transport.h"
#include "util/settings.h"
#include "util/host_id.h"

namespace tdist {

// Both ends of a pair must pick the same path. A pair sets up rings only when
// both ends rank shm above tcp (each declines otherwise: connect_shm_links),
// so rings exist on both ends or on neither; then each end takes the first
// of its list that the pair has. Both ends read the same records, so they
// agree on whether the pair shares a host and exchanges offers at all.
std::unique_ptr<ShmLink> TcpTransport::attach_shm(int peer, int fd, Deadline deadline) {
  const std::vector<std::string> order = data_path_order();
  const auto shm_at = std::find(order.begin(), order.end(), "shm");
  const auto tcp_at = std::find(order.begin(), order.end(), "tcp");
  const bool want_shm = shm_at != order.end() && shm_at < tcp_at;
  const bool local = peers_[peer]->host_id == host_id();

  std::unique_ptr<ShmLink> link;
  if (local) {
    std::vector<ShmCandidate> candidates{ShmCandidate{peer, fd, describe_peer(peer)}};
    link = std::move(connect_shm_links(rank_, candidates, want_shm, deadline, options_.label).front());
  }
  if (link || tcp_at != order.end()) return link;  // without rings, the socket carries the data
  throw DistValueError(options_.label + ": TDIST_TRANSPORTS=" + settings::text<"TDIST_TRANSPORTS">() +
                       " reaches no path to " + describe_peer(peer) +
                       (local ? " (no shared memory with it: see the warnings above, or its TDIST_TRANSPORTS)"
                              : " (it runs on another host, which only tcp reaches)"));
}

}  // namespace tdist
