// tdistrun --on-failure end to end: with shrink a failed worker leaves the
// others running, which read exited/<rank> from the store tdistrun gives
// them (exit_watch_worker); restart stays torchrun's behaviour.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_launcher.h"

namespace launcher_test {
namespace {

const char* watcher() { return EXIT_WATCH_WORKER_PATH; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A line of `text` that starts with `head` and ends with `tail` (a pid between).
bool has_line(const std::string& text, const std::string& head, const std::string& tail) {
  for (const auto& line : lines_of(text)) {
    if (line.size() >= head.size() + tail.size() && line.rfind(head, 0) == 0 &&
        line.compare(line.size() - tail.size(), tail.size(), tail) == 0)
      return true;
  }
  return false;
}

// What worker `rank` read from exited/<failed rank>, or "" when it wrote nothing.
std::string seen_by(const ScratchDir& dir, int rank) {
  const std::string path = dir.file("seen" + std::to_string(rank));
  return exists(path) ? read_file(path) : std::string();
}

TEST(LauncherOnFailure, ShrinkLetsTheOthersRunOnAndTellsThemThroughTheStore) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node=3", "--on-failure=shrink", watcher(), dir.path(), "1", "3"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 0) << r.describe();
  for (int rank : {0, 2}) {
    EXPECT_TRUE(has_line(seen_by(dir, rank), "rank 1 (local_rank 1, pid ", ") exited with code 3"))
        << "rank " << rank << " read '" << seen_by(dir, rank) << "'\n" << r.describe();
  }
  EXPECT_TRUE(has_line(r.err, "tdistrun: rank 1 (local_rank 1, pid ",
                       ") failed: exit code 3; the other workers run on (--on-failure shrink)"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "tdistrun: 1 of 3 worker(s) failed and the others ran on (--on-failure shrink):"))
      << r.err;
  EXPECT_TRUE(has_line(r.err, "tdistrun:   rank 1 (local_rank 1, pid ", "s after the workers started")) << r.err;
  EXPECT_TRUE(has_line(r.err, "tdistrun:   rank 0 (local_rank 0, pid ", "): exited 0")) << r.err;
  EXPECT_TRUE(has_line(r.err, "tdistrun:   rank 2 (local_rank 2, pid ", "): exited 0")) << r.err;
  EXPECT_TRUE(contains(r.err, "tdistrun: exiting with status 0")) << r.err;
  EXPECT_FALSE(contains(r.err, "terminated by the launcher")) << r.err;
}

TEST(LauncherOnFailure, ShrinkFromTheEnvironmentNamesTheSignalThatKilled) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node=2", watcher(), dir.path(), "0", "kill"}, {"TDIST_ON_FAILURE=shrink"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 0) << r.describe();
  EXPECT_TRUE(has_line(seen_by(dir, 1), "rank 0 (local_rank 0, pid ", ") was killed by signal 9 (SIGKILL)"))
      << seen_by(dir, 1) << r.describe();
}

TEST(LauncherOnFailure, ShrinkWhereEveryWorkerFailsExitsWithTheFirstFailure) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node=2", "--on-failure=shrink", watcher(), dir.path(), "all", "5"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 5) << r.describe();
  EXPECT_TRUE(contains(r.err, "tdistrun: 2 of 2 worker(s) failed and the others ran on (--on-failure shrink):"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "tdistrun: exiting with status 5")) << r.err;
}

// The command line's restart wins over TDIST_ON_FAILURE=shrink: torchrun's behaviour.
TEST(LauncherOnFailure, RestartStopsTheOthers) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node=3", "--on-failure=restart", watcher(), dir.path(), "1", "3"},
             {"TDIST_ON_FAILURE=shrink"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 3) << r.describe();
  EXPECT_TRUE(has_line(r.err, "tdistrun: rank 1 (local_rank 1, pid ", ") failed first: exit code 3")) << r.err;
  for (int rank : {0, 2}) {
    const std::string id = std::to_string(rank);
    EXPECT_TRUE(has_line(r.err, "tdistrun:   rank " + id + " (local_rank " + id + ", pid ",
                         "): terminated by the launcher (SIGTERM)"))
        << r.err;
    EXPECT_EQ(seen_by(dir, rank), "") << "restart wrote exited/1";
  }
}

// Static nodes: a worker's failure on node 1 restarts no node; both finish.
TEST(LauncherOnFailure, ShrinkOnOneNodeRestartsNoOtherNode) {
  ScratchDir dir;
  const std::string port = std::to_string(free_port());
  auto args = [&](const std::string& node) {
    return std::vector<std::string>{"--nnodes=2", "--node-rank=" + node, "--nproc-per-node=2", "--master-port=" + port,
                                    "--on-failure=shrink", watcher(), dir.path(), "3", "3"};
  };
  Launcher node0(dir, args("0"), {"TDIST_JOB_TOKEN=shared-by-the-nodes"}, "node0");
  Launcher node1(dir, args("1"), {"TDIST_JOB_TOKEN=shared-by-the-nodes"}, "node1");
  Result r1 = node1.wait(std::chrono::seconds(60));
  Result r0 = node0.wait(std::chrono::seconds(60));
  ASSERT_TRUE(r0.exited()) << r0.describe();
  ASSERT_TRUE(r1.exited()) << r1.describe();
  EXPECT_EQ(r0.code(), 0) << r0.describe();
  EXPECT_EQ(r1.code(), 0) << r1.describe();
  for (int rank : {0, 1, 2}) {
    EXPECT_TRUE(has_line(seen_by(dir, rank), "rank 3 (local_rank 1, pid ", ") exited with code 3"))
        << "rank " << rank << " read '" << seen_by(dir, rank) << "'\n" << r0.describe() << r1.describe();
  }
  for (const Result* r : {&r0, &r1}) {
    EXPECT_FALSE(contains(r->err, "stopping this node's workers")) << r->err;
    EXPECT_FALSE(contains(r->err, "restarting")) << r->err;
  }
}

TEST(LauncherOnFailure, HelpDescribesIt) {
  ScratchDir dir;
  Result r = run(dir, {"--help"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  for (const char* word : {"--on-failure", "restart", "shrink", "exited/<rank>", "TDIST_ON_FAILURE"})
    EXPECT_TRUE(contains(r.out, word)) << "--help does not mention " << word;
}

TEST(LauncherOnFailure, ABadValueNamesTheChoices) {
  ScratchDir dir;
  Result r = run(dir, {"--on-failure=sometimes", watcher(), dir.path(), "0", "0"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 2);
  EXPECT_TRUE(contains(r.err, "'sometimes' for --on-failure: expected restart")) << r.err;
  EXPECT_TRUE(contains(r.err, "or shrink")) << r.err;
}

}  // namespace
}  // namespace launcher_test
