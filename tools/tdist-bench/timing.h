// The timed loop, identical for every runner: warm-up iterations, a barrier, the
// timed iterations, then the slowest rank's mean time per iteration.
#pragma once

#include <functional>

#include "comm.h"

namespace tbench {

// Seconds per iteration: MAX over ranks of each rank's mean.
double time_loop(Comm& comm, const std::function<void()>& run, int warmup, int iters);

}  // namespace tbench
