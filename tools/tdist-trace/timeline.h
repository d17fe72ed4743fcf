// Merges every rank's operations into one Chrome trace event file (the JSON that Perfetto and
// chrome://tracing open): a process per rank ("rank N (host)"), a thread per group (and one for
// its point-to-point operations, and one per thread that ran its operations' steps), a complete
// event ("X") per operation and per step from start to end, on rank 0's clock (each rank's
// clock_offset_us subtracted), times relative to the earliest.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "timeline_source.h"

namespace ttrace {

struct TimelineOptions {
  bool queued_slices = false;  // the time between issue and start as its own slice ("GROUP queue")
};

struct TimelineStats {
  size_t ranks = 0;
  size_t groups = 0;
  size_t operations = 0;
  size_t steps = 0;
  size_t events = 0;  // in traceEvents, metadata included
  size_t skipped_lines = 0;
  int64_t time_origin_us = 0;  // rank 0's clock at ts 0
};

// Writes the merged trace to out. Throws InputError when a source cannot be read.
TimelineStats write_timeline(std::vector<std::unique_ptr<TimelineSource>>& sources, std::FILE* out,
                             const TimelineOptions& options);

}  // namespace ttrace
