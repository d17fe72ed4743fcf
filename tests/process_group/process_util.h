// Forked-process worlds for the free functions of distributed.h.
#pragma once

#include <chrono>
#include <functional>

#include "backends/process_world.h"
#include "process_group/coll_util.h"
#include "util/socket.h"

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

// A port that was free a moment ago (bind to port 0, then release it): for
// worlds that init through tcp://, whose rank 0 serves the store there.
inline int free_port() {
  Fd fd = listen_tcp("127.0.0.1", 0);
  return local_port(fd.get());
}

}  // namespace tdist::testing
