#include "init/clock_offset.h"

#include <string>

#include "tdist/errors.h"
#include "trace/recorder_registry.h"
#include "util/deadline.h"
#include "util/settings.h"
#include "util/logging.h"
#include "util/tick_clock.h"

namespace tdist {

namespace {

int64_t parse_us(const std::string& text, int peer) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw DistError("clock offset: rank 0 answered rank " + std::to_string(peer) + " with '" + text.substr(0, 32) +
                  "', not a time in microseconds");
}

}  // namespace

// An exchange in two rounds per rank, served by rank 0 one rank at a time:
// the first only brings rank 0 to wait for this rank, so that in the second
// each side's message travels the same path (a set, then the other's wait or
// get returns). Rank 0's reading then falls half way through the rank's round
// trip, give or take half of it: the error bound recorded.
void measure_clock_offset_if_traced(Store& store, int rank, int world_size, std::chrono::milliseconds timeout) {
  const bool traced = settings::get<"TDIST_TRACE">().has_value() || !trace::dump_destination(0).empty();
  if (!traced || world_size < 2) return;
  const auto key = [](const char* what, int r) { return std::string("clock/") + what + "/" + std::to_string(r); };
  if (rank == 0) {
    // One deadline for them all: a rank that died since init costs one timeout, not one each.
    const Deadline deadline = Deadline::after(timeout);
    trace::set_clock_offset(0, 0);
    for (int r = 1; r < world_size; ++r) {
      try {
        store.wait({key("ready", r)}, deadline.remaining());
        store.set(key("go", r), "");
        store.wait({key("ping", r)}, deadline.remaining());
        store.set(key("pong", r), std::to_string(realtime_us_now()));
      } catch (const std::exception& e) {
        TDIST_LOG(LogLevel::Warn, "rank 0: measuring the ranks' clock offsets stopped at rank "
                                      << r << " (" << e.what() << "); ranks " << r << " to " << world_size - 1
                                      << " trace with offset 0");
        return;
      }
    }
    return;
  }
  try {
    store.set(key("ready", rank), "");
    store.get(key("go", rank));
    const int64_t sent = realtime_us_now();
    store.set(key("ping", rank), "");
    const int64_t theirs = parse_us(store.get(key("pong", rank)), rank);
    const int64_t back = realtime_us_now();
    trace::set_clock_offset((sent + back) / 2 - theirs, (back - sent + 1) / 2);
  } catch (const std::exception& e) {
    // Timelines merge less exactly; the job itself is not at stake.
    TDIST_LOG(LogLevel::Warn, "rank " << rank << ": could not measure the clock offset to rank 0 (" << e.what()
                                      << "); its traces use offset 0");
  }
}

}  // namespace tdist
