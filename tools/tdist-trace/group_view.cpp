#include "group_view.h"

#include <algorithm>
#include <set>

namespace ttrace {

std::vector<int> GroupView::dumped_ranks() const {
  std::vector<int> ranks;
  for (const auto& m : dumped) ranks.push_back(m.rank);
  return ranks;
}

std::vector<GroupView> group_views(const std::vector<Dump>& dumps, const std::vector<int>& unreadable) {
  std::vector<GroupView> views;
  std::map<std::string, size_t> index;
  std::map<int, const Dump*> by_rank;
  for (const Dump& d : dumps) by_rank[d.info.rank] = &d;

  for (const Dump& d : dumps) {
    for (const GroupRecord& g : d.groups) {
      if (index.count(g.name) != 0) continue;
      index[g.name] = views.size();
      GroupView v;
      v.name = g.name;
      v.order = views.size();
      v.members = g.ranks;
      views.push_back(std::move(v));
    }
  }
  for (GroupView& v : views) {
    for (int rank : v.members) {
      auto it = by_rank.find(rank);
      if (it == by_rank.end()) {
        if (std::find(unreadable.begin(), unreadable.end(), rank) == unreadable.end()) v.missing.push_back(rank);
        continue;
      }
      const GroupRecord* g = it->second->group(v.name);
      if (g == nullptr) {
        v.absent.push_back(rank);
        continue;
      }
      if (g->ranks != v.members) v.other_members.emplace_back(rank, g->ranks);
      if (g->capacity == 0) {
        v.off.push_back(rank);
        continue;
      }
      MemberView m;
      m.rank = rank;
      m.dump = it->second;
      m.record = g;
      for (const Entry& e : g->entries) {
        if (e.p2p) continue;
        m.collectives[e.seq] = &e;
        m.last_seq = std::max(m.last_seq, e.seq);
      }
      v.dumped.push_back(std::move(m));
    }
    // Dumps that have the group without being in its member list.
    for (const Dump& d : dumps) {
      const GroupRecord* g = d.group(v.name);
      if (g != nullptr && std::find(v.members.begin(), v.members.end(), d.info.rank) == v.members.end())
        v.other_members.emplace_back(d.info.rank, g->ranks);
    }
  }
  return views;
}

}  // namespace ttrace
