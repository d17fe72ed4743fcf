// The process-wide state of torch.distributed: the default group and its store.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "tdist/distributed.h"

namespace tdist {

struct World {
  std::mutex mu;
  Group default_group;
  std::shared_ptr<Store> store;
  int generation = 0;  // how many times init_process_group ran in this process
};

World& world();
// The group an operation acts on: `group`, or the default one (DistError naming
// `op` when the package is not initialized).
Group resolve_group(const Group& group, const char* op);

}  // namespace tdist
