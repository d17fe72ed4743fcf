// The threads (tids) of the merged timeline: per group its collectives, its point-to-point
// operations and its queue, then one lane per thread of the process that ran the group's steps.
// A lane has the same tid in every rank's process, and tids are in display order, so that a
// group's step lanes sit right under its own.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ttrace {

enum class OpLane { kCollectives = 0, kP2p = 1, kQueue = 2 };

class LaneLayout {
 public:
  // The first walk: every group and step thread, in order of appearance.
  void note_group(const std::string& group);
  void note_step_thread(const std::string& group, int64_t thread);
  // Numbers the lanes noted so far. Lanes asked for later (a file that grew between the walks)
  // get new tids after all of them.
  void number();

  int64_t op_lane(const std::string& group, OpLane lane);
  int64_t step_lane(const std::string& group, int64_t thread);
  size_t groups() const { return groups_.size(); }

 private:
  struct Group {
    std::set<int64_t> step_threads;
    int64_t first_tid = 0;  // 0: not numbered yet
  };
  Group& group(const std::string& name);

  std::map<std::string, size_t> index_;
  std::vector<Group> groups_;
  std::map<std::pair<size_t, int64_t>, int64_t> step_tids_;  // (group, thread) -> tid
  int64_t next_tid_ = 1;
};

}  // namespace ttrace
