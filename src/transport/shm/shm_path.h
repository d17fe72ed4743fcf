// The shared-memory data path between two ranks of one host ("shm" in
// TDIST_TRANSPORTS): one segment per pair holding a ring in each direction,
// framed as a socket is (header, then payload), copied straight between the
// ring and the user's buffers. The pair's control socket (transport/tcp/)
// carries its doorbells and give-up notices, and tells when the peer is gone.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/data_path.h"
#include "transport/shm/shm_ring.h"
#include "util/deadline.h"
#include "util/shm_segment.h"

namespace tdist {

struct ShmLink {
  ShmSegment segment;
  ShmRing tx;  // this rank -> peer
  ShmRing rx;  // peer -> this rank

  // Segment layout: control(low->high), control(high->low), data(low->high), data(high->low).
  static size_t segment_bytes(size_t ring_bytes) { return 2 * sizeof(ShmRingControl) + 2 * ring_bytes; }
  // The creator sets up both rings' controls before offering the segment.
  static void init_controls(ShmSegment& seg);
  // Views both rings; `is_low` says whether this rank is the lower of the pair.
  ShmLink(ShmSegment seg, size_t ring_bytes, bool is_low);
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

  void post_locked(std::shared_ptr<Request> request) override;
  void flush_locked() override;
  bool backlog() const override { return backlog_.load(std::memory_order_relaxed); }
  void fail_sends_locked(const std::exception_ptr& error) override;
  void abandon_sends_locked(uint32_t comm, const std::exception_ptr& error) override;
  bool prepare_sleep_locked() override;
  bool poll() override;
  bool prepare_sleep() override;
  MessageSlot& incoming() override { return rx_slot_; }
  void discard_incoming() override { dst_ = nullptr; }

 private:
  struct Outgoing {
    wire::MessageHeader header;
    std::shared_ptr<Request> request;
    size_t sent = 0;  // header and payload bytes written
  };

  const std::unique_ptr<ShmLink> link_;
  PathHost& host_;
  const int peer_;
  // Sending (the peer's send lock).
  std::deque<Outgoing> txq_;
  // txq_ is not empty: set under the send lock, read without it by pollers
  // (a spinning waiter polls the rings every round, and takes no lock while
  // nothing is queued).
  std::atomic<bool> backlog_{false};
  // Receiving (the mesh's receive lock).
  bool in_payload_ = false;
  wire::MessageHeader header_{};
  char* dst_ = nullptr;  // nullptr: discard the payload
  size_t payload_done_ = 0;
  MessageSlot rx_slot_;
  bool broken_ = false;  // the peer broke the framing: nothing more is read
};

}  // namespace tdist
