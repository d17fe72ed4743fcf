// tdist-trace --timeline: every rank's timeline file merged into one Chrome trace, with the
// hierarchical engine's steps on lanes of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "json_write.h"
#include "synthetic.h"
#include "trace_test_util.h"

namespace trace_test {
namespace {

using ttrace::JsonValue;

struct Merged {
  ToolResult run;
  JsonValue trace;
  std::vector<const JsonValue*> slices;  // "X" events
  std::map<int64_t, std::string> process_names;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;
  std::map<std::pair<int64_t, int64_t>, int64_t> thread_sort;

  std::vector<const JsonValue*> of(const std::string& cat) const {
    std::vector<const JsonValue*> out;
    for (const JsonValue* e : slices)
      if (e->find("cat")->as_string() == cat) out.push_back(e);
    return out;
  }
  std::string thread_of(const JsonValue* e) const {
    return thread_names.at({e->find("pid")->as_int(), e->find("tid")->as_int()});
  }
  // The sort index of rank pid's thread `name`; -1 when it has none.
  int64_t sort_of(int64_t pid, const std::string& name) const {
    for (const auto& [key, n] : thread_names)
      if (key.first == pid && n == name) return thread_sort.at(key);
    return -1;
  }
  int64_t origin() const { return trace.find("otherData")->find("time_origin_us")->as_int(); }
};

Merged merge(const std::string& dir, std::vector<std::string> extra = {}) {
  TempDir out;
  Merged m;
  std::vector<std::string> args = {"--timeline", dir, "-o", out.file("merged.json")};
  args.insert(args.end(), extra.begin(), extra.end());
  m.run = run_tool(args);
  const std::string text = read_text(out.file("merged.json"));
  if (text.empty()) return m;
  EXPECT_EQ(ttrace::valid_utf8(text), text);
  m.trace = parse(text);
  for (const JsonValue& e : m.trace.find("traceEvents")->items()) {
    const std::string ph = e.find("ph")->as_string();
    if (ph == "X") m.slices.push_back(&e);
    if (ph == "M" && e.find("name")->as_string() == "process_name")
      m.process_names[e.find("pid")->as_int()] = e.find("args")->find("name")->as_string();
    if (ph == "M" && e.find("name")->as_string() == "thread_name")
      m.thread_names[{e.find("pid")->as_int(), e.find("tid")->as_int()}] = e.find("args")->find("name")->as_string();
    if (ph == "M" && e.find("name")->as_string() == "thread_sort_index")
      m.thread_sort[{e.find("pid")->as_int(), e.find("tid")->as_int()}] = e.find("args")->find("sort_index")->as_int();
  }
  return m;
}

TEST(TraceTimeline, MergesEveryRankWithAlignedClocks) {
  TempDir dir;
  ASSERT_TRUE(write_scenario("timeline", dir.path()));  // 4 ranks x 12 on default_pg, ranks 0,2 x 5 on pg1
  const Merged m = merge(dir.path());
  ASSERT_EQ(m.run.exit_code, 0) << m.run.all();
  EXPECT_EQ(m.slices.size(), 4u * 12 + 2 * 5);
  EXPECT_TRUE(m.run.out.find("merged 58 operations of 4 ranks (2 groups)") != std::string::npos) << m.run.out;
  // One process per rank, named with its host.
  EXPECT_EQ(m.process_names, (std::map<int64_t, std::string>{
                                 {0, "rank 0 (node0)"}, {1, "rank 1 (node0)"}, {2, "rank 2 (node1)"}, {3, "rank 3 (node1)"}}));
  // One thread per group on each rank that is in it.
  std::set<std::string> threads;
  for (const auto& [key, name] : m.thread_names) threads.insert(std::to_string(key.first) + ":" + name);
  EXPECT_EQ(threads, (std::set<std::string>{"0:default_pg", "1:default_pg", "2:default_pg", "3:default_pg", "0:pg1",
                                            "2:pg1"}));
  // Every slice starts when its rank entered, on rank 0's clock: the synthetic job's true times.
  const int64_t origin = m.trace.find("otherData")->find("time_origin_us")->as_int();
  EXPECT_EQ(origin, std::min({true_entry(0, 1), true_entry(1, 1), true_entry(2, 1), true_entry(3, 1)}));
  std::map<int64_t, int> per_rank;
  for (const JsonValue* e : m.slices) {
    const int64_t pid = e->find("pid")->as_int();
    const JsonValue* args = e->find("args");
    const int64_t seq = args->find("seq")->as_int();
    ++per_rank[pid];
    EXPECT_EQ(e->find("ts")->as_int() + origin, true_entry(static_cast<int>(pid), seq)) << "rank " << pid << " seq " << seq;
    EXPECT_GT(e->find("dur")->as_int(), 0);
    const std::string thread = m.thread_names.at({pid, e->find("tid")->as_int()});
    EXPECT_TRUE(thread == "default_pg" || thread == "pg1") << thread;
    EXPECT_EQ(e->find("cat")->as_string(), "collective");
    EXPECT_EQ(args->find("bytes")->as_int(), 16384);
    EXPECT_EQ(args->find("dtype")->as_string(), "float32");
    EXPECT_EQ(args->find("engine")->as_string(), "shm");
    EXPECT_EQ(args->find("queued_wait_us")->as_int(), 5);
    EXPECT_EQ(args->find("state")->as_string(), "completed");
    const std::string name = e->find("name")->as_string();
    EXPECT_EQ(name.substr(name.find('#')), "#" + std::to_string(seq));
    if (name.rfind("broadcast", 0) == 0) {
      EXPECT_EQ(args->find("root")->as_int(), 0);
      EXPECT_EQ(args->find("algorithm")->as_string(), "binomial");
    } else {
      EXPECT_EQ(args->find("reduce_op")->as_string(), "sum");
      EXPECT_EQ(args->find("algorithm")->as_string(), "ring");
    }
  }
  EXPECT_EQ(per_rank, (std::map<int64_t, int>{{0, 17}, {1, 12}, {2, 17}, {3, 12}}));
}

TEST(TraceTimeline, SkipsTheCutLastLineAndSaysSo) {
  TempDir dir;
  ASSERT_TRUE(write_scenario("timeline", dir.path()));
  const Merged m = merge(dir.path());
  EXPECT_EQ(m.run.exit_code, 0);
  EXPECT_NE(m.run.out.find("skipped 1 line that did not parse"), std::string::npos) << m.run.out;
  // 1 header + 12 + 5 operations: the cut line is line 19.
  EXPECT_NE(m.run.err.find("skipped " + dir.path() + "/tdist_trace_2.jsonl:19: the last line is cut short"), std::string::npos)
      << m.run.err;
}

TEST(TraceTimeline, BadLinesInTheMiddleAreSkippedToo) {
  TempDir dir;
  SJob job = healthy_job(2, 3);
  job.write_traces(dir.path());
  std::string text = read_text(dir.file("tdist_trace_1.jsonl"));
  const size_t second = text.find('\n', text.find('\n') + 1);
  text.insert(second + 1, "garbage\n{\"group\": \"default_pg\", \"seq\": 1e999}\n" + std::string(2u << 20, 'x') + "\n\n");
  write_file(dir.path(), "tdist_trace_1.jsonl", text);
  const Merged m = merge(dir.path());
  EXPECT_EQ(m.run.exit_code, 0) << m.run.all();
  EXPECT_EQ(m.slices.size(), 6u);
  EXPECT_NE(m.run.out.find("skipped 3 lines"), std::string::npos) << m.run.out;
  EXPECT_NE(m.run.err.find("tdist_trace_1.jsonl:3: unexpected 'g'"), std::string::npos) << m.run.err;
  EXPECT_NE(m.run.err.find("tdist_trace_1.jsonl:4: the number 1e999 is out of range"), std::string::npos) << m.run.err;
  EXPECT_NE(m.run.err.find("tdist_trace_1.jsonl:5: longer than 1 MiB"), std::string::npos) << m.run.err;
}

TEST(TraceTimeline, QueuedSlicesOnTheirOwnRow) {
  TempDir dir;
  healthy_job(2, 4).write_traces(dir.path());
  const Merged m = merge(dir.path(), {"--queued"});
  ASSERT_EQ(m.run.exit_code, 0) << m.run.all();
  EXPECT_EQ(m.slices.size(), 16u);
  int queued = 0;
  for (const JsonValue* e : m.slices) {
    if (e->find("cat")->as_string() != "queued") continue;
    ++queued;
    EXPECT_EQ(e->find("dur")->as_int(), 5);
    EXPECT_EQ(m.thread_names.at({e->find("pid")->as_int(), e->find("tid")->as_int()}), "default_pg queue");
  }
  EXPECT_EQ(queued, 8);
}

TEST(TraceTimeline, FromFlightRecorderDumps) {
  TempDir dir;
  ASSERT_TRUE(write_scenario("hang", dir.path()));  // no timeline files: the dumps are merged
  const Merged m = merge(dir.path());
  ASSERT_EQ(m.run.exit_code, 0) << m.run.all();
  EXPECT_NE(m.run.out.find("from the flight recorder dumps"), std::string::npos) << m.run.out;
  EXPECT_EQ(m.slices.size(), 8u * 12 + 7);
  int unfinished = 0;
  for (const JsonValue* e : m.slices) {
    if (e->find("name")->as_string() != "all_reduce #13 (unfinished)") continue;
    ++unfinished;
    EXPECT_NE(e->find("pid")->as_int(), 5);
    EXPECT_NEAR(static_cast<double>(e->find("dur")->as_int()), 30e6, 100);
    EXPECT_EQ(e->find("args")->find("state")->as_string(), "unfinished at dump");
  }
  EXPECT_EQ(unfinished, 7);
}

TEST(TraceTimeline, FailedOperationsAreMarked) {
  TempDir dir;
  SJob job = healthy_job(2, 3);
  make_failure(job, 3, "boom \x1b[2J");
  job.write_traces(dir.path());
  const Merged m = merge(dir.path());
  ASSERT_EQ(m.run.exit_code, 0) << m.run.all();
  int failed = 0;
  for (const JsonValue* e : m.slices) {
    if (e->find("name")->as_string() != "all_reduce #3 (failed)") continue;
    ++failed;
    EXPECT_EQ(e->find("cname")->as_string(), "terrible");
    EXPECT_EQ(e->find("args")->find("error")->as_string(), "boom \x1b[2J");
  }
  EXPECT_EQ(failed, 2);
}

TEST(TraceTimeline, UnusableFilesAreNamedAndLeftOut) {
  TempDir dir;
  SJob job = healthy_job(3, 2);
  job.dumps[1].host = "bad\xff\xfehost";
  job.write_traces(dir.path());
  write_file(dir.path(), "tdist_trace_2.jsonl", "{\"version\": 1, \"rank\": 7}\n");
  const Merged m = merge(dir.path());
  EXPECT_EQ(m.run.exit_code, 2) << m.run.all();
  EXPECT_NE(m.run.err.find(dir.path() + "/tdist_trace_2.jsonl:1: the header line: 'rank' is 7 but the file name says 2 (file left out)"),
            std::string::npos)
      << m.run.err;
  EXPECT_EQ(m.process_names.size(), 2u);
  EXPECT_EQ(m.process_names.at(1), "rank 1 (bad\xEF\xBF\xBD\xEF\xBF\xBDhost)");

  write_file(dir.path(), "tdist_trace_2.jsonl", "{\"group\": \"default_pg\", \"seq\": 1, \"op\": \"x\", \"state\": \"completed\"}\n");
  EXPECT_NE(merge(dir.path()).run.err.find("is an operation, not the header"), std::string::npos);
  write_file(dir.path(), "tdist_trace_2.jsonl", "{\"version\": 1, \"ra");
  EXPECT_NE(merge(dir.path()).run.err.find("tdist_trace_2.jsonl:1:"), std::string::npos);
  write_file(dir.path(), "tdist_trace_2.jsonl", "");
  EXPECT_NE(merge(dir.path()).run.err.find("tdist_trace_2.jsonl: empty: no header line"), std::string::npos);
}

TEST(TraceTimeline, ToStandardOutput) {
  TempDir dir;
  healthy_job(2, 2).write_traces(dir.path());
  const ToolResult r = run_tool({"--timeline", dir.path(), "-o", "-"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse(r.out).find("traceEvents")->items().size(), 4u + 4 * 2 /*metadata*/);
  EXPECT_NE(r.err.find("into standard output"), std::string::npos);
}

TEST(TraceTimeline, NothingToMerge) {
  TempDir dir;
  ToolResult r = run_tool({"--timeline", dir.path(), "-o", dir.file("x.json")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no timeline files " + dir.path() + "/tdist_trace_<rank>.jsonl"), std::string::npos) << r.err;
  r = run_tool({"--timeline", dir.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--timeline needs -o FILE"), std::string::npos) << r.err;
}

TEST(TraceTimeline, OperationsAloneMergeAsBeforeSteps) {
  // The whole output for a file of operation lines only, as it was before step lines existed.
  TempDir dir;
  SJob job = healthy_job(1, 1);
  add_group(job, "pg1", {0}, 1);
  job.write_traces(dir.path());
  const ToolResult r = run_tool({"--timeline", dir.path(), "-o", dir.file("m.json"), "--queued"});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_NE(r.out.find("merged 2 operations of 1 rank (2 groups) from the timeline files into"), std::string::npos)
      << r.out;
  EXPECT_EQ(read_text(dir.file("m.json")), R"json({"displayTimeUnit":"ms",
"otherData":{"tool":"tdist-trace","time_origin_us":1764100000000074,"clock":"microseconds of rank 0's CLOCK_REALTIME minus time_origin_us; each rank's clock_offset_us subtracted"},
"traceEvents":[
{"name":"process_name","ph":"M","pid":0,"args":{"name":"rank 0 (node0)"}},
{"name":"process_sort_index","ph":"M","pid":0,"args":{"sort_index":0}},
{"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"default_pg"}},
{"name":"thread_sort_index","ph":"M","pid":0,"tid":1,"args":{"sort_index":1}},
{"name":"all_reduce #1","cat":"collective","ph":"X","pid":0,"tid":1,"ts":5,"dur":60,"args":{"seq":1,"bytes":16384,"dtype":"float32","shapes":"[4096]","engine":"shm","algorithm":"ring","reduce_op":"sum","state":"completed","queued_wait_us":5}},
{"name":"thread_name","ph":"M","pid":0,"tid":3,"args":{"name":"default_pg queue"}},
{"name":"thread_sort_index","ph":"M","pid":0,"tid":3,"args":{"sort_index":3}},
{"name":"all_reduce #1 queued","cat":"queued","ph":"X","pid":0,"tid":3,"ts":0,"dur":5,"args":{"seq":1}},
{"name":"thread_name","ph":"M","pid":0,"tid":4,"args":{"name":"pg1"}},
{"name":"thread_sort_index","ph":"M","pid":0,"tid":4,"args":{"sort_index":4}},
{"name":"broadcast #1","cat":"collective","ph":"X","pid":0,"tid":4,"ts":5,"dur":60,"args":{"seq":1,"bytes":16384,"dtype":"float32","shapes":"[4096]","engine":"shm","algorithm":"binomial","root":0,"state":"completed","queued_wait_us":5}},
{"name":"thread_name","ph":"M","pid":0,"tid":6,"args":{"name":"pg1 queue"}},
{"name":"thread_sort_index","ph":"M","pid":0,"tid":6,"args":{"sort_index":6}},
{"name":"broadcast #1 queued","cat":"queued","ph":"X","pid":0,"tid":6,"ts":0,"dur":5,"args":{"seq":1}}
]}
)json");
}

TEST(TraceTimeline, StepsOnALaneUnderTheirGroup) {
  // all_reduce #1-4 and #6 (broadcast #5 has no steps) with 3 steps on each host's first rank
  // (0 and 2) and 2 on the others; ranks 0 and 2 also in pg1.
  SJob job = healthy_job(4, 6);
  add_group(job, "pg1", {0, 2}, 2);
  TempDir plain;
  job.write_traces(plain.path());
  add_steps(job);
  TempDir dir;
  job.write_traces(dir.path());
  const Merged m = merge(dir.path());
  ASSERT_EQ(m.run.exit_code, 0) << m.run.all();
  EXPECT_NE(m.run.out.find("merged 28 operations and 50 steps of 4 ranks (2 groups)"), std::string::npos) << m.run.out;

  std::map<std::tuple<int64_t, int64_t, int64_t>, const SStep*> written;  // (rank, seq, part)
  for (const SDump& d : job.dumps)
    for (const SStep& s : d.steps) written[{d.rank, s.seq, s.part}] = &s;
  const std::vector<const JsonValue*> steps = m.of("step");
  EXPECT_EQ(steps.size(), 50u);
  for (const JsonValue* e : steps) {
    const int64_t pid = e->find("pid")->as_int();
    const JsonValue* args = e->find("args");
    const SStep& s = *written.at({pid, args->find("seq")->as_int(), args->find("part")->as_int()});
    EXPECT_EQ(e->find("name")->as_string(), s.op + ", " + s.step);
    EXPECT_EQ(m.thread_of(e), "default_pg steps");
    // On rank 0's clock, like the operations.
    EXPECT_EQ(e->find("ts")->as_int() + m.origin(), s.started_us - clock_offset(static_cast<int>(pid)));
    EXPECT_EQ(e->find("dur")->as_int(), s.ended_us - s.started_us);
    EXPECT_EQ(args->find("bytes")->as_int(), s.bytes);
    EXPECT_EQ(args->find("engine")->as_string(), s.engine);
    EXPECT_EQ(args->find("state")->as_string(), "completed");
    EXPECT_EQ(args->find("error"), nullptr);
    EXPECT_EQ(e->find("cname"), nullptr);
  }
  for (int64_t pid = 0; pid < 4; ++pid) {
    EXPECT_LT(m.sort_of(pid, "default_pg"), m.sort_of(pid, "default_pg steps")) << pid;
    if (pid % 2 == 0) {
      EXPECT_LT(m.sort_of(pid, "default_pg steps"), m.sort_of(pid, "pg1")) << pid;
    }
  }

  // The operations are drawn as without the step lines.
  const Merged before = merge(plain.path());
  ASSERT_EQ(before.run.exit_code, 0) << before.run.all();
  EXPECT_EQ(before.origin(), m.origin());
  const std::vector<const JsonValue*> ops = m.of("collective"), ops_before = before.of("collective");
  ASSERT_EQ(ops.size(), ops_before.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const char* key : {"name", "pid", "ts", "dur", "args"}) {
      std::string a, b;
      ttrace::append_json(a, *ops[i]->find(key));
      ttrace::append_json(b, *ops_before[i]->find(key));
      EXPECT_EQ(a, b) << key;
    }
    EXPECT_EQ(m.thread_of(ops[i]), before.thread_of(ops_before[i]));
  }
}

TEST(TraceTimeline, OverlappingStepsOnTwoThreadsGetTwoLanes) {
  SJob job = healthy_job(2, 2);
  make_pipelined(job, 2);  // 6 steps per rank: among hosts on thread 1, the others on thread 0
  TempDir dir;
  job.write_traces(dir.path());
  const Merged m = merge(dir.path());
  ASSERT_EQ(m.run.exit_code, 0) << m.run.all();
  EXPECT_NE(m.run.out.find("merged 4 operations and 12 steps"), std::string::npos) << m.run.out;
  for (int64_t pid = 0; pid < 2; ++pid) {
    std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> lanes;  // thread name -> (start, end)
    for (const JsonValue* e : m.of("step")) {
      if (e->find("pid")->as_int() != pid) continue;
      const bool among = e->find("name")->as_string() == "all_reduce, among hosts";
      EXPECT_EQ(m.thread_of(e), among ? "default_pg steps (thread 1)" : "default_pg steps");
      const int64_t ts = e->find("ts")->as_int();
      lanes[m.thread_of(e)].emplace_back(ts, ts + e->find("dur")->as_int());
    }
    ASSERT_EQ(lanes.size(), 2u);
    EXPECT_EQ(lanes["default_pg steps"].size(), 4u);
    EXPECT_EQ(lanes["default_pg steps (thread 1)"].size(), 2u);
    // Within a lane the steps follow one another; across the two lanes they overlap.
    for (auto& [name, spans] : lanes) {
      std::sort(spans.begin(), spans.end());
      for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first) << name;
    }
    int overlaps = 0;
    for (const auto& a : lanes["default_pg steps"])
      for (const auto& b : lanes["default_pg steps (thread 1)"]) overlaps += a.first < b.second && b.first < a.second;
    EXPECT_EQ(overlaps, 2);
    EXPECT_LT(m.sort_of(pid, "default_pg"), m.sort_of(pid, "default_pg steps"));
    EXPECT_LT(m.sort_of(pid, "default_pg steps"), m.sort_of(pid, "default_pg steps (thread 1)"));
  }
}

TEST(TraceTimeline, FailedStepsAreMarkedAndStepsMoveTheOrigin) {
  SJob job = healthy_job(2, 2);
  add_steps(job);
  SStep& last = job.rank(1).steps.back();
  last.state = "failed";
  last.error = "lost rank 0 \x1b[2J";
  // A step before every operation (its operation's line lost), on rank 1's clock.
  SStep early;
  early.seq = (int64_t{1} << 20) - 1;
  early.started_us = job.rank(1).group().entries[0].queued_us - 500;
  early.ended_us = early.started_us + 10;
  job.rank(1).steps.push_back(early);
  TempDir dir;
  job.write_traces(dir.path());
  const Merged m = merge(dir.path());
  ASSERT_EQ(m.run.exit_code, 0) << m.run.all();
  EXPECT_EQ(m.origin(), early.started_us - clock_offset(1));
  int failed = 0, at_origin = 0;
  for (const JsonValue* e : m.of("step")) {
    if (e->find("ts")->as_int() == 0) {
      ++at_origin;
      EXPECT_EQ(e->find("pid")->as_int(), 1);
      EXPECT_EQ(e->find("args")->find("seq")->as_int(), (int64_t{1} << 20) - 1);
    }
    if (e->find("cname") == nullptr) continue;
    ++failed;
    EXPECT_EQ(e->find("cname")->as_string(), "terrible");
    EXPECT_EQ(e->find("name")->as_string(), "broadcast, inside host (failed)");
    EXPECT_EQ(e->find("args")->find("state")->as_string(), "failed");
    EXPECT_EQ(e->find("args")->find("error")->as_string(), "lost rank 0 \x1b[2J");
  }
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(at_origin, 1);
}

TEST(TraceTimeline, BadStepLinesAreSkippedLikeBadOperationLines) {
  const std::string ok = R"("step": "inside host", "group": "default_pg", "seq": 1, "started_us": 1764100000000100)";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"step": "inside host", "seq": 1})", "'group' is missing"},
      {R"({"step": "inside host", "group": "default_pg"})", "'seq' is missing"},
      {R"({"step": "inside host", "group": "default_pg", "seq": "1"})", "'seq' must be an integer, found a string"},
      {R"({"step": "inside host", "group": "default_pg", "seq": 1048576})", "'seq' is 1048576, outside 0 .. 1048575"},
      {R"({"step": "inside host", "group": "default_pg", "seq": -1})", "'seq' is -1, outside"},
      {R"({"step": "inside host", "group": "", "seq": 1})", "'group' is empty"},
      {R"({"step": "", "group": "default_pg", "seq": 1})", "'step' is empty"},
      {R"({"step": 2, "group": "default_pg", "seq": 1})", "'step' must be a string, found an integer"},
      {"{" + ok + R"(, "ended_us": 4611686018427387905})", "'ended_us' is 4611686018427387905, outside 0 .. 4611686018427387904"},
      {"{" + ok + R"(, "bytes": -1})", "'bytes' is -1, outside"},
      {"{" + ok + R"(, "thread": -1})", "'thread' is -1, outside"},
      {"{" + ok + R"(, "part": 1.5})", "'part' must be an integer"},
      {"{" + ok + R"(, "op": 7})", "'op' must be a string"},
      {"{" + ok + R"(, "state": "started"})", "'state' is \"started\", not completed or failed"},
  };
  SJob job = healthy_job(2, 3);
  TempDir dir;
  job.write_traces(dir.path());
  const std::string header_and_ops = read_text(dir.file("tdist_trace_1.jsonl"));
  const std::string good = "{" + ok + "}\n";
  // One at a time: named, skipped, and the good step after it still drawn.
  for (const auto& [line, why] : bad) {
    write_file(dir.path(), "tdist_trace_1.jsonl", header_and_ops + line + "\n" + good);
    const Merged m = merge(dir.path());
    EXPECT_EQ(m.run.exit_code, 0) << m.run.all();
    EXPECT_NE(m.run.err.find("skipped " + dir.path() + "/tdist_trace_1.jsonl:5: the step: " + why), std::string::npos)
        << line << "\n" << m.run.err;
    EXPECT_NE(m.run.out.find("merged 6 operations and 1 step of 2 ranks (1 group)"), std::string::npos) << m.run.out;
    EXPECT_NE(m.run.out.find("skipped 1 line that did not parse"), std::string::npos) << m.run.out;
  }
  // All together, among operation lines that are bad too: each counted once.
  std::string text = header_and_ops + "{\"group\": \"default_pg\", \"seq\": 9}\n";
  for (const auto& [line, why] : bad) text += line + "\n";
  write_file(dir.path(), "tdist_trace_1.jsonl", text + good);
  const Merged m = merge(dir.path());
  EXPECT_EQ(m.run.exit_code, 0) << m.run.all();
  EXPECT_EQ(m.of("collective").size(), 6u);
  EXPECT_EQ(m.of("step").size(), 1u);
  EXPECT_NE(m.run.out.find("skipped " + std::to_string(bad.size() + 1) + " lines"), std::string::npos) << m.run.out;
  EXPECT_NE(m.run.err.find("tdist_trace_1.jsonl:5: the operation: 'op' is missing"), std::string::npos) << m.run.err;
}

}  // namespace
}  // namespace trace_test
