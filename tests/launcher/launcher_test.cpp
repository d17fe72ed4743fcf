// End-to-end tests of tdistrun: the built launcher runs launcher_test_worker
// (or /bin/sh) and the tests check what the workers got and what tdistrun did.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <tdist/version.h>

#include "run_launcher.h"

namespace launcher_test {
namespace {

using Env = std::map<std::string, std::string>;

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Checks the environment rank `rank` got from a launch of nnodes x nproc workers.
void expect_env(const Env& env, int rank, int nnodes, int nproc, const std::string& addr, const std::string& port,
                const std::string& run_id = "none") {
  SCOPED_TRACE("rank " + std::to_string(rank));
  const int world = nnodes * nproc;
  EXPECT_EQ(env.at("RANK"), std::to_string(rank));
  EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(rank % nproc));
  EXPECT_EQ(env.at("WORLD_SIZE"), std::to_string(world));
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), std::to_string(nproc));
  EXPECT_EQ(env.at("GROUP_RANK"), std::to_string(rank / nproc));
  EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), std::to_string(nnodes));
  EXPECT_EQ(env.at("ROLE_RANK"), std::to_string(rank));
  EXPECT_EQ(env.at("ROLE_WORLD_SIZE"), std::to_string(world));
  EXPECT_EQ(env.at("ROLE_NAME"), "default");
  EXPECT_EQ(env.at("MASTER_ADDR"), addr);
  EXPECT_EQ(env.at("MASTER_PORT"), port);
  EXPECT_EQ(env.at("TORCHELASTIC_RUN_ID"), run_id);
  EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "0");
  EXPECT_EQ(env.at("TORCHELASTIC_MAX_RESTARTS"), "0");
  EXPECT_EQ(env.at("TDIST_LAUNCHED"), "1");
  if (nproc > 1) {
    EXPECT_EQ(env.at("OMP_NUM_THREADS"), "1");
  } else {
    EXPECT_EQ(env.count("OMP_NUM_THREADS"), 0u);
  }
}

Env env_of(const ScratchDir& dir, int rank) {
  const std::string path = dir.file("rank" + std::to_string(rank) + ".env");
  EXPECT_TRUE(exists(path)) << path;
  return read_env_file(path);
}


bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Whether `line` is head + <a pid> + tail.
bool is_worker_line(const std::string& line, const std::string& head, const std::string& tail) {
  if (line.size() < head.size() + tail.size() || line.rfind(head, 0) != 0) return false;
  if (line.compare(line.size() - tail.size(), tail.size(), tail) != 0) return false;
  return all_digits(line.substr(head.size(), line.size() - head.size() - tail.size()));
}

bool has_worker_line(const std::string& text, const std::string& head, const std::string& tail) {
  for (const auto& line : lines_of(text)) {
    if (is_worker_line(line, head, tail)) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// Environment

class LauncherEnvNproc : public ::testing::TestWithParam<int> {};

TEST_P(LauncherEnvNproc, EveryVariablePerRank) {
  const int nproc = GetParam();
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node", std::to_string(nproc), worker_path(), "dump", dir.path(), "a", "b c"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  for (int rank = 0; rank < nproc; ++rank) {
    Env env = env_of(dir, rank);
    expect_env(env, rank, 1, nproc, "127.0.0.1", r.port);
    EXPECT_EQ(env["ARGC"], "2");  // no --local-rank by default (--use-env)
    EXPECT_EQ(env["ARG0"], "a");
    EXPECT_EQ(env["ARG1"], "b c");
  }
  EXPECT_FALSE(exists(dir.file("rank" + std::to_string(nproc) + ".env")));
  EXPECT_EQ(r.err, "");
}

INSTANTIATE_TEST_SUITE_P(Nproc, LauncherEnvNproc, ::testing::Values(1, 2, 4));

TEST(LauncherEnv, TwoNodesGetGlobalRanks) {
  ScratchDir dir;
  const std::string port = std::to_string(free_port());
  auto args = [&](int node) {
    return std::vector<std::string>{"--nnodes=2", "--node-rank=" + std::to_string(node), "--nproc-per-node=2",
                                    "--master-addr=127.0.0.1", "--master-port=" + port, "--rdzv-id=job7",
                                    worker_path(), "dump", dir.path()};
  };
  Launcher node0(dir, args(0), {}, "node0");
  Launcher node1(dir, args(1), {}, "node1");
  Result r0 = node0.wait();
  Result r1 = node1.wait();
  ASSERT_TRUE(r0.exited() && r0.code() == 0) << r0.describe();
  ASSERT_TRUE(r1.exited() && r1.code() == 0) << r1.describe();
  for (int rank = 0; rank < 4; ++rank) expect_env(env_of(dir, rank), rank, 2, 2, "127.0.0.1", port, "job7");
}

TEST(LauncherEnv, OmpNumThreadsKeptWhenSet) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node", "2", worker_path(), "dump", dir.path()}, {"OMP_NUM_THREADS=7"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_EQ(env_of(dir, 0)["OMP_NUM_THREADS"], "7");
  EXPECT_EQ(env_of(dir, 1)["OMP_NUM_THREADS"], "7");
}

TEST(LauncherEnv, EveryJobGetsItsOwnTokenUnlessTheUserSetOne) {
  auto tokens = [](const std::vector<std::string>& extra_env) {
    ScratchDir dir;
    Result r = run(dir, {"--nproc-per-node", "2", worker_path(), "dump", dir.path()}, extra_env);
    EXPECT_TRUE(r.exited() && r.code() == 0) << r.describe();
    return std::pair{env_of(dir, 0)["TDIST_JOB_TOKEN"], env_of(dir, 1)["TDIST_JOB_TOKEN"]};
  };
  auto [a0, a1] = tokens({});
  auto [b0, b1] = tokens({});
  EXPECT_EQ(a0.size(), 64u);
  EXPECT_EQ(a0, a1);  // one token per job, shared by its workers
  EXPECT_EQ(b0, b1);
  EXPECT_NE(a0, b0);  // and a new one per job
  auto [c0, c1] = tokens({"TDIST_JOB_TOKEN=chosen-by-the-user"});
  EXPECT_EQ(c0, "chosen-by-the-user");
  EXPECT_EQ(c1, "chosen-by-the-user");
  ScratchDir secret;
  const std::string file = secret.file("token");
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    std::fputs("from-a-file\n", f);
    std::fclose(f);
    chmod(file.c_str(), 0600);
  }
  auto [d0, d1] = tokens({"TDIST_JOB_TOKEN_FILE=" + file});
  EXPECT_EQ(d0, "");  // the file is the workers' to read: no second token next to it

  // A token file that cannot be read stops the launcher before any worker starts.
  ScratchDir dir;
  Result bad = run(dir, {"--nproc-per-node", "2", worker_path(), "dump", dir.path()},
                   {"TDIST_JOB_TOKEN_FILE=/nonexistent/token"});
  EXPECT_TRUE(bad.exited() && bad.code() == 1) << bad.describe();
  EXPECT_NE(bad.err.find("/nonexistent/token"), std::string::npos) << bad.err;
  EXPECT_FALSE(exists(dir.file("rank0.env")));
}

TEST(LauncherEnv, InheritedVariablesOverridden) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node", "1", worker_path(), "dump", dir.path()},
                 {"RANK=99", "WORLD_SIZE=99", "MASTER_PORT=1", "UNRELATED=kept"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  expect_env(env_of(dir, 0), 0, 1, 1, "127.0.0.1", r.port);
}

TEST(LauncherEnv, UnderscoreSpellingsEqualsFormsAndPrefixes) {
  ScratchDir dir;
  const std::string port = std::to_string(free_port());
  auto args = [&](const std::string& node) {
    return std::vector<std::string>{"--nproc_per_node=2", "--nnodes", "2", "--node_rank", node,
                                    "--master_addr=localhost", "--master-port", port, "--rdzv_id", "xyz",
                                    worker_path(), "dump", dir.path()};
  };
  Launcher node0(dir, args("0"), {"TDIST_JOB_TOKEN=t"}, "node0");
  Launcher node1(dir, args("1"), {"TDIST_JOB_TOKEN=t"}, "node1");
  Result r0 = node0.wait();
  Result r = node1.wait();
  ASSERT_TRUE(r0.exited() && r0.code() == 0) << r0.describe();
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  expect_env(env_of(dir, 2), 2, 2, 2, "localhost", port, "xyz");
  expect_env(env_of(dir, 3), 3, 2, 2, "localhost", port, "xyz");

  ScratchDir dir2;
  Result r2 = run(dir2, {"--nproc", "2", "--", worker_path(), "dump", dir2.path(), "--nnodes=3"});
  ASSERT_TRUE(r2.exited() && r2.code() == 0) << r2.describe();
  Env env = env_of(dir2, 1);
  expect_env(env, 1, 1, 2, "127.0.0.1", r2.port);
  EXPECT_EQ(env["ARG0"], "--nnodes=3");  // after PROGRAM, options belong to it
}

TEST(LauncherEnv, PetVariablesGiveDefaults) {
  ScratchDir dir;
  const std::string port = std::to_string(free_port());
  Result r = run(dir, {"--node-rank=0", worker_path(), "dump", dir.path()},
                 {"PET_NPROC_PER_NODE=2", "PET_NNODES=1", "PET_NODE_RANK=5", "PET_MASTER_PORT=" + port});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  expect_env(env_of(dir, 0), 0, 1, 2, "127.0.0.1", port);  // the command line wins for --node-rank
}

TEST(LauncherEnv, NprocCpuIsOnlineCpus) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus > 32) GTEST_SKIP() << "too many CPUs for a quick test: " << cpus;
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node=cpu", worker_path(), "dump", dir.path()});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_EQ(env_of(dir, 0)["LOCAL_WORLD_SIZE"], std::to_string(cpus));
  EXPECT_TRUE(exists(dir.file("rank" + std::to_string(cpus - 1) + ".env")));
}

// ---------------------------------------------------------------------------
// --pass-local-rank (torch.distributed.launch without --use-env)

TEST(LauncherArgs, PassLocalRankAppendsArgument) {
  for (const char* flag : {"--pass-local-rank", "--use-env=false", "--use_env=0", "--pass_local_rank"}) {
    SCOPED_TRACE(flag);
    ScratchDir dir;
    Result r = run(dir, {flag, "--nproc-per-node=2", worker_path(), "dump", dir.path(), "x"});
    ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
    for (int rank = 0; rank < 2; ++rank) {
      Env env = env_of(dir, rank);
      EXPECT_EQ(env["ARGC"], "2");
      EXPECT_EQ(env["ARG0"], "x");
      EXPECT_EQ(env["ARG1"], "--local-rank=" + std::to_string(rank));
      EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank));
    }
  }
}

TEST(LauncherArgs, UseEnvPassesNothing) {
  ScratchDir dir;
  Result r = run(dir, {"--use-env", "--nproc-per-node=2", worker_path(), "dump", dir.path()});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_EQ(env_of(dir, 1)["ARGC"], "0");
}

// ---------------------------------------------------------------------------
// Output

TEST(LauncherOutput, PrefixesStdoutAndStderrLines) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node=2", worker_path(), "print"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  for (int rank = 0; rank < 2; ++rank) {
    const std::string p = "[rank" + std::to_string(rank) + "]: ";
    const std::string s = std::to_string(rank);
    EXPECT_NE(r.out.find(p + "out " + s + " line1\n" + p + "out " + s + " line2\n"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find(p + "err " + s + "\n"), std::string::npos) << r.err;
    // The partial last line is flushed at the end, as a line of its own.
    EXPECT_NE(r.out.find(p + "tail " + s + "\n"), std::string::npos) << r.out;
  }
  EXPECT_EQ(lines_of(r.out).size(), 6u) << r.out;
  EXPECT_EQ(lines_of(r.err).size(), 2u) << r.err;
}

TEST(LauncherOutput, LinesFromManyWorkersAreNeverMixed) {
  ScratchDir dir;
  const int kLines = 3000;
  Result r = run(dir, {"--nproc-per-node=3", worker_path(), "spam", std::to_string(kLines)});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe().substr(0, 2000);
  std::vector<int> next(3, 0);
  auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u * kLines);
  for (const auto& line : lines) {
    int rank = -1, rank2 = -2, i = -1, used = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "[rank%d]: line %d %d%n", &rank, &rank2, &i, &used), 3) << "mixed line: " << line;
    ASSERT_EQ(static_cast<size_t>(used), line.size()) << "mixed line: " << line;
    ASSERT_EQ(rank, rank2) << line;
    ASSERT_TRUE(rank >= 0 && rank < 3) << line;
    ASSERT_EQ(i, next[rank]++) << "out of order: " << line;  // each rank's lines keep their order
  }
}

TEST(LauncherOutput, NoPrefixPassesOutputThrough) {
  ScratchDir dir;
  Result r = run(dir, {"--no-prefix", "--nproc-per-node=2", worker_path(), "print"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_EQ(r.out.find("[rank"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("out 0 line1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("out 1 line2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("err 1\n"), std::string::npos) << r.err;

  ScratchDir dir2;
  Result r2 = run(dir2, {"--nproc-per-node=2", worker_path(), "print"}, {"TDIST_RUN_PREFIX=0"});
  ASSERT_TRUE(r2.exited() && r2.code() == 0) << r2.describe();
  EXPECT_EQ(r2.out.find("[rank"), std::string::npos) << r2.out;
  EXPECT_NE(r2.out.find("out 0 line1\n"), std::string::npos) << r2.out;
}

TEST(LauncherOutput, ShellWorkerPartialLineFlushed) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node=1", "/bin/sh", "-c", "printf 'no newline'; printf 'e1\\ne2' >&2"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_EQ(r.out, "[rank0]: no newline\n");
  EXPECT_EQ(r.err, "[rank0]: e1\n[rank0]: e2\n");
}

TEST(LauncherOutput, ProcessLeftBehindDoesNotHoldTheLauncher) {
  // The worker exits at once; the sleep it started keeps the pipe's write end open.
  ScratchDir dir;
  const std::string pidfile = dir.file("bg.pid");
  Launcher l(dir, {"--nproc-per-node=1", "/bin/sh", "-c", "sleep 30 & echo $! > " + pidfile + "; echo hi"});
  Result r = l.wait(std::chrono::seconds(20));
  if (exists(pidfile)) kill(std::stoi(read_file(pidfile)), SIGKILL);
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_EQ(r.out, "[rank0]: hi\n");
}

TEST(LauncherOutput, ScriptWithoutShebangRunsWithSh) {
  ScratchDir dir;
  const std::string script = dir.file("job");
  {
    std::ofstream f(script);
    f << "echo \"script $RANK $*\"\n";
  }
  chmod(script.c_str(), 0755);
  Result r = run(dir, {"--nproc-per-node=1", script, "a", "b"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_EQ(r.out, "[rank0]: script 0 a b\n");
}

// ---------------------------------------------------------------------------
// Failures

TEST(LauncherFailure, AllSucceedExitsZeroSilently) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node=3", "/bin/sh", "-c", "exit 0"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "");
}

// The first line tdistrun itself wrote to stderr.
std::string first_launcher_line(const std::string& err) {
  for (const auto& line : lines_of(err)) {
    if (line.rfind("tdistrun: ", 0) == 0) return line;
  }
  return "";
}

TEST(LauncherFailure, ExitCodeAndSummaryNameTheFirstFailure) {
  ScratchDir dir;
  Launcher l(dir, {"--nproc-per-node=3", worker_path(), "fail", "1", "3"});
  // The others sleep 60 s: finishing well within the bound means they were stopped.
  Result r = l.wait(std::chrono::seconds(45));
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 3) << r.describe();
  EXPECT_TRUE(is_worker_line(first_launcher_line(r.err), "tdistrun: rank 1 (local_rank 1, pid ",
                             ") failed first: exit code 3"))
      << r.err;
  for (int rank : {0, 2}) {
    const std::string id = std::to_string(rank);
    EXPECT_TRUE(has_worker_line(r.err, "tdistrun:   rank " + id + " (local_rank " + id + ", pid ",
                                "): terminated by the launcher (SIGTERM)"))
        << r.err;
  }
}

TEST(LauncherFailure, KilledWorkerNamesTheSignal) {
  ScratchDir dir;
  Launcher l(dir, {"--nproc-per-node=2", worker_path(), "sigkill", "0"});
  Result r = l.wait(std::chrono::seconds(45));
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 128 + SIGKILL) << r.describe();
  EXPECT_TRUE(is_worker_line(first_launcher_line(r.err), "tdistrun: rank 0 (local_rank 0, pid ",
                             ") failed first: killed by signal 9 (SIGKILL)"))
      << r.err;
  EXPECT_NE(r.err.find("rank 1 (local_rank 1"), std::string::npos) << r.err;
}

TEST(LauncherFailure, SecondNodeReportsGlobalRank) {
  ScratchDir dir;
  // Nodes of one job share the token the user set (without one tdistrun warns first).
  const std::string port = std::to_string(free_port());
  auto args = [&](const std::string& node) {
    return std::vector<std::string>{"--nnodes=2", "--node-rank=" + node, "--nproc-per-node=2", "--master-port=" + port,
                                    worker_path(), "fail", "3", "5"};
  };
  Launcher node0(dir, args("0"), {"TDIST_JOB_TOKEN=shared-by-the-nodes"}, "node0");
  Launcher node1(dir, args("1"), {"TDIST_JOB_TOKEN=shared-by-the-nodes"}, "node1");
  Result r = node1.wait();
  Result r0 = node0.wait();
  ASSERT_TRUE(r0.exited()) << r0.describe();
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 5);
  EXPECT_NE(r.err.find("tdistrun: rank 3 (local_rank 1, pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the job failed: rank 3 (local_rank 1, pid "), std::string::npos) << r.err;
  EXPECT_EQ(r0.code(), 1) << r0.describe();  // node 0 was stopped by node 1's failure
  EXPECT_NE(r0.err.find("the job failed: rank 3 (local_rank 1, pid "), std::string::npos) << r0.err;
}

TEST(LauncherFailure, ProgramNotFound) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node=2", dir.file("no-such-program")});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 127);
  EXPECT_NE(r.err.find("no-such-program"), std::string::npos) << r.err;
}

// ---------------------------------------------------------------------------
// Signals

TEST(LauncherSignals, SigtermReachesWorkersAndExits143) {
  ScratchDir dir;
  Launcher l(dir, {"--nproc-per-node=2", worker_path(), "trap", dir.path()});
  ASSERT_TRUE(wait_until([&] { return exists(dir.file("ready0")) && exists(dir.file("ready1")); }))
      << "workers did not start";
  l.signal(SIGTERM);
  Result r = l.wait(std::chrono::seconds(45));
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 128 + SIGTERM) << r.describe();
  for (int rank = 0; rank < 2; ++rank) {
    const std::string marker = dir.file("term" + std::to_string(rank));
    ASSERT_TRUE(exists(marker)) << marker << "\n" << r.describe();
    EXPECT_EQ(std::stoi(read_file(marker)), SIGTERM);
  }
  EXPECT_NE(r.err.find("received SIGTERM"), std::string::npos) << r.err;
}

// SIGUSR1 asks tdist workers for their flight recorders (docs/tracing.md): it
// reaches every worker and stops nothing.
TEST(LauncherSignals, Sigusr1ReachesWorkersAndTheJobGoesOn) {
  ScratchDir dir;
  Launcher l(dir, {"--nproc-per-node=2", worker_path(), "trap", dir.path()});
  ASSERT_TRUE(wait_until([&] { return exists(dir.file("ready0")) && exists(dir.file("ready1")); }));
  l.signal(SIGUSR1);
  EXPECT_TRUE(wait_until([&] { return exists(dir.file("usr10")) && exists(dir.file("usr11")); }))
      << "SIGUSR1 did not reach both workers";
  EXPECT_FALSE(exists(dir.file("term0")) || exists(dir.file("term1"))) << "a worker was stopped";
  l.signal(SIGTERM);  // still running: it ends as any job does
  Result r = l.wait(std::chrono::seconds(45));
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 128 + SIGTERM) << r.describe();
  EXPECT_NE(r.err.find("received SIGUSR1; passed it to 2 running worker(s)"), std::string::npos) << r.err;
}

TEST(LauncherSignals, SigintForwardedAsSigint) {
  ScratchDir dir;
  Launcher l(dir, {"--nproc-per-node=2", worker_path(), "trap", dir.path()});
  ASSERT_TRUE(wait_until([&] { return exists(dir.file("ready0")) && exists(dir.file("ready1")); }));
  l.signal(SIGINT);
  Result r = l.wait(std::chrono::seconds(45));
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 128 + SIGINT) << r.describe();
  ASSERT_TRUE(exists(dir.file("term1"))) << r.describe();
  EXPECT_EQ(std::stoi(read_file(dir.file("term1"))), SIGINT);
}

TEST(LauncherSignals, WorkerIgnoringSigtermGetsSigkillAfterGrace) {
  ScratchDir dir;
  Launcher l(dir, {"--kill-timeout=0.2", "--nproc-per-node=2", worker_path(), "ignore-term", dir.path()});
  ASSERT_TRUE(wait_until([&] { return exists(dir.file("ready0")) && exists(dir.file("ready1")); }));
  l.signal(SIGTERM);
  Result r = l.wait(std::chrono::seconds(45));
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 128 + SIGTERM) << r.describe();
  EXPECT_NE(r.err.find("killed by the launcher with SIGKILL"), std::string::npos) << r.err;
}

// torchrun's --signals-to-handle: the signals listed reach the workers and stop
// them (SIGUSR1 too, once listed); the others keep their default action.
TEST(LauncherSignals, SignalsToHandleAreForwardedAndStopTheWorkers) {
  for (int sig : {SIGUSR2, SIGUSR1}) {
    SCOPED_TRACE(sig);
    ScratchDir dir;
    Launcher l(dir, {"--signals-to-handle=SIGUSR2,SIGUSR1", "--kill-timeout=0.5", "--nproc-per-node=2", worker_path(),
                     "trap", dir.path()});
    ASSERT_TRUE(wait_until([&] { return exists(dir.file("ready0")) && exists(dir.file("ready1")); }));
    l.signal(sig);
    Result r = l.wait(std::chrono::seconds(45));
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_EQ(r.code(), 128 + sig) << r.describe();
    // The trap worker exits on SIGUSR2, and notes SIGUSR1 and waits for SIGKILL.
    for (int rank = 0; rank < 2; ++rank)
      EXPECT_TRUE(exists(dir.file((sig == SIGUSR2 ? "term" : "usr1") + std::to_string(rank)))) << r.describe();
    EXPECT_NE(r.err.find("received " + std::string(sig == SIGUSR2 ? "SIGUSR2" : "SIGUSR1") +
                         "; passing it to 2 running worker(s)"),
              std::string::npos)
        << r.err;
  }
}

// /proc/<pid>/stat says whether the process is gone (or a zombie nobody reaps).
bool process_gone(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  auto close_paren = stat.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < stat.size() && stat[close_paren + 2] == 'Z';
}

TEST(LauncherSignals, WorkersDieWhenLauncherIsKilled) {
  ScratchDir dir;
  Launcher l(dir, {"--nproc-per-node=2", worker_path(), "pid", dir.path()});
  ASSERT_TRUE(wait_until([&] { return exists(dir.file("pid0")) && exists(dir.file("pid1")); }));
  std::vector<pid_t> pids = {std::stoi(read_file(dir.file("pid0"))), std::stoi(read_file(dir.file("pid1")))};
  l.signal(SIGKILL);
  Result r = l.wait(std::chrono::seconds(45));
  ASSERT_TRUE(!r.timed_out && WIFSIGNALED(r.status));
  for (pid_t pid : pids) {
    EXPECT_TRUE(wait_until([&] { return process_gone(pid); })) << "worker " << pid << " outlived the launcher";
  }
}

TEST(LauncherSignals, ASignalNotToHandleKeepsItsDefaultActionAndTheWorkersGoToo) {
  ScratchDir dir;
  Launcher l(dir, {"--signals-to-handle=SIGUSR2", "--nproc-per-node=2", worker_path(), "pid", dir.path()});
  ASSERT_TRUE(wait_until([&] { return exists(dir.file("pid0")) && exists(dir.file("pid1")); }));
  std::vector<pid_t> pids = {std::stoi(read_file(dir.file("pid0"))), std::stoi(read_file(dir.file("pid1")))};
  l.signal(SIGTERM);
  Result r = l.wait(std::chrono::seconds(45));
  ASSERT_TRUE(!r.timed_out && WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGTERM) << r.describe();
  for (pid_t pid : pids) EXPECT_TRUE(wait_until([&] { return process_gone(pid); })) << "worker " << pid;
}

// ---------------------------------------------------------------------------
// Ports

TEST(LauncherPorts, MasterPortZeroAndStandalonePickAFreePort) {
  for (std::vector<std::string> opts : {std::vector<std::string>{"--master-port=0"},
                                        std::vector<std::string>{"--standalone"}}) {
    SCOPED_TRACE(opts[0]);
    ScratchDir dir;
    Result r = run(dir, cat(cat(opts, {"--nproc-per-node=2"}), {worker_path(), "dump", dir.path()}));
    ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
    Env e0 = env_of(dir, 0), e1 = env_of(dir, 1);
    const std::string port = e0["MASTER_PORT"];
    ASSERT_TRUE(all_digits(port) && port[0] != '0') << port;
    EXPECT_LE(std::stoi(port), 65535);
    EXPECT_EQ(e1["MASTER_PORT"], port);  // one port for every worker
    EXPECT_EQ(e0["MASTER_ADDR"], "127.0.0.1");
  }
}

// ---------------------------------------------------------------------------
// Command line

struct BadCase {
  std::vector<std::string> args;
  std::string names;  // the message must contain this
};

TEST(LauncherUsage, BadOptionsExit2NamingTheOption) {
  const std::string w = worker_path();
  const std::vector<BadCase> cases = {
      {{"--nproc-per-node", "abc", w}, "--nproc-per-node"},
      {{"--nproc_per_node=x1", w}, "--nproc_per_node"},
      {{"--nproc-per-node=0", w}, "--nproc-per-node"},
      {{"--nproc-per-node=-2", w}, "--nproc-per-node"},
      {{"--nnodes=0", w}, "--nnodes"},
      {{"--nnodes=4:1", w}, "--nnodes"},
      {{"--nnodes=1:4", "--node-rank=0", w}, "--nnodes"},
      {{"--rdzv-backend=static", "--nnodes=2", w}, "--node-rank"},
      {{"--rdzv-backend=etcd", w}, "etcd"},
      {{"--rdzv-backend=zk", w}, "--rdzv-backend"},
      {{"--rdzv-endpoint=:12", w}, "--rdzv-endpoint"},
      {{"--rdzv-endpoint=h:99999", w}, "--rdzv-endpoint"},
      {{"--rdzv-conf=join_timeout=soon", w}, "join_timeout"},
      {{"--rdzv-conf=joint_timeout=5", w}, "joint_timeout"},
      {{"--max-restarts=-1", w}, "--max-restarts"},
      {{"--monitor-interval=0", w}, "--monitor-interval"},
      {{"--redirects=4", w}, "--redirects"},
      {{"-r", "x", w}, "-r"},
      {{"--tee=0:9", w}, "--tee"},
      {{"--local-ranks-filter=a", w}, "--local-ranks-filter"},
      {{"--nnodes", "2", "--node-rank", "2", w}, "--node-rank"},
      {{"--node-rank=1", w}, "--node-rank"},
      {{"--node-rank=-1", w}, "--node-rank"},
      {{"--master-port=70000", w}, "--master-port"},
      {{"--master-port=http", w}, "--master-port"},
      {{"--nnodes=2", "--master-port=0", w}, "--master-port"},
      {{"--kill-timeout=-1", w}, "--kill-timeout"},
      {{"--kill-timeout=soon", w}, "--kill-timeout"},
      {{"--use-env=maybe", w}, "--use-env"},
      {{"--standalone", "--nnodes=2", w}, "--standalone"},
      {{"--standalone=1", w}, "--standalone"},
      {{"--bogus", w}, "--bogus"},
      {{"-x", w}, "-x"},
      {{"--n", "2", w}, "ambiguous"},
      {{"--nproc-per-node"}, "--nproc-per-node"},
      {{"--nproc-per-node", "2"}, "PROGRAM"},
      {{}, "PROGRAM"},
  };
  for (const auto& c : cases) {
    std::string shown;
    for (const auto& a : c.args) shown += a + " ";
    SCOPED_TRACE(shown);
    ScratchDir dir;
    Result r = run(dir, c.args);
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_EQ(r.code(), 2) << r.describe();
    EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
    EXPECT_EQ(r.err.rfind("tdistrun: ", 0), 0u) << r.err;
  }
}

TEST(LauncherUsage, ATypoExits2WithOneLineThatSuggestsTheOption) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc_per_nodes=2", worker_path(), "dump", dir.path()});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 2) << r.describe();
  EXPECT_NE(r.err.find("unknown option '--nproc_per_nodes'; did you mean --nproc-per-node?"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(exists(dir.file("rank0.env")));
}

TEST(LauncherUsage, BadEnvironmentNamesTheVariable) {
  ScratchDir dir;
  Result r = run(dir, {worker_path(), "dump", dir.path()}, {"PET_NNODES=many"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 2);
  EXPECT_NE(r.err.find("PET_NNODES"), std::string::npos) << r.err;
}

TEST(LauncherUsage, HelpMentionsEveryOptionAndVariable) {
  ScratchDir dir;
  for (const char* flag : {"--help", "-h"}) {
    Result r = run(dir, {flag});
    ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
    for (const char* word :
         {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port", "--standalone",
          "--rdzv-id", "--role", "--use-env", "--pass-local-rank", "--local-rank=N", "--no-prefix",
          "TDIST_RUN_PREFIX", "--kill-timeout", "--no-python", "--help", "--version", "auto", "RANK", "LOCAL_RANK",
          "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR",
          "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TDIST_LAUNCHED", "OMP_NUM_THREADS", "[rank3]: ", "SIGTERM",
          "SIGKILL", "failed first", "--node-rank=1", "PET_", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-conf",
          "join_timeout", "last_call_timeout", "close_timeout", "--max-restarts", "--monitor-interval", "--log-dir",
          "--redirects", "--tee", "--local-ranks-filter", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
          "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_USE_AGENT_STORE", "TDIST_AGENT_STORE_PREFIX", "SLURM_NODEID",
          "SLURM_JOB_NODELIST", "attempt_", "--module", "--run-path", "PYTHON_EXEC", "--shutdown-timeout",
          "--log-line-prefix-template", "--start-method", "--event-log-handler", "--duplicate-stdout-filters",
          "--duplicate-stderr-filters", "--local-addr", "--logs-specs", "--numa-binding", "--signals-to-handle",
          "--virtual-local-rank", "--print-completion", "etcd"}) {
      EXPECT_NE(r.out.find(word), std::string::npos) << "--help does not mention " << word;
    }
  }
}

TEST(LauncherUsage, Version) {
  ScratchDir dir;
  Result r = run(dir, {"--version"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_NE(r.out.find(TDIST_VERSION_STRING), std::string::npos) << r.out;
}

}  // namespace
}  // namespace launcher_test
