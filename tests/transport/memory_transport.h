// A transport in memory, for testing algorithms alone: the ranks are threads
// of one process, a message is a copy in a shared fabric, and the fabric can
// be told to deliver messages out of order (within what Transport promises:
// the same tag between the same two ranks stays in order), to delay them, to
// place the ranks on several emulated hosts, and to lose the k-th message
// (its send fails; its receive then meets its deadline). Sends complete at
// once (the fabric buffers everything), so it shows algorithms that depend on
// a peer reading first, only by the deadlocks the reordering exposes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "transport/transport.h"

namespace tdist::testing {

struct FabricFaults {
  unsigned seed = 1;
  bool reorder = false;                     // deliver in a random order where Transport allows it
  std::chrono::microseconds max_delay{0};   // each message waits up to this long before delivery
  long lose_message = -1;                   // the k-th send of the whole fabric (from 0) fails and is lost
  int ranks_per_host = 0;                   // >0: ranks r and q share a host iff r / k == q / k
};

class MemoryFabric {
 public:
  MemoryFabric(int size, FabricFaults faults = {});
  // The transport of `rank`: use it from that rank's thread (any thread may
  // wait on any of its requests).
  std::unique_ptr<Transport> endpoint(int rank);
  // How many messages were sent so far (to pick a k for lose_message).
  long messages_sent() const;

 private:
  friend class MemoryTransport;
  struct Message {
    int from, to;
    uint64_t tag;
    std::vector<char> data;
    std::chrono::steady_clock::time_point due;
    uint64_t key;  // random order among the deliverable ones
  };
  // Moves deliverable messages to their receivers and matches posted
  // receives (mu_ held).
  void deliver_locked();
  bool same_host(int a, int b) const;
  std::string host_of(int rank) const;
  void match_locked(int rank);

  const int size_;
  const FabricFaults faults_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::mt19937_64 rng_;
  long sent_ = 0;
  std::list<Message> in_flight_;
  std::vector<std::deque<Message>> arrived_;                  // by receiver, in arrival order
  std::vector<std::deque<std::shared_ptr<Request>>> posted_;  // by receiver, in post order
  std::vector<std::exception_ptr> aborted_;                   // by rank
};

}  // namespace tdist::testing
