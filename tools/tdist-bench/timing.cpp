#include "timing.h"

#include <chrono>

namespace tbench {

double time_loop(Comm& comm, const std::function<void()>& run, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) run();
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) run();
  const auto t1 = std::chrono::steady_clock::now();
  const double mine = std::chrono::duration<double>(t1 - t0).count() / (iters > 0 ? iters : 1);
  return comm.max_double(mine);
}

}  // namespace tbench
