#include "timeline_lanes.h"

namespace ttrace {

namespace {
constexpr int64_t kOpLanes = 3;
}  // namespace

LaneLayout::Group& LaneLayout::group(const std::string& name) {
  auto [it, added] = index_.emplace(name, groups_.size());
  if (added) groups_.emplace_back();
  return groups_[it->second];
}

void LaneLayout::note_group(const std::string& name) { group(name); }

void LaneLayout::note_step_thread(const std::string& name, int64_t thread) { group(name).step_threads.insert(thread); }

void LaneLayout::number() {
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].first_tid != 0) continue;
    groups_[g].first_tid = next_tid_;
    next_tid_ += kOpLanes;
    for (int64_t thread : groups_[g].step_threads) step_tids_.emplace(std::pair(g, thread), next_tid_++);
  }
}

int64_t LaneLayout::op_lane(const std::string& name, OpLane lane) {
  Group& g = group(name);
  if (g.first_tid == 0) {
    g.first_tid = next_tid_;
    next_tid_ += kOpLanes;
  }
  return g.first_tid + static_cast<int64_t>(lane);
}

int64_t LaneLayout::step_lane(const std::string& name, int64_t thread) {
  op_lane(name, OpLane::kCollectives);  // the group's own lanes first, when it is new
  auto [it, added] = step_tids_.emplace(std::pair(index_.at(name), thread), next_tid_);
  if (added) ++next_tid_;
  return it->second;
}

}  // namespace ttrace
