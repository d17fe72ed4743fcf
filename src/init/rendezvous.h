// Turning init_process_group's arguments into a store, a rank and a world size:
// env://, tcp://host:port, file:///path (each with optional ?rank=&world_size=)
// or an explicit store.
#pragma once

#include <memory>
#include <string>

#include "tdist/distributed.h"
#include "util/deadline.h"

namespace tdist {

struct Rendezvous {
  std::shared_ptr<Store> store;
  int rank = -1;
  int world_size = -1;
  std::string where;  // "tcp://127.0.0.1:29500", "file:///tmp/x", "the given store": for messages
  // The store is this process's own (a HashStore): the group's backends need
  // none (mpi), so no rank waits for another through it.
  bool local_store = false;
  // Keeps MPI initialised while the default group lives (backends/mpi_launch.h).
  std::shared_ptr<void> mpi_hold;
};

Rendezvous rendezvous(const InitOptions& options);

// Every rank announces itself under `prefix`; returns when all world_size have,
// else DistError listing the ranks that did not arrive within the timeout.
void join_all_ranks(Store& store, const std::string& prefix, int rank, int world_size, Millis timeout,
                    const std::string& where);

}  // namespace tdist
