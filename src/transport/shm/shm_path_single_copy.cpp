// The shared-memory path's large messages in one copy (shm_single_copy.h):
// the sender's side (announce, write its half, complete in order, withdraw)
// and the receiver's (wait for the receive, read its half, settle).
#include <chrono>
#include <string>
#include <thread>

#include "tdist/errors.h"
#include "transport/shm/shm_path.h"
#include "util/logging.h"
#include "util/peer_memory.h"
#include "util/process_identity.h"

namespace tdist {

namespace {
// A receive shorter than this is read whole by the receiver: halving it
// would save less than the round trip through the slot costs.
constexpr size_t kLeastSplitBytes = 64 * 1024;
// How long an announcement waits for its receive to be posted before it is
// read whole into a buffer (messages behind it wait as long).
constexpr auto kLongestPark = std::chrono::microseconds(100);
// A part begun by the peer ends within one copy; a peer stopped in the middle
// of one (a debugger) is not waited for longer than this.
constexpr auto kLongestPartWait = std::chrono::seconds(10);

// Waits while `busy` and the peer process lives (a dead one copies no more).
template <typename Busy>
bool wait_while(const SingleCopyIdentity& peer, Busy busy) {
  const auto until = std::chrono::steady_clock::now() + kLongestPartWait;
  const ProcessIdentity process{peer.pid, 0, peer.pid_ns};
  while (busy()) {
    if (std::chrono::steady_clock::now() > until) return false;
    if (provably_exited(process)) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}
}  // namespace

// Whatever is still in flight: the peer's copies touch this process's
// buffers no more once this returns (a path closed without failing its
// requests first).
ShmPath::~ShmPath() {
  if (splitting_.empty() && announced_.empty()) return;
  const auto closed = single_copy_error("the shared-memory path to rank " + std::to_string(peer_) + " closed");
  // The mesh may be half gone: only the requests are touched, not the host.
  for (auto& s : splitting_) {
    SingleCopySlot& slot = rx_slot(s.number);
    uint32_t wanted = kDstWanted;
    if (!slot.dst_state.compare_exchange_strong(wanted, kDstRevoked, std::memory_order_acq_rel))
      wait_while(link_->peer, [&] { return slot.dst_state.load(std::memory_order_acquire) == kDstWriting; });
    slot.src_state.store(kSrcDone, std::memory_order_release);
    if (s.slot.request) s.slot.request->complete(closed, peer_);
  }
  splitting_.clear();
  for (auto& a : announced_) withdraw_locked(a, closed);
}

std::exception_ptr ShmPath::single_copy_error(const std::string& what) const {
  return std::make_exception_ptr(DistNetworkError(what));
}

void ShmPath::serve_single_copies_locked() {
  for (auto& a : announced_) {
    SingleCopySlot& slot = tx_slot(a.number);
    uint32_t state = kDstWanted;
    if (!a.request || a.error || slot.dst_state.load(std::memory_order_acquire) != kDstWanted ||
        !slot.dst_state.compare_exchange_strong(state, kDstWriting, std::memory_order_acq_rel))
      continue;
    const size_t size = a.request->size();
    const uint64_t split = slot.split.load(std::memory_order_relaxed);
    std::string why;
    if (split >= size)
      why = "it asked for the bytes from " + std::to_string(split) + " on of a message of " + std::to_string(size);
    else
      why = write_peer_memory(link_->peer.pid, static_cast<const char*>(a.request->data()) + split,
                              reinterpret_cast<void*>(static_cast<uintptr_t>(slot.dst.load(std::memory_order_relaxed))),
                              size - split);
    if (!why.empty())
      a.error = single_copy_error("sending " + std::to_string(size) + " bytes to " + host_.describe_peer(peer_) +
                                  " in one copy: " + why);
    slot.dst_state.store(why.empty() ? kDstWritten : kDstFailed, std::memory_order_release);
    if (link_->single_tx->receiver_waits.exchange(0, std::memory_order_acq_rel) != 0) host_.doorbell_locked(peer_);
  }
  // In order: a slot is used again only once every earlier one is free.
  while (!announced_.empty() &&
         tx_slot(announced_.front().number).src_state.load(std::memory_order_acquire) == kSrcDone) {
    Announced& a = announced_.front();
    if (a.request) a.request->complete(a.error, peer_);
    announced_.pop_front();
  }
}

void ShmPath::withdraw_locked(Announced& a, const std::exception_ptr& error) {
  if (!a.request) return;
  SingleCopySlot& slot = tx_slot(a.number);
  uint32_t src = kSrcPosted;
  const bool withdrawn = slot.src_state.compare_exchange_strong(src, kSrcWithdrawn, std::memory_order_acq_rel);
  // Nobody writes into the receiver's buffer from now on.
  for (uint32_t from : {kDstUnanswered, kDstWanted}) {
    uint32_t expected = from;
    if (slot.dst_state.compare_exchange_strong(expected, kDstRevoked, std::memory_order_acq_rel)) break;
  }
  // A read under way ends within one copy: the buffer is the caller's again
  // once this returns.
  if (!withdrawn && src == kSrcReading) {
    if (!wait_while(link_->peer, [&] { return slot.src_state.load(std::memory_order_acquire) == kSrcReading; }))
      TDIST_LOG(LogLevel::Warn, "rank " << peer_ << " (pid " << link_->peer.pid
                                        << ") still reads a failed send's buffer after " << kLongestPartWait.count()
                                        << " s");
  }
  // A receiver done with the slot has the message (it settled the second
  // half before saying so): the send succeeded, whatever stopped it since.
  const bool delivered = !withdrawn && slot.src_state.load(std::memory_order_acquire) == kSrcDone;
  a.request->complete(delivered ? a.error : error, peer_);
  a.request.reset();
}

bool ShmPath::receive_single_copy() {
  wire::MessageHeader header = header_;
  header.magic = wire::kMessageMagic;
  MessageSlot target;
  // A message that arrives just before its receive is posted (the next step
  // of a ping-pong) waits a moment for it: buffered instead, it would be read
  // whole here and copied again when the receive comes. After one waited in
  // vain, the next are buffered at once until one finds its receive posted:
  // a burst of sends ahead of their receives waits once.
  bool waiting = false;
  char* dst = host_.begin_posted_message(peer_, header, target, waiting);
  if (waiting && patient_ && std::chrono::steady_clock::now() - parked_since_ < kLongestPark) return false;
  parked_ = false;
  const uint64_t number = single_received_++;
  SingleCopySlot& slot = rx_slot(number);
  const size_t size = header_.size;
  // The sender's buffer is claimed first: a send withdrawn before (its group
  // aborted) is dropped here, failing its receive if one was posted.
  uint32_t src = kSrcPosted;
  if (!slot.src_state.compare_exchange_strong(src, kSrcReading, std::memory_order_acq_rel)) {
    release_rx_slot(number, /*ring_now=*/true);
    if (target.request)
      target.request->complete(
          single_copy_error("receiving " + std::to_string(size) + " bytes from " + host_.describe_peer(peer_) +
                            " in one copy: it withdrew the message (its send failed)"),
          peer_);
    return true;
  }
  patient_ = !waiting;
  if (waiting) dst = host_.begin_message(peer_, header, target);
  // A receive posted with its buffer: the sender writes the second half meanwhile.
  size_t split = size;
  if (dst && target.request && size >= kLeastSplitBytes) split = size / 2 / 4096 * 4096;
  if (split < size) {
    slot.dst.store(reinterpret_cast<uintptr_t>(dst + split), std::memory_order_relaxed);
    slot.split.store(split, std::memory_order_relaxed);
  }
  uint32_t unanswered = kDstUnanswered;
  if (!slot.dst_state.compare_exchange_strong(unanswered, split < size ? kDstWanted : kDstNone,
                                              std::memory_order_acq_rel))
    split = size;  // the sender gave up its half (its send failed): this side reads it all
  else if (split < size && link_->single_rx->sender_waits.exchange(0, std::memory_order_acq_rel) != 0)
    host_.doorbell(peer_);
  const char* from = reinterpret_cast<const char*>(static_cast<uintptr_t>(slot.src.load(std::memory_order_relaxed)));
  std::string why;
  if (dst && split > 0) why = read_peer_memory(link_->peer.pid, from, dst, split);
  // A sender that has not begun its half by now is not running (more ranks
  // than cores): the receiver reads that half too rather than wait for it.
  uint32_t wanted = kDstWanted;
  if (why.empty() && split < size &&
      slot.dst_state.compare_exchange_strong(wanted, kDstTaken, std::memory_order_acq_rel)) {
    why = read_peer_memory(link_->peer.pid, from + split, dst + split, size - split);
    split = size;
  }
  std::exception_ptr error;
  if (!why.empty())
    error = single_copy_error("receiving " + std::to_string(size) + " bytes from " + host_.describe_peer(peer_) +
                              " in one copy: " + why);
  if (split < size) {
    Splitting s{number, size, split, dst + split, std::move(target), error};
    wanted = kDstWanted;
    if (error && slot.dst_state.compare_exchange_strong(wanted, kDstRevoked, std::memory_order_acq_rel)) {
      finish_splitting(s, kDstRevoked, /*ring_now=*/true);
      return true;
    }
    splitting_.push_back(std::move(s));
    return true;
  }
  // Read whole or dropped: done with the slot.
  release_rx_slot(number, /*ring_now=*/true);
  if (!error && dst) count_single_copy_message();
  if (!error) {
    host_.end_message(peer_, target);
  } else if (target.request) {
    target.request->complete(error, peer_);
  } else if (target.buffered) {
    // The kernel refused the read: no receive to fail yet, and a later one
    // must not take what was never read.
    broken_ = true;
    host_.path_failed(peer_, error);
  }
  return true;
}

bool ShmPath::settle_splitting() {
  bool any = false;
  for (auto it = splitting_.begin(); it != splitting_.end();) {
    const uint32_t state = rx_slot(it->number).dst_state.load(std::memory_order_acquire);
    if (state == kDstWanted || state == kDstWriting) {
      ++it;
      continue;
    }
    finish_splitting(*it, state, /*ring_now=*/true);
    it = splitting_.erase(it);
    any = true;
  }
  return any;
}

void ShmPath::finish_splitting(Splitting& s, uint32_t state, bool ring_now) {
  std::exception_ptr error = s.error;
  if (!error && state == kDstRevoked) {
    // The sender gave up its half (its send failed) while this side still
    // holds its buffer: this side reads that half too.
    const char* from =
        reinterpret_cast<const char*>(static_cast<uintptr_t>(rx_slot(s.number).src.load(std::memory_order_relaxed)));
    const std::string why = read_peer_memory(link_->peer.pid, from + s.split, s.rest, s.size - s.split);
    if (why.empty()) state = kDstWritten;
  }
  if (!error && state != kDstWritten)
    error = single_copy_error(
        "receiving " + std::to_string(s.size) + " bytes from " + host_.describe_peer(peer_) +
        " in one copy: " + (state == kDstFailed ? "its write of the second half failed" : "the read failed"));
  release_rx_slot(s.number, ring_now);
  if (!error) {
    count_single_copy_message();
    host_.end_message(peer_, s.slot);
  } else if (s.slot.request) {
    s.slot.request->complete(error, peer_);
    s.slot.request.reset();
  }
}

void ShmPath::release_rx_slot(uint64_t number, bool ring_now) {
  rx_slot(number).src_state.store(kSrcDone, std::memory_order_release);
  if (link_->single_rx->sender_waits.exchange(0, std::memory_order_acq_rel) == 0) return;
  if (ring_now)
    host_.doorbell(peer_);
  else
    owe_doorbell_ = true;  // rung by the next poll()
}

void ShmPath::fail_pending_receives_locked(const uint32_t* comm, const std::exception_ptr& error) {
  for (auto it = splitting_.begin(); it != splitting_.end();) {
    if (comm && (!it->slot.request || it->slot.request->comm() != *comm)) {
      ++it;
      continue;
    }
    SingleCopySlot& slot = rx_slot(it->number);
    uint32_t state = kDstWanted;
    if (slot.dst_state.compare_exchange_strong(state, kDstRevoked, std::memory_order_acq_rel)) {
      state = kDstRevoked;
    } else if (state == kDstWriting) {
      // The write under way ends within one copy: the buffer is the caller's
      // again once this returns.
      if (!wait_while(link_->peer, [&] { return slot.dst_state.load(std::memory_order_acquire) == kDstWriting; }))
        TDIST_LOG(LogLevel::Warn, "rank " << peer_ << " (pid " << link_->peer.pid
                                          << ") still writes into a failed receive's buffer after "
                                          << kLongestPartWait.count() << " s");
      state = slot.dst_state.load(std::memory_order_acquire);
    }
    // A peer lost after it wrote its half has delivered the message (as one
    // that sent through the ring and exited); an aborted group fails it.
    it->error = comm == nullptr && state == kDstWritten ? nullptr : error;
    // The mesh's locks are held: the sender's doorbell waits for the next poll().
    finish_splitting(*it, state, /*ring_now=*/false);
    it = splitting_.erase(it);
  }
}

}  // namespace tdist
