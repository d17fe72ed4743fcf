// Tracing and dumps under the built tdistrun, as a user runs them: SIGUSR1
// sent to tdistrun never kills a worker, and a job's secret (its token)
// appears in none of the outputs a job leaves behind.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <string>
#include <vector>

#include "run_launcher.h"

namespace {

using launcher_test::exists;
using launcher_test::Launcher;
using launcher_test::ScratchDir;
using launcher_test::wait_until;

// A worker that is not a tdist program, or one before init_process_group:
// tdistrun passes SIGUSR1 on, and it must live through it (its default action
// is death). The workers wait for the test to say "go" after tdistrun said it
// passed the signal on.
TEST(TdistrunSigusr1, AWorkerWithoutAHandlerLivesThroughIt) {
  ScratchDir dir;
  const std::string script = "touch " + dir.path() + "/ready$RANK; while [ ! -e " + dir.path() +
                             "/go ]; do sleep 0.05; done; echo lived$RANK";
  Launcher l(dir, {"--nproc-per-node", "2", "--no-prefix", "/bin/sh", "-c", script});
  ASSERT_TRUE(wait_until([&] { return exists(dir.file("ready0")) && exists(dir.file("ready1")); }))
      << "the workers did not start";
  l.signal(SIGUSR1);
  // kill() has marked it pending by the time tdistrun says so: it is delivered before "go".
  ASSERT_TRUE(wait_until([&] {
    return launcher_test::read_file(dir.file("launcher.err")).find("passed it to 2") != std::string::npos;
  })) << launcher_test::read_file(dir.file("launcher.err"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  { std::FILE* f = std::fopen(dir.file("go").c_str(), "w"); ASSERT_NE(f, nullptr); std::fclose(f); }
  const auto r = l.wait();
  EXPECT_EQ(r.code(), 0) << r.describe();
  EXPECT_NE(r.out.find("lived0"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("lived1"), std::string::npos) << r.describe();
}

// The scenario: 3 ranks, a shape mismatch under TDIST_DEBUG=DETAIL. The first rank to
// fail dies of its error, and tdistrun stops the others with SIGTERM, often before they reached
// their own failure's dump: each must still leave one. A few runs, as it was missing in about
// half of them.
TEST(FailureDumps, EveryRankOfAFailedJobLeavesItsDump) {
  ScratchDir dir;
  for (int run = 0; run < 6; ++run) {
    const std::string fr = dir.file("fr" + std::to_string(run));
    Launcher l(dir, {"--nproc-per-node", "3", FAILING_JOB_PATH, "--only-fail"},
               {"TDIST_DEBUG=DETAIL", "TDIST_FLIGHT_RECORDER_DIR=" + fr}, "run" + std::to_string(run));
    const auto r = l.wait(std::chrono::seconds(60));
    ASSERT_FALSE(r.timed_out) << r.describe();
    EXPECT_NE(r.code(), 0) << r.describe();
    for (int rank = 0; rank < 3; ++rank) {
      const std::string dump = fr + "/tdist_fr_" + std::to_string(rank) + ".json";
      ASSERT_TRUE(exists(dump)) << "run " << run << ": no dump from rank " << rank << "\n" << r.describe();
      const std::string text = launcher_test::read_file(dump);
      // Its own failure's, or the one it wrote when tdistrun stopped it.
      const bool failure = text.find("\"reason\": \"failure\"") != std::string::npos;
      const bool stopped = text.find("\"reason\": \"signal\"") != std::string::npos;
      EXPECT_TRUE(failure || stopped) << dump << ": " << text.substr(0, 2000);
    }
  }
}

// Every file under `root`, recursively.
std::vector<std::string> files_under(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_regular_file(ec)) out.push_back(it->path().string());
  }
  return out;
}

// The check: a real job with a known token (tdist-bench in its table
// and JSON forms, and a program that fails under TDIST_DEBUG=DETAIL, with
// timelines, flight recorder dumps, SIGUSR1, debug logs, tdistrun's log files
// and error files), and the token in none of what they wrote.
TEST(Secrets, TheJobTokenIsInNoOutputOfAJob) {
  ScratchDir dir;
  const std::string token = "tok3n-that-must-never-show-" + std::to_string(::getpid());
  const std::vector<std::string> env = {
      "TDIST_JOB_TOKEN=" + token,           "TDIST_DEBUG=DETAIL",
      "TDIST_LOG_LEVEL=DEBUG",              "TDIST_TRACE=" + dir.file("trace"),
      "TDIST_FLIGHT_RECORDER_DIR=" + dir.file("fr"), "TMPDIR=" + dir.file("tmp")};
  std::filesystem::create_directories(dir.file("tmp"));
  struct Run {
    std::vector<std::string> args;
    bool fails;
  };
  const std::vector<Run> runs = {
      {{"--nproc-per-node", "3", "--log-dir", dir.file("logs"), "-t", "3", TDIST_BENCH_PATH, "-b", "8", "-e", "64",
        "-n", "2", "-w", "1"},
       false},
      {{"--nproc-per-node", "2", "--log-dir", dir.file("logs"), "-t", "3", TDIST_BENCH_PATH, "-b", "8", "-e", "64",
        "-n", "2", "-w", "1", "--json"},
       false},
      {{"--nproc-per-node", "3", "--log-dir", dir.file("logs"), "-t", "3", FAILING_JOB_PATH}, true},
  };
  std::string seen;  // every output, for the failure message
  for (size_t i = 0; i < runs.size(); ++i) {
    Launcher l(dir, runs[i].args, env, "run" + std::to_string(i));
    const auto r = l.wait(std::chrono::seconds(120));
    ASSERT_FALSE(r.timed_out) << r.describe();
    EXPECT_EQ(r.code() != 0, runs[i].fails) << r.describe();
    seen += r.out + r.err;
  }
  // What the runs are known to have written: the check must not pass on an empty folder.
  EXPECT_NE(seen.find("# Settings"), std::string::npos) << seen;
  EXPECT_NE(seen.find("\"settings\""), std::string::npos) << seen;
  EXPECT_NE(seen.find("TDIST_JOB_TOKEN=<set>"), std::string::npos) << seen;
  EXPECT_TRUE(exists(dir.file("fr/tdist_fr_2.json")));
  EXPECT_TRUE(exists(dir.file("trace/tdist_trace_0.jsonl")));
  bool error_file = false;
  for (const std::string& path : files_under(dir.path())) {
    error_file = error_file || path.ends_with("error.json");
    const std::string text = launcher_test::read_file(path);
    EXPECT_EQ(text.find(token), std::string::npos) << path << " shows the job token:\n" << text.substr(0, 4000);
  }
  EXPECT_TRUE(error_file) << "the failing run left no error file";
}

}  // namespace
