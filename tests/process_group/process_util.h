// Forked-process worlds for the free functions of distributed.h.
#pragma once

#include <chrono>
#include <functional>

#include "backends/process_world.h"
#include "process_group/coll_util.h"

namespace tdist::testing {

// Forks n ranks that init_process_group over a TCPStore with `timeout`, run
// body(rank), and destroy their groups; the test fails with every rank's
// outcome unless all succeed.
inline void run_world(int n, const std::function<void(int)>& body,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30),
                      std::chrono::milliseconds limit = std::chrono::seconds(90)) {
  Shared<PortBoard> board;
  auto results = run_in_processes(
      n,
      [&](int rank) {
        init_process_world(*board, rank, n, timeout);
        body(rank);
        tdist::destroy_process_group();
      },
      limit);
  EXPECT_EQ(describe_failures(results), "");
}

}  // namespace tdist::testing
