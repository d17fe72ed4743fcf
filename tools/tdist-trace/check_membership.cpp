// Members whose dumps lack the group, disagree on its members, or recorded nothing for it.
#include "check_util.h"
#include "checks.h"
#include "text.h"

namespace ttrace {

void check_membership(const GroupView& g, std::vector<Finding>& out) {
  if (!g.absent.empty()) {
    Finding f = make_finding(FindingKind::kInconsistent, Severity::kProblem, &g, -1,
                             ranks_phrase(g.absent) + (g.absent.size() == 1 ? " dumped but has" : " dumped but have") +
                                 " no record of this group (did " + (g.absent.size() == 1 ? "it" : "they") +
                                 " create it with new_group?).");
    f.data.set("absent", ranks_json(g.absent));
    out.push_back(std::move(f));
  }
  for (const auto& [rank, members] : g.other_members) {
    Finding f = make_finding(FindingKind::kInconsistent, Severity::kProblem, &g, -1,
                             "rank " + std::to_string(rank) + " lists the members as " + rank_list(members) +
                                 ", the others as " + rank_list(g.members) +
                                 " (two different groups of one name, or dumps of different runs?).");
    f.data.set("rank", JsonValue::integer(rank));
    f.data.set("members", ranks_json(members));
    f.data.set("expected_members", ranks_json(g.members));
    out.push_back(std::move(f));
  }
  if (!g.off.empty()) {
    Finding f = make_finding(FindingKind::kInfo, Severity::kNote, &g, -1,
                             ranks_phrase(g.off) + (g.off.size() == 1 ? " records" : " record") +
                                 " nothing for this group (TDIST_FLIGHT_RECORDER_ENTRIES=0); left out of the checks.");
    f.data.set("off", ranks_json(g.off));
    out.push_back(std::move(f));
  }
}

}  // namespace ttrace
