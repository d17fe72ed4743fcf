// One group seen across the dumps: its members, and for each member that dumped, its record
// of the group with the collectives by sequence number.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "records.h"

namespace ttrace {

struct MemberView {
  int rank = 0;
  const Dump* dump = nullptr;
  const GroupRecord* record = nullptr;
  std::map<int64_t, const Entry*> collectives;  // by seq (p2p left out)
  int64_t last_seq = 0;                         // 0: entered none

  const Entry* at(int64_t seq) const {
    auto it = collectives.find(seq);
    return it == collectives.end() ? nullptr : it->second;
  }
  // A time of this rank's clock on rank 0's.
  int64_t aligned(int64_t us) const { return us - dump->info.clock_offset_us; }
};

struct GroupView {
  std::string name;
  size_t order = 0;            // the order groups are reported in
  std::vector<int> members;    // from the lowest rank that dumped it
  std::vector<MemberView> dumped;  // members whose dumps record the group (recorder on)
  std::vector<int> missing;    // members without a readable dump
  std::vector<int> absent;     // members whose dump lacks this group
  std::vector<int> off;        // members whose recorder for this group holds nothing (capacity 0)
  std::vector<std::pair<int, std::vector<int>>> other_members;  // rank, the member list it has

  std::vector<int> dumped_ranks() const;
};

// Every group named in the dumps, in the order the lowest ranks list them. A member whose dump
// could not be read (unreadable) is in none of the lists: the caller reports it.
std::vector<GroupView> group_views(const std::vector<Dump>& dumps, const std::vector<int>& unreadable);

}  // namespace ttrace
