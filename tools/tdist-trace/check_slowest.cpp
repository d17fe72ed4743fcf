// (d) Which member entered last (the others waited for it), over the collectives that every
// member that dumped recorded as completed with times to the microsecond; entry times put on
// rank 0's clock.
#include <algorithm>
#include <map>

#include "check_util.h"
#include "checks.h"
#include "text.h"

namespace ttrace {

void check_slowest(const GroupView& g, double slow_ms, GroupSummary& summary, std::vector<Finding>& out) {
  if (g.dumped.size() < 2) return;
  struct PerRank {
    int64_t last = 0;
    std::vector<int64_t> behind_first, behind_next;
  };
  std::map<int, PerRank> per_rank;
  int64_t compared = 0, first_seq = 0, last_seq = 0;
  for (const auto& [seq, unused] : g.dumped.front().collectives) {
    int64_t latest = INT64_MIN, second = INT64_MIN, earliest = INT64_MAX;
    int latest_rank = -1;
    bool complete = true;
    for (const MemberView& m : g.dumped) {
      const Entry* e = m.at(seq);
      // Coarse times (the flight recorder's for small operations) cannot say who came last.
      if (e == nullptr || e->state != State::kCompleted || e->entered_us() == 0 || e->time_resolution_us > 1) {
        complete = false;
        break;
      }
      const int64_t t = m.aligned(e->entered_us());
      earliest = std::min(earliest, t);
      if (t > latest) {
        second = latest;
        latest = t;
        latest_rank = m.rank;
      } else {
        second = std::max(second, t);
      }
    }
    if (!complete) continue;
    if (compared == 0) first_seq = seq;
    last_seq = seq;
    ++compared;
    if (latest == second) continue;  // a tie: nobody waited for one rank
    PerRank& p = per_rank[latest_rank];
    ++p.last;
    p.behind_first.push_back(latest - earliest);
    p.behind_next.push_back(latest - second);
  }
  if (compared == 0 || per_rank.empty()) return;

  auto best = per_rank.begin();
  for (auto it = per_rank.begin(); it != per_rank.end(); ++it)
    if (it->second.last > best->second.last) best = it;
  SlowestRank s;
  s.rank = best->first;
  s.last_count = best->second.last;
  s.collectives = compared;
  s.first_seq = first_seq;
  s.last_seq = last_seq;
  s.median_behind_first_us = median(best->second.behind_first);
  s.median_behind_next_us = median(best->second.behind_next);
  // Last this often is more than chance: always, nearly, with 2 members; half the time with 4 or more.
  const double n = static_cast<double>(g.dumped.size());
  const double share_needed = std::max(0.5, std::min(0.9, 2.0 / n));
  const double share = static_cast<double>(s.last_count) / static_cast<double>(compared);
  s.problem = compared >= 5 && share >= share_needed &&
              static_cast<double>(s.median_behind_first_us) >= slow_ms * 1000.0;
  summary.slowest = s;
  if (!s.problem) return;

  Finding f = make_finding(
      FindingKind::kSlowRank, Severity::kProblem, &g, -1,
      "rank " + std::to_string(s.rank) + " entered last in " + std::to_string(s.last_count) + " of " +
          std::to_string(compared) + " completed collectives (#" + std::to_string(first_seq) + "-#" +
          std::to_string(last_seq) + "), a median " + duration_text(s.median_behind_first_us) +
          " after the first rank: the others waited for it.");
  f.details.push_back("Median " + duration_text(s.median_behind_next_us) +
                      " after the next-to-last rank (entry times on rank 0's clock).");
  f.data.set("rank", JsonValue::integer(s.rank));
  f.data.set("last_count", JsonValue::integer(s.last_count));
  f.data.set("collectives", JsonValue::integer(compared));
  f.data.set("median_behind_first_us", JsonValue::integer(s.median_behind_first_us));
  f.data.set("median_behind_next_us", JsonValue::integer(s.median_behind_next_us));
  out.push_back(std::move(f));
}

}  // namespace ttrace
