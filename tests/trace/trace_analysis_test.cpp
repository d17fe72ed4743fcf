// tdist-trace DIR on synthetic jobs: what it finds, in words and in --json, and its exit status.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "synthetic.h"
#include "trace_test_util.h"

namespace trace_test {
namespace {

using ttrace::JsonValue;

struct Analysis {
  ToolResult text;   // tdist-trace DIR
  ToolResult json;   // tdist-trace --json DIR
  JsonValue report;  // json's output parsed
  std::string all_text() const { return text.all(); }

  // The findings of one kind.
  std::vector<const JsonValue*> findings(const std::string& kind) const {
    std::vector<const JsonValue*> out;
    for (const JsonValue& f : report.find("findings")->items())
      if (f.find("kind")->as_string() == kind) out.push_back(&f);
    return out;
  }
  int64_t problems() const { return report.find("problems")->as_int(); }
};

Analysis analyse_dir(const std::string& dir, std::vector<std::string> extra = {}) {
  Analysis a;
  std::vector<std::string> args = extra;
  args.push_back(dir);
  a.text = run_tool(args);
  args.insert(args.begin(), "--json");
  a.json = run_tool(args);
  EXPECT_EQ(a.text.exit_code, a.json.exit_code);
  a.report = parse(a.json.out);
  return a;
}

Analysis analyse_job(const SJob& job, std::vector<std::string> extra = {}) {
  TempDir dir;
  job.write_dumps(dir.path());
  return analyse_dir(dir.path(), std::move(extra));
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(TraceAnalysis, HealthyRunExitsZero) {
  const Analysis a = analyse_job(healthy_job());
  EXPECT_EQ(a.text.exit_code, 0) << a.all_text();
  EXPECT_TRUE(contains(a.text.out, "tdist-trace: 8 dumps of 8 ranks")) << a.text.out;
  EXPECT_TRUE(contains(a.text.out, "No problem found.")) << a.text.out;
  EXPECT_EQ(a.text.err, "");
  EXPECT_EQ(a.problems(), 0);
  EXPECT_EQ(a.report.find("world_size")->as_int(), 8);
  const JsonValue& g = a.report.find("groups")->items().at(0);
  EXPECT_EQ(g.find("name")->as_string(), "default_pg");
  EXPECT_EQ(g.find("last_seq")->as_int(), 20);
  EXPECT_EQ(g.find("slowest")->find("collectives")->as_int(), 20);
  EXPECT_FALSE(g.find("slowest")->find("problem")->as_bool());
  // The spread of entry times in the synthetic job is under 91 us on rank 0's clock.
  EXPECT_LT(g.find("slowest")->find("median_behind_first_us")->as_int(), 91);
}

TEST(TraceAnalysis, ClocksAreAligned) {
  // The same job with every clock_offset_us said to be 0: rank 3's clock runs 3 ms ahead of
  // rank 0's, so it now seems to enter every collective last, by about 3 ms.
  SJob job = healthy_job();
  for (SDump& d : job.dumps) d.clock_offset_us = 0;
  const Analysis a = analyse_job(job);
  EXPECT_EQ(a.text.exit_code, 1) << a.all_text();
  const auto slow = a.findings("slow_rank");
  ASSERT_EQ(slow.size(), 1u) << a.json.out;
  EXPECT_EQ(slow[0]->find("rank")->as_int(), 3);
  EXPECT_GT(slow[0]->find("median_behind_first_us")->as_int(), 2900);
}

TEST(TraceAnalysis, MismatchedOp) {
  TempDir dir;
  ASSERT_TRUE(write_scenario("mismatch_op", dir.path()));
  const Analysis a = analyse_dir(dir.path());
  EXPECT_EQ(a.text.exit_code, 1) << a.all_text();
  const JsonValue& first = a.report.find("findings")->items().at(0);
  EXPECT_EQ(first.find("kind")->as_string(), "mismatch");
  EXPECT_EQ(first.find("seq")->as_int(), 10);
  EXPECT_EQ(first.find("group")->as_string(), "default_pg");
  const auto& sides = first.find("sides")->items();
  ASSERT_EQ(sides.size(), 2u);
  EXPECT_EQ(ints_of(sides[0].find("ranks")), (std::vector<int64_t>{0, 1, 2, 4, 5, 6, 7}));
  EXPECT_EQ(sides[0].find("op")->as_string(), "broadcast");
  EXPECT_EQ(ints_of(sides[1].find("ranks")), (std::vector<int64_t>{3}));
  EXPECT_EQ(sides[1].find("op")->as_string(), "all_reduce");
  std::vector<std::string> differ;
  for (const auto& d : first.find("differ_in")->items()) differ.push_back(d.as_string());
  EXPECT_EQ(differ, (std::vector<std::string>{"op", "reduce_op", "root"}));
  // The most important finding comes first in the terminal too.
  EXPECT_TRUE(contains(a.text.out,
                       "1. default_pg: the members disagree on collective #10: they differ in op, reduce_op and root.\n"
                       "   rank 3:         all_reduce(dtype=float32, shapes=[4096], reduce_op=sum)\n"
                       "   ranks 0-2,4-7:  broadcast(dtype=float32, shapes=[4096], root=0)\n"))
      << a.text.out;
  EXPECT_TRUE(contains(a.text.out, "every member entered collective #10, and ranks 0-7 were still inside it")) << a.text.out;
}

TEST(TraceAnalysis, MismatchedShape) {
  TempDir dir;
  ASSERT_TRUE(write_scenario("mismatch_shape", dir.path()));
  const Analysis a = analyse_dir(dir.path());
  EXPECT_EQ(a.text.exit_code, 1);
  const auto m = a.findings("mismatch");
  ASSERT_EQ(m.size(), 1u) << a.json.out;
  EXPECT_EQ(m[0]->find("differ_in")->items().at(0).as_string(), "shapes");
  EXPECT_EQ(m[0]->find("differ_in")->items().size(), 1u);
  EXPECT_TRUE(contains(a.text.out, "they differ in shapes.\n   rank 3:         broadcast(dtype=float32, shapes=[1024], root=0)")) << a.text.out;
}

TEST(TraceAnalysis, MismatchedRoot) {
  TempDir dir;
  ASSERT_TRUE(write_scenario("mismatch_root", dir.path()));
  const Analysis a = analyse_dir(dir.path());
  EXPECT_EQ(a.text.exit_code, 1);
  const auto m = a.findings("mismatch");
  ASSERT_EQ(m.size(), 1u) << a.json.out;
  EXPECT_EQ(m[0]->find("differ_in")->items().at(0).as_string(), "root");
  EXPECT_TRUE(contains(a.text.out, "they differ in root.\n   rank 3:         broadcast(dtype=float32, shapes=[4096], root=1)")) << a.text.out;
}

TEST(TraceAnalysis, FirstMismatchIsTheOneTold) {
  SJob job = healthy_job();
  job.rank(6).group().at(7)->dtype = "float16";
  job.rank(2).group().at(9)->reduce_op = "max";
  job.rank(2).group().at(11)->reduce_op = "max";
  const Analysis a = analyse_job(job);
  EXPECT_EQ(a.text.exit_code, 1);
  const auto m = a.findings("mismatch");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]->find("seq")->as_int(), 7);
  EXPECT_EQ(m[0]->find("later_mismatches")->as_int(), 2);
  EXPECT_TRUE(contains(a.text.out, "2 later collectives differ too.")) << a.text.out;
}

TEST(TraceAnalysis, PerRankShapesOfAllToAllAreNotAMismatch) {
  SJob job = healthy_job(4, 6);
  for (SDump& d : job.dumps) {
    SEntry& e = *d.group().at(3);
    e.op = "all_to_all_single";
    e.reduce_op = "";
    e.shapes = {{static_cast<int64_t>(100 + d.rank)}};
  }
  const Analysis a = analyse_job(job);
  EXPECT_EQ(a.text.exit_code, 0) << a.text.out;
  // ... but a different dtype is.
  job.rank(1).group().at(3)->dtype = "int32";
  EXPECT_EQ(analyse_job(job).findings("mismatch").size(), 1u);
}

TEST(TraceAnalysis, CoalescedAllGatherOfOtherShapesIsAMismatch) {
  SJob job = healthy_job(4, 6);
  for (SDump& d : job.dumps) {
    SEntry& e = *d.group().at(3);
    e.op = "all_gather_coalesced";
    e.reduce_op = "";
    e.shapes = {{8}, {3}};
    e.out_shapes = {{8}, {8}, {8}, {8}, {3}, {3}, {3}, {3}};
  }
  EXPECT_EQ(analyse_job(job).text.exit_code, 0);
  job.rank(2).group().at(3)->shapes = {{8}, {4}};
  const Analysis a = analyse_job(job);
  const auto m = a.findings("mismatch");
  ASSERT_EQ(m.size(), 1u) << a.text.out;
  EXPECT_EQ(m[0]->find("differ_in")->items().at(0).as_string(), "shapes");
}

TEST(TraceAnalysis, RankThatNeverEntered) {
  TempDir dir;
  ASSERT_TRUE(write_scenario("hang", dir.path()));
  const Analysis a = analyse_dir(dir.path());
  EXPECT_EQ(a.text.exit_code, 1) << a.all_text();
  const JsonValue& first = a.report.find("findings")->items().at(0);
  EXPECT_EQ(first.find("kind")->as_string(), "never_entered");
  EXPECT_EQ(first.find("seq")->as_int(), 13);
  EXPECT_EQ(first.find("op")->as_string(), "all_reduce");
  EXPECT_EQ(ints_of(first.find("ranks")), (std::vector<int64_t>{5}));
  EXPECT_EQ(ints_of(first.find("entered")), (std::vector<int64_t>{0, 1, 2, 3, 4, 6, 7}));
  EXPECT_EQ(ints_of(first.find("waiting")), (std::vector<int64_t>{0, 1, 2, 3, 4, 6, 7}));
  EXPECT_EQ(first.find("last_seq")->as_int(), 12);
  EXPECT_GE(first.find("longest_wait_us")->as_int(), 30000000 - 100);
  EXPECT_TRUE(contains(a.text.out, "1. default_pg: rank 5 never entered all_reduce #13, which ranks 0-4,6,7 have entered."))
      << a.text.out;
  EXPECT_TRUE(contains(a.text.out, "Its last collective was all_reduce #12 (completed).")) << a.text.out;
  EXPECT_TRUE(contains(a.text.out, "for up to 30.0 s")) << a.text.out;
  EXPECT_TRUE(contains(a.text.out, "Dumped on timeout by ranks 0-4,6,7; rank 0's: rank 0 in group default_pg: all_reduce #13 timed out after 30000 ms\n")) << a.text.out;
  EXPECT_TRUE(contains(a.text.out, "Dumped on signal by rank 5.")) << a.text.out;
}

TEST(TraceAnalysis, RanksStoppedAtDifferentCollectives) {
  SJob job = healthy_job();
  make_hang(job, 13, 5);
  auto& e6 = job.rank(6).group().entries;
  e6.erase(e6.begin() + 9, e6.end());  // rank 6 stopped after #9
  const Analysis a = analyse_job(job);
  const auto never = a.findings("never_entered");
  ASSERT_EQ(never.size(), 2u) << a.json.out;
  EXPECT_EQ(never[0]->find("seq")->as_int(), 10);
  EXPECT_EQ(ints_of(never[0]->find("ranks")), (std::vector<int64_t>{6}));
  EXPECT_EQ(ints_of(never[0]->find("entered")), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 7}));
  EXPECT_EQ(never[1]->find("seq")->as_int(), 13);
  EXPECT_EQ(ints_of(never[1]->find("ranks")), (std::vector<int64_t>{5}));
  EXPECT_TRUE(contains(a.text.out, "rank 6 never entered broadcast #10, which ranks 0-5,7 have entered.")) << a.text.out;
}

TEST(TraceAnalysis, RankThatDumpedBeforeTheOthersEntered) {
  // Rank 5 dumped (on request) before the others entered #13: its dump cannot tell.
  SJob job = healthy_job();
  make_hang(job, 13, 5);
  job.rank(5).dump_time_us = true_entry(0, 13) - 2000000 + job.rank(5).clock_offset_us;
  Analysis a = analyse_job(job);
  auto never = a.findings("never_entered");
  ASSERT_EQ(never.size(), 1u) << a.json.out;
  EXPECT_TRUE(never[0]->find("dumped_early")->as_bool());
  EXPECT_TRUE(contains(a.text.out, "rank 5 dumped before the others entered all_reduce #13 (up to 2.0")) << a.text.out;
  // The others timed out inside it: still a problem.
  EXPECT_EQ(a.text.exit_code, 1);
  EXPECT_EQ(never[0]->find("severity")->as_string(), "problem");

  // Dumps on request while #13 ran normally elsewhere: a note only.
  SJob calm = healthy_job(4, 13);
  auto& e = calm.rank(2).group().entries;
  e.pop_back();
  calm.rank(2).dump_time_us = true_entry(0, 13) - 500 + calm.rank(2).clock_offset_us;
  a = analyse_job(calm);
  EXPECT_EQ(a.text.exit_code, 0) << a.text.out;
  never = a.findings("never_entered");
  ASSERT_EQ(never.size(), 1u);
  EXPECT_EQ(never[0]->find("severity")->as_string(), "note");
}

TEST(TraceAnalysis, MissingDump) {
  TempDir dir;
  ASSERT_TRUE(write_scenario("missing", dir.path()));
  const Analysis a = analyse_dir(dir.path());
  EXPECT_EQ(a.text.exit_code, 1) << a.all_text();
  const auto missing = a.findings("missing_dump");
  ASSERT_EQ(missing.size(), 1u) << a.json.out;
  EXPECT_EQ(ints_of(missing[0]->find("ranks")), (std::vector<int64_t>{5}));
  EXPECT_TRUE(contains(a.text.out, "no dump from rank 5 (expected " + dir.path() +
                                       "/tdist_fr_<rank>.json): it left the job, was killed, or did not dump."))
      << a.text.out;
  const auto waiting = a.findings("waiting");
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(ints_of(waiting[0]->find("missing")), (std::vector<int64_t>{5}));
  EXPECT_EQ(waiting[0]->find("seq")->as_int(), 13);
  EXPECT_TRUE(contains(a.text.out, "ranks 0-4,6,7 were inside all_reduce #13 when they dumped; rank 5, whose dump is missing"))
      << a.text.out;
  // The most important first: the missing rank before what the others were doing.
  EXPECT_EQ(a.report.find("findings")->items().at(0).find("kind")->as_string(), "missing_dump");
}

TEST(TraceAnalysis, MissingHighestRankIsKnownFromTheWorldSize) {
  SJob job = healthy_job(4, 5);
  job.dumps.pop_back();
  const Analysis a = analyse_job(job);
  EXPECT_EQ(a.text.exit_code, 1);
  const auto missing = a.findings("missing_dump");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(ints_of(missing[0]->find("ranks")), (std::vector<int64_t>{3}));
}

TEST(TraceAnalysis, SlowRank) {
  TempDir dir;
  ASSERT_TRUE(write_scenario("slow", dir.path()));
  const Analysis a = analyse_dir(dir.path());
  EXPECT_EQ(a.text.exit_code, 1) << a.all_text();
  const auto slow = a.findings("slow_rank");
  ASSERT_EQ(slow.size(), 1u) << a.json.out;
  EXPECT_EQ(slow[0]->find("rank")->as_int(), 3);
  EXPECT_EQ(slow[0]->find("last_count")->as_int(), 20);
  EXPECT_EQ(slow[0]->find("collectives")->as_int(), 20);
  const int64_t behind = slow[0]->find("median_behind_first_us")->as_int();
  EXPECT_GE(behind, 4000);
  EXPECT_LE(behind, 4091);
  EXPECT_TRUE(contains(a.text.out, "rank 3 entered last in 20 of 20 completed collectives (#1-#20), a median 4.0")) << a.text.out;
  // Below the threshold it is told, but not as a problem.
  const Analysis calm = analyse_dir(dir.path(), {"--slow-ms", "10"});
  EXPECT_EQ(calm.text.exit_code, 0) << calm.text.out;
  EXPECT_TRUE(contains(calm.text.out, "default_pg: rank 3, last in 20 of 20 completed collectives")) << calm.text.out;
}

TEST(TraceAnalysis, FailedOperation) {
  TempDir dir;
  ASSERT_TRUE(write_scenario("failed", dir.path()));
  const Analysis a = analyse_dir(dir.path());
  EXPECT_EQ(a.text.exit_code, 1) << a.all_text();
  const auto failed = a.findings("failed");
  ASSERT_EQ(failed.size(), 1u) << a.json.out;
  const JsonValue& op = failed[0]->find("failed")->items().at(0);
  EXPECT_EQ(op.find("seq")->as_int(), 9);
  EXPECT_EQ(ints_of(op.find("ranks")).size(), 8u);
  EXPECT_TRUE(contains(op.find("errors")->items().at(0).find("error")->as_string(), "10.0.0.2:41084 lost"));
  EXPECT_TRUE(contains(a.text.out, "default_pg: all_reduce #9 failed on ranks 0-7: rank 0 in group default_pg: all_reduce #9 "
                                   "failed: connection to rank 1 at 10.0.0.2:41084 lost: closed by the peer"))
      << a.text.out;
}

TEST(TraceAnalysis, FailuresWithDifferentErrorsAndLaterOnes) {
  SJob job = healthy_job(4, 6);
  make_failure(job, 4, "timed out after 30000 ms");
  job.rank(2).group().at(4)->error = "connection to rank 1 lost";
  for (SDump& d : job.dumps) {  // the group then fails every later call fast
    SEntry e = *d.group().at(4);
    e.seq = 5;
    e.op = "broadcast";
    e.queued_us += 2000, e.started_us += 2000, e.ended_us += 2000;
    d.group().entries.push_back(e);
  }
  const Analysis a = analyse_job(job);
  EXPECT_EQ(a.text.exit_code, 1);
  EXPECT_TRUE(contains(a.text.out, "default_pg: all_reduce #4 failed on ranks 0-3\n")) << a.text.out;
  EXPECT_TRUE(contains(a.text.out, "ranks 0,1,3: timed out after 30000 ms")) << a.text.out;
  EXPECT_TRUE(contains(a.text.out, "rank 2: connection to rank 1 lost")) << a.text.out;
  EXPECT_TRUE(contains(a.text.out, "1 later operation failed too: broadcast #5.")) << a.text.out;
}

TEST(TraceAnalysis, SubgroupsAreCheckedEachByItsMembers) {
  SJob job = healthy_job();
  add_group(job, "pg1", {0, 2, 4, 6}, 6);
  add_group(job, "pg2", {1, 3, 5, 7}, 6);
  Analysis a = analyse_job(job);
  EXPECT_EQ(a.text.exit_code, 0) << a.text.out;
  EXPECT_EQ(a.report.find("groups")->items().size(), 3u);
  EXPECT_TRUE(contains(a.text.out, "pg1 (4 ranks, collectives up to #6)")) << a.text.out;

  job.rank(4).group("pg1").at(6)->shapes = {{7}};
  a = analyse_job(job);
  EXPECT_EQ(a.text.exit_code, 1);
  const auto m = a.findings("mismatch");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]->find("group")->as_string(), "pg1");
  EXPECT_TRUE(contains(a.text.out, "pg1: the members disagree on collective #6: they differ in shapes.\n   rank 4:       broadcast(dtype=float32, shapes=[7], root=0)")) << a.text.out;
}

TEST(TraceAnalysis, MemberWithoutTheGroupAndStaleDumps) {
  SJob job = healthy_job(4, 4);
  add_group(job, "pg1", {0, 1, 2, 3}, 3);
  job.rank(2).groups.pop_back();
  job.rank(3).world_size = 16;
  const Analysis a = analyse_job(job);
  EXPECT_EQ(a.text.exit_code, 1);
  EXPECT_TRUE(contains(a.text.out, "pg1: rank 2 dumped but has no record of this group")) << a.text.out;
  EXPECT_TRUE(contains(a.text.out, "the dumps disagree on the world size: ranks 0-2 say 4, rank 3 says 16")) << a.text.out;
}

TEST(TraceAnalysis, PathPrefixAsTorchNamesIt) {
  TempDir dir;
  healthy_job(4, 3).write_dumps(dir.path(), "nccl_trace_rank_");
  ToolResult r = run_tool({"--prefix", dir.path() + "/nccl_trace_rank_"});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_TRUE(contains(r.out, "4 dumps of 4 ranks (" + dir.path() + "/nccl_trace_rank_<rank>.json)")) << r.out;
  r = run_tool({dir.path(), "--prefix=nccl_trace_rank_"});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  r = run_tool({dir.path()});  // the default prefix finds nothing there
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "no flight recorder dumps " + dir.path() + "/tdist_fr_<rank>.json")) << r.err;
}

}  // namespace
}  // namespace trace_test
