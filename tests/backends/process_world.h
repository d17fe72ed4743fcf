// Ranks as forked processes joined through a real TCPStore: rank 0 serves the
// store on a kernel-chosen port and hands it to the others through shared memory.
#pragma once

#include <memory>

#include "common/harness.h"
#include "tdist/tdist.h"

namespace tdist::testing {

// In a child: the store of a process world (rank 0 is the master).
inline std::shared_ptr<Store> process_world_store(PortBoard& board, int rank, int n,
                                                  std::chrono::milliseconds timeout) {
  TCPStoreOptions o;
  o.world_size = n;
  o.is_master = rank == 0;
  o.timeout = timeout;
  o.wait_for_workers = false;
  if (rank == 0) {
    auto store = std::make_shared<TCPStore>("127.0.0.1", 0, o);
    board.publish(store->port());
    return store;
  }
  return std::make_shared<TCPStore>("127.0.0.1", static_cast<uint16_t>(board.wait()), o);
}

// In a child: init_process_group over that store.
inline void init_process_world(PortBoard& board, int rank, int n, std::chrono::milliseconds timeout) {
  InitOptions o;
  o.store = process_world_store(board, rank, n, timeout);
  o.rank = rank;
  o.world_size = n;
  o.timeout = timeout;
  init_process_group(o);
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace tdist::testing
