#include "analysis.h"

#include <algorithm>
#include <map>
#include <set>

#include "check_util.h"
#include "checks.h"
#include "group_view.h"
#include "text.h"

namespace ttrace {

const char* finding_kind_name(FindingKind k) {
  switch (k) {
    case FindingKind::kMismatch: return "mismatch";
    case FindingKind::kMissingDump: return "missing_dump";
    case FindingKind::kNeverEntered: return "never_entered";
    case FindingKind::kWaiting: return "waiting";
    case FindingKind::kFailed: return "failed";
    case FindingKind::kInconsistent: return "inconsistent";
    case FindingKind::kSlowRank: return "slow_rank";
    case FindingKind::kInfo: return "info";
  }
  return "?";
}

size_t Report::problems() const {
  return static_cast<size_t>(std::count_if(findings.begin(), findings.end(),
                                           [](const Finding& f) { return f.severity == Severity::kProblem; }));
}

namespace {

// The world size most dumps give; a finding when they disagree.
int64_t world_size_of(const std::vector<Dump>& dumps, std::vector<Finding>& out) {
  std::map<int64_t, std::vector<int>> sizes;
  for (const Dump& d : dumps)
    if (d.info.world_size != 0) sizes[d.info.world_size].push_back(d.info.rank);
  int64_t best = 0;
  size_t votes = 0;
  for (const auto& [size, ranks] : sizes)
    if (ranks.size() >= votes) best = size, votes = ranks.size();
  if (sizes.size() > 1) {
    std::string says;
    JsonValue data = JsonValue::object();
    for (const auto& [size, ranks] : sizes) {
      says += (says.empty() ? "" : ", ") + ranks_phrase(ranks) + (ranks.size() == 1 ? " says " : " say ") + std::to_string(size);
      data.set(std::to_string(size), ranks_json(ranks));
    }
    Finding f = make_finding(FindingKind::kInconsistent, Severity::kProblem, nullptr, -1,
                             "the dumps disagree on the world size: " + says +
                                 " (dumps of different runs in one folder?).");
    f.data.set("world_sizes", std::move(data));
    out.push_back(std::move(f));
  }
  return best;
}

std::vector<DumpReason> reasons_of(const std::vector<Dump>& dumps) {
  std::vector<DumpReason> reasons;
  for (const Dump& d : dumps) {
    auto it = std::find_if(reasons.begin(), reasons.end(), [&](const DumpReason& r) { return r.reason == d.reason; });
    if (it == reasons.end()) {
      reasons.push_back({d.reason, d.detail, d.info.rank, true, {d.info.rank}});
    } else {
      it->ranks.push_back(d.info.rank);
      it->same_detail = it->same_detail && it->detail == d.detail;
    }
  }
  return reasons;
}

void missing_dumps(const AnalysisInput& in, int64_t world_size, const std::vector<GroupView>& views,
                   std::vector<Finding>& out) {
  // Ranks are below kMaxRanks (the readers check): a flag per rank.
  std::vector<char> expected(static_cast<size_t>(kMaxRanks), 0);
  for (int64_t r = 0; r < world_size; ++r) expected[static_cast<size_t>(r)] = 1;
  for (const GroupView& v : views)
    for (int r : v.members) expected[static_cast<size_t>(r)] = 1;
  for (const Dump& d : in.dumps) expected[static_cast<size_t>(d.info.rank)] = 0;
  for (const auto& [rank, why] : in.unreadable) {
    expected[static_cast<size_t>(rank)] = 0;
    Finding f = make_finding(FindingKind::kMissingDump, Severity::kProblem, nullptr, -1,
                             "rank " + std::to_string(rank) + "'s dump cannot be read, so it is left out: " +
                                 printable(why, 400));
    f.data.set("ranks", ranks_json({rank}));
    f.data.set("unreadable", JsonValue::boolean(true));
    f.data.set("error", JsonValue::string(why));
    out.push_back(std::move(f));
  }
  std::vector<int> missing;
  for (size_t r = 0; r < expected.size(); ++r)
    if (expected[r] != 0) missing.push_back(static_cast<int>(r));
  if (missing.empty()) return;
  const bool one = missing.size() == 1;
  Finding f = make_finding(
      FindingKind::kMissingDump, Severity::kProblem, nullptr, -1,
      std::string(one ? "no dump from " : "no dumps from ") + ranks_phrase(missing) + " (expected " + in.pattern +
          "): " + (one ? "it" : "they") + " left the job, " + (one ? "was" : "were") + " killed, or did not dump.");
  if (views.size() > 1) {
    std::string groups;
    for (const GroupView& v : views)
      if (!v.missing.empty()) groups += (groups.empty() ? "" : ", ") + printable(v.name, 80) + " (" + ranks_phrase(v.missing) + ")";
    if (!groups.empty()) f.details.push_back("Members of " + groups + ".");
  }
  f.data.set("ranks", ranks_json(missing));
  out.push_back(std::move(f));
}

}  // namespace

Report analyse(const AnalysisInput& in) {
  Report r;
  r.pattern = in.pattern;
  for (const Dump& d : in.dumps) r.dumped.push_back(d.info.rank);
  r.reasons = reasons_of(in.dumps);
  r.world_size = world_size_of(in.dumps, r.findings);

  std::vector<int> unreadable;
  for (const auto& u : in.unreadable) unreadable.push_back(u.first);
  const std::vector<GroupView> views = group_views(in.dumps, unreadable);
  missing_dumps(in, r.world_size, views, r.findings);

  for (const GroupView& v : views) {
    GroupSummary s;
    s.name = v.name;
    s.members = v.members;
    s.dumped = v.dumped_ranks();
    for (const MemberView& m : v.dumped) s.last_seq = std::max(s.last_seq, m.last_seq);
    check_mismatch(v, r.findings);
    check_progress(v, r.findings);
    check_failures(v, r.findings);
    check_membership(v, r.findings);
    check_slowest(v, in.slow_ms, s, r.findings);
    r.groups.push_back(std::move(s));
  }

  std::stable_sort(r.findings.begin(), r.findings.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity == Severity::kProblem;
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.group_order != b.group_order) return a.group_order < b.group_order;
    return a.seq < b.seq;
  });
  return r;
}

}  // namespace ttrace
