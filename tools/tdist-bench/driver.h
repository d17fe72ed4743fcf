// The sweep: for every collective, type, op and size, both placements timed by
// time_loop, optionally checked, and reported. Shared by tdist-bench and
// bench/mpi_bench.cpp so that both measure the same way.
#pragma once

#include <string>

#include "comm.h"
#include "options.h"

namespace tbench {

// Returns the exit status: 0, 1 when --check found wrong elements, 2 on a
// usage error found only now (e.g. a root beyond the world size).
int run_benchmark(Comm& comm, const Options& options, const std::string& program);

// "Pid 1234 on hostname" for the header.
std::string describe_this_process();

}  // namespace tbench
