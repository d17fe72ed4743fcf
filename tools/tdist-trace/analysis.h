// What went wrong, from every rank's flight recorder dump: the checks' findings, most
// important first, and a summary per group.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "json.h"
#include "records.h"

namespace ttrace {

enum class Severity { kProblem, kNote };

// Findings sort by kind first (this order), then by group and sequence number.
enum class FindingKind {
  kMismatch,       // members disagree on a collective
  kMissingDump,    // a rank that should have dumped did not (or its dump is unreadable)
  kNeverEntered,   // a rank never entered a collective others entered
  kWaiting,        // members were inside a collective when they dumped
  kFailed,         // failed operations and their errors
  kInconsistent,   // dumps disagree on world size or on a group's members; a member lacks the group
  kSlowRank,       // one rank entered last most of the time
  kInfo,           // anything else worth a line
};
const char* finding_kind_name(FindingKind k);

struct Finding {
  FindingKind kind = FindingKind::kInfo;
  Severity severity = Severity::kProblem;
  std::string group;  // "" when about the whole job
  int64_t seq = -1;
  std::string message;               // one sentence
  std::vector<std::string> details;  // lines that follow it
  JsonValue data = JsonValue::object();  // the same, for --json
  size_t group_order = 0;
};

struct SlowestRank {
  int rank = -1;
  int64_t last_count = 0;      // collectives it entered last
  int64_t collectives = 0;     // completed collectives compared
  int64_t first_seq = 0, last_seq = 0;
  int64_t median_behind_first_us = 0;  // when it was last: its entry minus the first rank's
  int64_t median_behind_next_us = 0;   // ... minus the next-to-last rank's
  bool problem = false;
};

struct GroupSummary {
  std::string name;
  std::vector<int> members;
  std::vector<int> dumped;  // members whose dump records this group
  int64_t last_seq = 0;     // highest collective seq any member entered
  std::optional<SlowestRank> slowest;
};

// The ranks that dumped for one reason, and the detail (the error) of the first of them.
struct DumpReason {
  std::string reason;
  std::string detail;
  int detail_rank = -1;
  bool same_detail = true;  // every one of ranks gave this detail
  std::vector<int> ranks;
};

struct Report {
  std::string pattern;  // "DIR/tdist_fr_<rank>.json"
  int64_t world_size = 0;
  std::vector<int> dumped;  // ranks whose dumps were read
  std::vector<DumpReason> reasons;
  std::vector<GroupSummary> groups;
  std::vector<Finding> findings;  // most important first
  size_t problems() const;
};

struct AnalysisInput {
  std::vector<Dump> dumps;                           // read, in rank order
  std::vector<std::pair<int, std::string>> unreadable;  // rank, why
  std::string pattern;                               // where a rank's dump is expected
  double slow_ms = 1.0;  // a rank last most of the time is a problem when this much behind (median)
};

Report analyse(const AnalysisInput& input);

}  // namespace ttrace
