// tdist-trace --timeline: every rank's timeline file merged into one Chrome trace.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

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

}  // namespace
}  // namespace trace_test
