// Setting up shared-memory rings with the same-host peers, over the freshly
// connected (still blocking) sockets, before the progress thread starts.
#include "transport/shm_link.h"

#include <new>
#include <string>

#include "tdist/errors.h"
#include "transport/tcp_peer.h"
#include "transport/tcp_transport.h"
#include "transport/wire.h"
#include "util/env.h"
#include "util/host_id.h"
#include "util/logging.h"

namespace tdist {

void ShmLink::init_controls(ShmSegment& seg) {
  char* base = static_cast<char*>(seg.data());
  new (base) ShmRingControl();
  new (base + sizeof(ShmRingControl)) ShmRingControl();
}

ShmLink::ShmLink(ShmSegment seg, size_t ring_bytes, bool is_low) : segment(std::move(seg)) {
  char* base = static_cast<char*>(segment.data());
  auto* low_to_high = std::launder(reinterpret_cast<ShmRingControl*>(base));
  auto* high_to_low = std::launder(reinterpret_cast<ShmRingControl*>(base + sizeof(ShmRingControl)));
  char* data_lh = base + 2 * sizeof(ShmRingControl);
  char* data_hl = data_lh + ring_bytes;
  ShmRing lh(low_to_high, data_lh, ring_bytes), hl(high_to_low, data_hl, ring_bytes);
  tx = is_low ? lh : hl;
  rx = is_low ? hl : lh;
}

size_t shm_ring_bytes() {
  constexpr size_t kDefault = 512 * 1024;
  auto v = get_env("TDIST_SHM_RING_BYTES");
  if (!v) return kDefault;
  size_t n = std::stoull(*v);
  if (n < 4096 || n > (size_t{1} << 30))
    throw DistValueError("TDIST_SHM_RING_BYTES=" + *v + " is out of range (4096 .. 1 GiB)");
  return n;
}

// Three phases so that no rank waits on one that waits on it: offer to every
// higher same-host peer, answer every lower one, then read the answers.
void TcpTransport::attach_shared_memory(Deadline deadline) {
  const bool enabled = shm_enabled();
  const size_t ring_bytes = shm_ring_bytes();
  std::vector<ShmSegment> offered(size_);
  for (int peer = rank_ + 1; peer < size_; ++peer) {
    Peer& p = *peers_[peer];
    if (p.host_id != host_id()) continue;
    std::string name;
    if (enabled) {
      try {
        offered[peer] = ShmSegment::create("p2p", ShmLink::segment_bytes(ring_bytes));
        ShmLink::init_controls(offered[peer]);
        name = offered[peer].name();
      } catch (const DistError& e) {
        TDIST_LOG(LogLevel::Warn, options_.label << ": TCP to " << describe_peer(peer) << ": " << e.what());
      }
    }
    wire::ShmOffer offer{wire::kShmOfferMagic, static_cast<uint32_t>(name.size()), ring_bytes};
    send_all(p.fd.get(), &offer, sizeof(offer), deadline, describe_peer(peer));
    if (!name.empty()) send_all(p.fd.get(), name.data(), name.size(), deadline, describe_peer(peer));
  }
  for (int peer = 0; peer < rank_; ++peer) {
    Peer& p = *peers_[peer];
    if (p.host_id != host_id()) continue;
    wire::ShmOffer offer{};
    recv_all(p.fd.get(), &offer, sizeof(offer), deadline, describe_peer(peer));
    if (offer.magic != wire::kShmOfferMagic || offer.name_size > wire::kMaxShmName || offer.ring_bytes < 4096 ||
        offer.ring_bytes > (uint64_t{1} << 30))
      throw DistNetworkError(options_.label + ": protocol error from " + describe_peer(peer) +
                             ": bad shared-memory offer");
    std::string name(offer.name_size, '\0');
    if (!name.empty()) recv_all(p.fd.get(), name.data(), name.size(), deadline, describe_peer(peer));
    uint32_t accepted = 0;
    if (enabled && !name.empty()) {
      try {
        ShmSegment seg = ShmSegment::open(name, ShmLink::segment_bytes(offer.ring_bytes));
        p.shm = std::make_unique<ShmLink>(std::move(seg), offer.ring_bytes, /*is_low=*/false);
        accepted = 1;
      } catch (const DistError& e) {
        TDIST_LOG(LogLevel::Warn, options_.label << ": TCP to " << describe_peer(peer) << ": " << e.what());
      }
    }
    wire::ShmReply reply{wire::kShmReplyMagic, accepted};
    send_all(p.fd.get(), &reply, sizeof(reply), deadline, describe_peer(peer));
  }
  for (int peer = rank_ + 1; peer < size_; ++peer) {
    Peer& p = *peers_[peer];
    if (p.host_id != host_id()) continue;
    wire::ShmReply reply{};
    recv_all(p.fd.get(), &reply, sizeof(reply), deadline, describe_peer(peer));
    if (reply.magic != wire::kShmReplyMagic)
      throw DistNetworkError(options_.label + ": protocol error from " + describe_peer(peer) +
                             ": bad shared-memory reply");
    if (reply.accepted == 1 && offered[peer].valid()) {
      offered[peer].unlink();  // both sides mapped it: nothing stays in /dev/shm
      p.shm = std::make_unique<ShmLink>(std::move(offered[peer]), ring_bytes, /*is_low=*/true);
    }
  }
}

}  // namespace tdist
