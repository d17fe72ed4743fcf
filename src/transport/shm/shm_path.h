// The shared-memory data path between two ranks of one host ("shm" in
// TDIST_TRANSPORTS): one segment per pair holding a ring in each direction,
// framed as a socket is (header, then payload), copied straight between the
// ring and the user's buffers; messages of TDIST_SHM_P2P_SINGLE_COPY_BYTES
// and more are only announced in the ring and move in one copy
// (shm_single_copy.h). The pair's control socket (transport/tcp/) carries
// its doorbells and give-up notices, and tells when the peer is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/data_path.h"
#include "transport/shm/shm_ring.h"
#include "transport/shm/shm_single_copy.h"
#include "util/deadline.h"
#include "util/shm_segment.h"

namespace tdist {

struct ShmLink {
  ShmSegment segment;
  ShmRing tx;  // this rank -> peer
  ShmRing rx;  // peer -> this rank
  SingleCopyControl* single_tx = nullptr;  // this rank -> peer (shm_single_copy.h)
  SingleCopyControl* single_rx = nullptr;  // peer -> this rank
  SingleCopyVerdicts* verdicts = nullptr;  // both ranks' verdicts, as each published its own
  bool is_low = false;
  // Large messages in one copy: who the peer said it is (its pid), the word
  // of this process that holds the peer's nonce, the nonce this rank gave it,
  // and this rank's own verdict on the peer (kept here, not in the segment
  // the peer may write): 0 not yet, 1 verified, 2 not, 3 being checked.
  SingleCopyIdentity peer;
  std::atomic<uint64_t>* probe_word = nullptr;  // new_probe_word()
  uint64_t nonce_given = 0;
  std::atomic<uint32_t> verdict{0};

  // Segment layout: control(low->high), control(high->low), data(low->high),
  // data(high->low), single copy(low->high), single copy(high->low), verdicts.
  static size_t single_copy_offset(size_t ring_bytes) {
    return (2 * sizeof(ShmRingControl) + 2 * ring_bytes + 63) / 64 * 64;
  }
  static size_t segment_bytes(size_t ring_bytes) {
    return single_copy_offset(ring_bytes) + 2 * sizeof(SingleCopyControl) + sizeof(SingleCopyVerdicts);
  }
  // The creator sets up both rings' controls before offering the segment.
  static void init_controls(ShmSegment& seg, size_t ring_bytes);
  // Views both rings; `is_low` says whether this rank is the lower of the pair.
  ShmLink(ShmSegment seg, size_t ring_bytes, bool is_low);
  // Checks the peer (probe_single_copy) and publishes the verdict: the lower
  // rank during the set-up, the higher one once the lower one's is in (any
  // thread, any number of times: the first does it).
  void verify(const std::string& label, const std::string& peer_name);
  // Whether this rank may send large messages in one copy now: both verdicts 1.
  bool single_copy_agreed() const {
    return verdict.load(std::memory_order_acquire) == 1 &&
           (is_low ? verdicts->high : verdicts->low).load(std::memory_order_acquire) == 1;
  }
  // The higher rank's verdict is due: the lower one published its own.
  bool verdict_due() const {
    return !is_low && verdict.load(std::memory_order_relaxed) == 0 &&
           verdicts->low.load(std::memory_order_acquire) != 0;
  }
};

// Ring capacity per direction: TDIST_SHM_RING_BYTES or 512 KiB.
size_t shm_ring_bytes();

// A peer on this host and its control socket (still blocking), for the set-up.
struct ShmCandidate {
  int peer;
  int fd;
  std::string name;  // "rank 3 (127.0.0.1:4567)", for errors
};

// Sets up a pair of rings with every candidate, over their control sockets:
// the lower rank of a pair offers a segment, the higher maps it and answers.
// Every candidate must take part (both ends of a pair run this), whether or
// not `enabled`: a rank that does not want rings declines. Returns, in the
// candidates' order, the link or null (the pair then uses another path).
// DistNetworkError on a protocol error or the deadline.
std::vector<std::unique_ptr<ShmLink>> connect_shm_links(int rank, const std::vector<ShmCandidate>& candidates,
                                                        bool enabled, Deadline deadline, const std::string& label);

class ShmPath final : public DataPath {
 public:
  ShmPath(std::unique_ptr<ShmLink> link, PathHost& host, int peer);
  ~ShmPath() override;

  void post_locked(std::shared_ptr<Request> request) override;
  void flush_locked() override;
  bool backlog() const override { return backlog_.load(std::memory_order_relaxed); }
  void fail_sends_locked(const std::exception_ptr& error) override;
  void abandon_sends_locked(uint32_t comm, const std::exception_ptr& error) override;
  bool prepare_sleep_locked() override;
  bool poll() override;
  bool prepare_sleep() override;
  bool drain() override {
    patient_ = false;  // a parked announcement is read into a buffer now
    return poll();
  }
  MessageSlot& incoming() override { return rx_slot_; }
  void discard_incoming() override { dst_ = nullptr; }
  void fail_pending_receives_locked(const uint32_t* comm, const std::exception_ptr& error) override;

 private:
  struct Outgoing {
    wire::MessageHeader header;
    std::shared_ptr<Request> request;
    size_t sent = 0;  // header and payload bytes written
    bool single_copy = false;  // announced only: its bytes go in one copy
  };
  // A send announced for one copy, until the receiver is done with its slot.
  struct Announced {
    std::shared_ptr<Request> request;  // null once completed (a withdrawn send waits for the slot)
    uint64_t number;                   // the message's number in this direction: its slot
    std::exception_ptr error;          // it completes with this (its write failed)
  };
  // A receive whose second part the sender writes.
  // Its sizes and buffer are kept here: the slot's copies lie in memory the
  // peer may write.
  struct Splitting {
    uint64_t number;
    size_t size;
    size_t split;  // the sender writes [split, size)
    char* rest;    // the receive buffer at split
    MessageSlot slot;
    std::exception_ptr error;  // it completes with this once the sender's part is settled
  };

  bool use_single_copy(size_t bytes);
  SingleCopySlot& tx_slot(uint64_t number) { return link_->single_tx->slots[number % SingleCopyControl::kSlots]; }
  SingleCopySlot& rx_slot(uint64_t number) { return link_->single_rx->slots[number % SingleCopyControl::kSlots]; }
  bool may_announce() const {
    return announced_.empty() || announced_sent_ - announced_.front().number < SingleCopyControl::kSlots;
  }
  // Sender: writes the parts receivers asked for, completes what is done.
  void serve_single_copies_locked();
  // Sender: gives up an announced message (withdraws what the receiver has not
  // begun, waits for what it has) and completes it with `error`.
  void withdraw_locked(Announced& a, const std::exception_ptr& error);
  // Receiver: the message announced in header_; false while it waits for its
  // receive (parked_).
  bool receive_single_copy();
  // Receiver: completes the split receives whose second part is settled; true if any did.
  bool settle_splitting();
  // `ring_now`: may ring the sender's doorbell here (not with the mesh's locks held).
  void finish_splitting(Splitting& s, uint32_t dst_state, bool ring_now);
  void release_rx_slot(uint64_t number, bool ring_now);
  std::exception_ptr single_copy_error(const std::string& what) const;

  const std::unique_ptr<ShmLink> link_;
  PathHost& host_;
  const int peer_;
  // Sending (the peer's send lock).
  std::deque<Outgoing> txq_;
  // txq_ is not empty: set under the send lock, read without it by pollers
  // (a spinning waiter polls the rings every round, and takes no lock while
  // nothing is queued).
  std::atomic<bool> backlog_{false};
  std::deque<Announced> announced_;  // in the order announced
  uint64_t announced_sent_ = 0;      // messages announced for one copy so far
  const size_t single_copy_bytes_;   // TDIST_SHM_P2P_SINGLE_COPY_BYTES; 0: never
  // Receiving (the mesh's receive lock).
  bool in_payload_ = false;
  wire::MessageHeader header_{};
  char* dst_ = nullptr;  // nullptr: discard the payload
  size_t payload_done_ = 0;
  MessageSlot rx_slot_;
  bool broken_ = false;  // the peer broke the framing: nothing more is read
  std::deque<Splitting> splitting_;
  uint64_t single_received_ = 0;  // messages announced for one copy by the peer so far
  bool owe_doorbell_ = false;     // a slot was freed where the doorbell could not be rung
  bool parked_ = false;           // header_ announces a message waiting for its receive
  bool patient_ = true;           // an announcement may wait for its receive (none waited in vain since one was taken)
  std::chrono::steady_clock::time_point parked_since_;
};

}  // namespace tdist
