// What the flight recorder dumps and the timeline files hold, once read and checked
// (docs/trace_format.md). Plain data; the readers fill it, the analysis and the timeline use it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ttrace {

// Bounds on what a file may claim (beyond them the file is refused as bad input).
inline constexpr int64_t kMaxRanks = int64_t{1} << 20;
inline constexpr int64_t kMaxTime = int64_t{1} << 62;  // microseconds, and sizes in bytes
// Clock offsets stay far enough inside int64 that a time minus an offset minus another time
// cannot overflow.
inline constexpr int64_t kMaxClockOffset = int64_t{1} << 60;
inline constexpr size_t kMaxShapeDims = 32;
// A step line's seq is its operation's seq modulo this (the tags that carry it have 20 bits).
inline constexpr int64_t kStepSeqModulus = int64_t{1} << 20;

enum class State { kQueued, kStarted, kCompleted, kFailed };
const char* state_name(State s);

using Shape = std::vector<int64_t>;

// One operation: a flight recorder entry, or a timeline line.
struct Entry {
  int64_t seq = 0;
  std::string op;
  bool p2p = false;
  std::string dtype;
  std::vector<Shape> shapes;
  std::vector<Shape> out_shapes;
  int64_t bytes = 0;
  int64_t root = -1;  // group rank, or -1
  int64_t peer = -1;  // group rank, or -1
  std::string reduce_op;
  std::string engine;
  std::string algorithm;
  State state = State::kQueued;
  int64_t queued_us = 0;
  int64_t started_us = 0;  // 0: not started
  int64_t ended_us = 0;    // 0: not ended
  int64_t time_resolution_us = 0;  // how coarse its times are (0: to the microsecond)
  std::string error;
  int line = 0;  // where it is in its file

  // When the rank began to take part: started_us, or queued_us before that.
  int64_t entered_us() const { return started_us != 0 ? started_us : queued_us; }
};

// One step of an operation that the hierarchical engine ran in parts: a timeline file's step line.
struct Step {
  std::string where;  // "inside host", "among hosts"
  std::string group;
  int64_t seq = 0;  // the operation's seq modulo kStepSeqModulus
  int64_t part = 0;
  std::string op;  // the collective the step ran, which may differ from the operation's
  std::string engine;
  int64_t bytes = 0;
  int64_t thread = 0;  // the process's own numbering of its threads that ran steps
  std::string state;   // "completed", "failed", or "" (not said)
  int64_t started_us = 0;
  int64_t ended_us = 0;
  std::string error;
  int line = 0;
};

struct GroupRecord {
  std::string name;
  std::string desc;
  std::string backend;
  std::vector<int> ranks;  // global ranks, in group order
  int64_t group_rank = -1;
  int64_t capacity = -1;  // -1: not said
  int64_t dropped = 0;
  std::vector<Entry> entries;  // oldest first
  int line = 0;
};

// Header fields shared by a dump and a timeline file.
struct RankInfo {
  int rank = 0;
  int64_t world_size = 0;  // 0: not said
  std::string host;
  int64_t pid = 0;
  int64_t clock_offset_us = 0;  // this rank's clock minus rank 0's
};

struct Dump {
  std::string path;
  RankInfo info;
  std::string reason;  // failure, timeout, signal, request, exit
  std::string detail;
  int64_t dump_time_us = 0;
  std::vector<GroupRecord> groups;

  const GroupRecord* group(const std::string& name) const {
    for (const auto& g : groups)
      if (g.name == name) return &g;
    return nullptr;
  }
};

// A file that cannot be used: the message names the file (and line) and says why.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ttrace
