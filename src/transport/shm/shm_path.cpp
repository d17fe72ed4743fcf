#include "transport/shm/shm_path.h"

#include <cstring>
#include <new>
#include <string>

#include "tdist/errors.h"
#include "transport/data_path_registry.h"
#include "util/settings.h"
#include "util/logging.h"
#include "util/socket.h"

namespace tdist {

namespace {
constexpr size_t kHeaderBytes = sizeof(wire::MessageHeader);

std::exception_ptr bad_header(const std::string& peer, const wire::MessageHeader& h) {
  return std::make_exception_ptr(DistNetworkError("protocol error from " + peer +
                                                  ": bad message header in the shared-memory ring (magic " +
                                                  std::to_string(h.magic) + ", size " + std::to_string(h.size) + ")"));
}
}  // namespace

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

// The registry holds its default and range (4 KiB to 1 GiB).
size_t shm_ring_bytes() { return static_cast<size_t>(settings::get<"TDIST_SHM_RING_BYTES">()); }

// Three phases so that no rank waits on one that waits on it: offer to every
// higher peer, answer every lower one, then read the answers.
std::vector<std::unique_ptr<ShmLink>> connect_shm_links(int rank, const std::vector<ShmCandidate>& candidates,
                                                        bool enabled, Deadline deadline, const std::string& label) {
  const size_t ring_bytes = shm_ring_bytes();
  std::vector<std::unique_ptr<ShmLink>> links(candidates.size());
  std::vector<ShmSegment> offered(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ShmCandidate& c = candidates[i];
    if (c.peer < rank) continue;
    std::string name;
    if (enabled) {
      try {
        offered[i] = ShmSegment::create("p2p", ShmLink::segment_bytes(ring_bytes));
        ShmLink::init_controls(offered[i]);
        name = offered[i].name();
      } catch (const DistError& e) {
        TDIST_LOG(LogLevel::Warn, label << ": no shared memory with " << c.name << ": " << e.what());
      }
    }
    wire::ShmOffer offer{wire::kShmOfferMagic, static_cast<uint32_t>(name.size()), ring_bytes};
    send_all(c.fd, &offer, sizeof(offer), deadline, c.name);
    if (!name.empty()) send_all(c.fd, name.data(), name.size(), deadline, c.name);
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ShmCandidate& c = candidates[i];
    if (c.peer > rank) continue;
    wire::ShmOffer offer{};
    recv_all(c.fd, &offer, sizeof(offer), deadline, c.name);
    if (offer.magic != wire::kShmOfferMagic || offer.name_size > wire::kMaxShmName || offer.ring_bytes < 4096 ||
        offer.ring_bytes > (uint64_t{1} << 30))
      throw DistNetworkError(label + ": protocol error from " + c.name + ": bad shared-memory offer");
    std::string name(offer.name_size, '\0');
    if (!name.empty()) recv_all(c.fd, name.data(), name.size(), deadline, c.name);
    uint32_t accepted = 0;
    if (enabled && !name.empty()) {
      try {
        ShmSegment seg = ShmSegment::open(name, ShmLink::segment_bytes(offer.ring_bytes));
        // Both ends have it mapped now: the name goes even if its creator dies before it reads the reply.
        seg.remove_name();
        links[i] = std::make_unique<ShmLink>(std::move(seg), offer.ring_bytes, /*is_low=*/false);
        accepted = 1;
      } catch (const DistError& e) {
        TDIST_LOG(LogLevel::Warn, label << ": no shared memory with " << c.name << ": " << e.what());
      }
    }
    wire::ShmReply reply{wire::kShmReplyMagic, accepted};
    send_all(c.fd, &reply, sizeof(reply), deadline, c.name);
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ShmCandidate& c = candidates[i];
    if (c.peer < rank) continue;
    wire::ShmReply reply{};
    recv_all(c.fd, &reply, sizeof(reply), deadline, c.name);
    if (reply.magic != wire::kShmReplyMagic)
      throw DistNetworkError(label + ": protocol error from " + c.name + ": bad shared-memory reply");
    if (reply.accepted == 1 && offered[i].valid()) {
      offered[i].unlink();  // both sides mapped it: nothing stays in /dev/shm
      links[i] = std::make_unique<ShmLink>(std::move(offered[i]), ring_bytes, /*is_low=*/true);
    }
  }
  return links;
}

// "shm" in TDIST_TRANSPORTS: the rings reach the peers of this host. The
// pair's set-up still declines at either end that cannot map a segment, so
// both ends then fall back alike.
namespace {
[[maybe_unused]] const bool kShmRegistered = [] {
  register_data_path(
      "shm", DataPathFactory{
                 "shared memory",
                 [](const SetupChannel& channel) { return channel.same_host(); },
                 [](SetupChannel& channel, PathHost& host, Deadline deadline) -> std::unique_ptr<DataPath> {
                   std::vector<ShmCandidate> candidates{ShmCandidate{channel.peer(), channel.fd(), channel.peer_name()}};
                   auto link = std::move(
                       connect_shm_links(channel.rank(), candidates, /*enabled=*/true, deadline, channel.label()).front());
                   if (!link) return nullptr;
                   return std::make_unique<ShmPath>(std::move(link), host, channel.peer());
                 },
                 [] { return shm_enabled() ? std::string() : std::string("TDIST_SHM=0"); },
             });
  return true;
}();
}  // namespace

ShmPath::ShmPath(std::unique_ptr<ShmLink> link, PathHost& host, int peer)
    : link_(std::move(link)), host_(host), peer_(peer) {}

// With nothing queued before it and room for all of it, the message is
// written at once and the request completes here: no queue entry, and up to
// a piece of payload (ShmRing::piece_for) one release of the ring's head,
// header and payload together, for the reader to see.
void ShmPath::post_locked(std::shared_ptr<Request> req) {
  ShmRing& ring = link_->tx;
  const wire::MessageHeader header{wire::kMessageMagic, 0, req->tag(), req->size(), req->comm()};
  if (txq_.empty() && ring.write_both(&header, sizeof(header), req->data(), req->size())) {
    if (ring.reader_needs_doorbell()) host_.doorbell_locked(peer_);
    req->complete_unshared(peer_);
    return;
  }
  txq_.push_back(Outgoing{header, std::move(req), 0});
  flush_locked();
  // What is left waits for room. Whoever drives flushes it (it polls and sees
  // the backlog); one that sleeps in epoll meanwhile is woken by the reader's
  // doorbell once it makes room, which the raised flag asks for.
  while (!txq_.empty() && ring.writer_prepare_sleep()) flush_locked();
}

void ShmPath::flush_locked() {
  ShmRing& ring = link_->tx;
  bool wrote = false;
  while (!txq_.empty()) {
    auto& item = txq_.front();
    if (item.sent < kHeaderBytes) {
      size_t k = ring.write_some(reinterpret_cast<char*>(&item.header) + item.sent, kHeaderBytes - item.sent);
      item.sent += k;
      wrote = wrote || k > 0;
      if (item.sent < kHeaderBytes) break;
    }
    size_t off = item.sent - kHeaderBytes, left = item.request->size() - off;
    if (left > 0) {
      size_t k = ring.write_some(static_cast<char*>(item.request->data()) + off, left);
      item.sent += k;
      wrote = wrote || k > 0;
      if (k < left) break;
    }
    item.request->complete(nullptr, peer_);
    txq_.pop_front();
  }
  backlog_.store(!txq_.empty(), std::memory_order_relaxed);
  if (wrote && ring.reader_needs_doorbell()) host_.doorbell_locked(peer_);
}

void ShmPath::fail_sends_locked(const std::exception_ptr& error) {
  for (auto& item : txq_) item.request->complete(error, peer_);
  txq_.clear();
  backlog_.store(false, std::memory_order_relaxed);
}

void ShmPath::abandon_sends_locked(uint32_t comm, const std::exception_ptr& error) {
  for (auto it = txq_.begin(); it != txq_.end();) {
    const std::shared_ptr<Request> original = it->request;  // alive until completed below
    Request& r = *original;
    if (r.comm() != comm) {  // another group's, or a copy made here before
      ++it;
      continue;
    }
    if (it->sent == 0) {
      r.complete(error, peer_);
      it = txq_.erase(it);
      continue;
    }
    // The ring holds its header and part of its payload: the rest must follow.
    const size_t done = it->sent > kHeaderBytes ? it->sent - kHeaderBytes : 0;
    auto rest = owned_send(peer_, r.tag(), r.size());
    if (r.size() > done) std::memcpy(static_cast<char*>(rest->data()) + done, static_cast<char*>(r.data()) + done, r.size() - done);
    it->request = std::move(rest);
    r.complete(error, peer_);
    ++it;
  }
  backlog_.store(!txq_.empty(), std::memory_order_relaxed);
}

bool ShmPath::prepare_sleep_locked() { return !txq_.empty() && link_->tx.writer_prepare_sleep(); }

// Consumes what the ring holds: headers and payloads are copied straight from
// the ring to their place.
bool ShmPath::poll() {
  if (broken_) return false;
  ShmRing& ring = link_->rx;
  bool consumed = false;
  for (;;) {
    size_t avail = ring.available();
    if (!in_payload_) {
      if (avail < kHeaderBytes) break;
      ring.read(&header_, kHeaderBytes);
      consumed = true;
      if (header_.magic != wire::kMessageMagic || header_.size > wire::kMaxUnexpectedBytes) {
        broken_ = true;
        host_.path_failed(peer_, bad_header(host_.describe_peer(peer_), header_));
        return true;
      }
      in_payload_ = true;
      payload_done_ = 0;
      dst_ = host_.begin_message(peer_, header_, rx_slot_);
    } else {
      size_t take = std::min<size_t>(avail, header_.size - payload_done_);
      if (take == 0 && payload_done_ < header_.size) break;
      ring.read(dst_ ? dst_ + payload_done_ : nullptr, take);
      consumed = consumed || take > 0;
      payload_done_ += take;
    }
    if (in_payload_ && payload_done_ == header_.size) {
      in_payload_ = false;
      dst_ = nullptr;
      host_.end_message(peer_, rx_slot_);
    }
  }
  if (consumed && ring.writer_needs_doorbell()) host_.doorbell(peer_);
  return consumed;
}

bool ShmPath::prepare_sleep() { return link_->rx.reader_prepare_sleep(); }

}  // namespace tdist
