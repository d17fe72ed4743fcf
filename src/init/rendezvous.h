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
};

Rendezvous rendezvous(const InitOptions& options);

// Every rank announces itself under `prefix`; returns when all world_size have,
// else DistError listing the ranks that did not arrive within the timeout.
void join_all_ranks(Store& store, const std::string& prefix, int rank, int world_size, Millis timeout,
                    const std::string& where);

}  // namespace tdist
