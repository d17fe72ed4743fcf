// The error monitored_barrier raises on rank 0 when ranks did not arrive, in
// torch's words (logs and torch's own tests grep for them), shared by the
// backends that implement it.
#pragma once

#include <string>
#include <vector>

#include "util/deadline.h"

namespace tdist {

// `missing`: global ranks, first missing first. `no_time_left`: the timeout
// was 0, so rank 0 had no time to wait at all: then, as Gloo,
// rank 0 says it timed out, and names who had not arrived. `peers`: how to
// reach them ("" to leave out).
inline std::string monitored_barrier_failure(const std::vector<int>& missing, Millis timeout, bool wait_all_ranks,
                                             bool no_time_left, const std::string& peers) {
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
  const std::string ranks = std::string(missing.size() > 1 ? "Ranks " : "Rank ") + list;
  const std::string ms = std::to_string(timeout.count()) + " ms";
  std::string what = no_time_left
                         ? "[Rank 0]: Rank 0 timed out in monitoredBarrier after " + ms + ", before " + ranks + " had passed it"
                         : "[Rank 0]: " + ranks + " failed to pass monitoredBarrier in " + ms;
  std::string detail = wait_all_ranks || missing.size() > 1 ? "" : "the first one missing";
  if (!peers.empty()) detail += (detail.empty() ? "" : "; ") + peers;
  return detail.empty() ? what : what + " (" + detail + ")";
}

}  // namespace tdist
