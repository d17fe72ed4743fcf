// Helpers shared by the store implementations: message formatting for keys,
// saturating deadlines, counters kept as decimal text.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/deadline.h"

namespace tdist::store_detail {

// 'key' with non-printable bytes escaped (\xNN), long keys shortened.
std::string quote(const std::string& key);
// ['a', 'b', ...] with at most a few keys shown, then "(N more)".
std::string quote_list(const std::vector<std::string>& keys);

// Timeouts beyond this are treated as "never" (a year: no realistic store wait is longer).
inline constexpr Millis kForever{365LL * 24 * 3600 * 1000};
// Deadline::after without overflow for huge timeouts; negative timeouts count as 0.
Deadline deadline_after(Millis timeout);
// A time point for condition_variable::wait_until that never overflows.
Clock::time_point time_after(Millis timeout);

// Counters are stored as decimal text (so get() of a counter returns it).
std::string counter_text(int64_t v);
std::optional<int64_t> parse_counter(const std::string& text);

// Keys that are not yet in `present`, keeping their order and dropping duplicates.
template <typename Pred>
std::vector<std::string> missing_keys(const std::vector<std::string>& keys, Pred present) {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (present(k)) continue;
    bool dup = false;
    for (const auto& m : out) dup = dup || m == k;
    if (!dup) out.push_back(k);
  }
  return out;
}

}  // namespace tdist::store_detail
