// Each rank's system clock against rank 0's, measured through the store when
// the default group forms, so that the timelines and dumps of several hosts
// line up (docs/trace_format.md: clock_offset_us). Measured only where
// something will be written out (TDIST_TRACE, a flight recorder destination):
// it costs rank 0 two store round trips per rank.
#pragma once

#include <chrono>

#include "tdist/store.h"

namespace tdist {

// Sets the process's clock offset (trace/recorder_registry.h) when it is wanted.
void measure_clock_offset_if_traced(Store& store, int rank, int world_size, std::chrono::milliseconds timeout);

}  // namespace tdist
