// Synthetic flight recorder dumps and timeline files for tdist-trace's tests (and for looking
// at its output by hand: trace_synth SCENARIO DIR). Written as text here, independent of the
// tool's own JSON code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trace_test {

using Shape = std::vector<int64_t>;

struct SEntry {
  int64_t seq = 0;
  std::string op = "all_reduce";
  bool p2p = false;
  std::string dtype = "float32";
  std::vector<Shape> shapes = {{4096}};
  std::vector<Shape> out_shapes;
  int64_t bytes = 16384;
  int root = -1;
  int peer = -1;
  std::string reduce_op = "sum";
  std::string engine = "shm";
  std::string algorithm = "ring";
  std::string state = "completed";
  int64_t queued_us = 0, started_us = 0, ended_us = 0;  // the rank's own clock
  std::string error;

  std::string fields_json() const;  // the members, without braces
};

// A timeline file's step line: one step of an operation the hierarchical engine ran in parts.
struct SStep {
  std::string step = "inside host";
  std::string group = "default_pg";
  int64_t seq = 0;
  int64_t part = 0;
  std::string op = "reduce";
  std::string engine = "shm";
  int64_t bytes = 16384;
  int64_t thread = 0;
  std::string state = "completed";
  int64_t started_us = 0, ended_us = 0;  // the rank's own clock
  std::string error;

  std::string json() const;  // the line, without its newline
};

struct SGroup {
  std::string name = "default_pg";
  std::vector<int> ranks;
  int group_rank = 0;
  int64_t capacity = 2000;
  int64_t dropped = 0;
  std::vector<SEntry> entries;

  SEntry* at(int64_t seq);  // the collective seq, or nullptr
};

struct SDump {
  int rank = 0;
  int world_size = 1;
  std::string host = "node0";
  int64_t pid = 1000;
  std::string reason = "request";
  std::string detail;
  int64_t dump_time_us = 0;
  int64_t clock_offset_us = 0;
  std::vector<SGroup> groups;
  std::vector<SStep> steps;  // timeline files only

  SGroup& group(const std::string& name = "default_pg");
  std::string json() const;
  // The timeline file of the same operations, each after its steps (the library writes an
  // operation's line when it ends); steps of no operation last.
  std::string trace_jsonl() const;
};

// A job of world_size ranks on two hosts that ran `ops` collectives on default_pg, every one
// completed. Each rank's clock is off rank 0's by clock_offset(rank) (up to +-3 ms, more than
// the ranks' spread in entering, so an unaligned reading would see a slow rank); the times in
// the files are each rank's own.
struct SJob {
  std::vector<SDump> dumps;
  SDump& rank(int r) { return dumps.at(static_cast<size_t>(r)); }
  void write_dumps(const std::string& dir, const std::string& prefix = "tdist_fr_") const;
  void write_traces(const std::string& dir) const;
};

inline constexpr int64_t kT0 = 1764100000000000;  // rank 0's clock at the first collective
inline constexpr int64_t kStep = 10000;           // between collectives, us
int64_t clock_offset(int rank);
// When rank entered collective seq on rank 0's clock (a spread of up to 90 us).
int64_t true_entry(int rank, int64_t seq);

SJob healthy_job(int world_size = 8, int ops = 20);
// Adds group `name` with these members, `ops` completed collectives (broadcast from group rank 0).
void add_group(SJob& job, const std::string& name, const std::vector<int>& members, int ops);

// Rank `rank` enters every collective `late_us` after the others.
void make_slow(SJob& job, int rank, int64_t late_us);
// Every rank but `stuck` enters collective seq (and stays inside it); `stuck` stops at seq-1.
// The others dump on timeout, `stuck` on a signal 1 s later.
void make_hang(SJob& job, int64_t seq, int stuck);
// Collective seq fails on every rank with `error`; later ones are not entered.
void make_failure(SJob& job, int64_t seq, const std::string& error);

// Every completed all_reduce of default_pg gets the steps of a hierarchical all_reduce, one after
// the other on thread 0 within the operation's times: reduce inside host (shm), all_reduce among
// hosts (transport) on each host's first rank only, broadcast inside host (shm).
void add_steps(SJob& job);
// Collective seq's steps become a two-segment pipeline on every rank (parts 0-2, then 3-5): each
// segment's all_reduce among hosts runs on thread 1 while thread 0 runs the next segment's reduce
// or the previous one's broadcast inside host, so the two threads' steps overlap in time.
void make_pipelined(SJob& job, int64_t seq);

// Writes text to dir/name.
void write_file(const std::string& dir, const std::string& name, const std::string& text);

// A scenario by name into dir (the files a test or a person looks at):
// healthy, mismatch_op, mismatch_shape, mismatch_root, hang, missing, slow, failed, subgroups,
// timeline, steps. Returns false for an unknown name.
bool write_scenario(const std::string& name, const std::string& dir);

}  // namespace trace_test
