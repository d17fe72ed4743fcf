// tdistrun's elastic agent end to end, several agents on this machine (each
// a "node"): rendezvous without node ranks, restarts after a failure,
// elastic membership (a node dies, a node joins late), error files in the
// failure summary, per-rank log files, and a Slurm allocation. The workers
// train with tdist (elastic_worker) and check every all_reduce.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "run_launcher.h"

namespace launcher_test {
namespace {

const char* elastic_worker() { return ELASTIC_WORKER_PATH; }

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The nodes of one job share a token, as a user sets one on every node.
const std::vector<std::string> kToken = {"TDIST_JOB_TOKEN=elastic-test-token"};

std::string done_line(const ScratchDir& dir) {
  auto lines = lines_of(read_file(dir.file("done")));
  return lines.empty() ? "" : lines[0];
}

// "round R: node N of M" lines an agent printed: the node ranks it got.
std::vector<int> node_ranks_of(const std::string& err) {
  std::vector<int> out;
  for (const auto& line : lines_of(err)) {
    auto at = line.find(": node ");
    if (line.find("tdistrun: round ") != 0 || at == std::string::npos) continue;
    out.push_back(std::atoi(line.c_str() + at + 7));
  }
  return out;
}

size_t count_lines(const std::string& path) { return lines_of(read_file(path)).size(); }

TEST(LauncherElastic, ThreeNodesWithoutNodeRanksFormOneJob) {
  ScratchDir dir;
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  std::vector<std::unique_ptr<Launcher>> nodes;
  for (int n = 0; n < 3; ++n) {
    nodes.push_back(std::make_unique<Launcher>(
        dir,
        std::vector<std::string>{"--nnodes=3", "--nproc-per-node=2", "--rdzv-backend=c10d",
                                 "--rdzv-endpoint=" + endpoint, "--rdzv-id=three", elastic_worker(), dir.path(), "5",
                                 "0"},
        kToken, "node" + std::to_string(n)));
  }
  std::set<int> ranks;
  for (auto& n : nodes) {
    Result r = n->wait(std::chrono::seconds(120));
    ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
    auto got = node_ranks_of(r.err);
    ASSERT_EQ(got.size(), 1u) << r.err;
    ranks.insert(got[0]);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));  // one node rank each, none twice
  EXPECT_EQ(done_line(dir), "world=6 restarts=0 steps=5 sum=105");
}

// The failing rank is alone on its node: when several workers of a node end
// together (the others lose their peer), which is reaped first is not defined.
TEST(LauncherElastic, FailedWorkerIsRestartedAndTheJobFinishes) {
  ScratchDir dir;
  const std::string port = std::to_string(free_port());
  auto args = [&](const std::string& node, const std::string& nproc) {
    // Rank 2 (node 1's only worker) throws at step 3 of the first attempt.
    return std::vector<std::string>{"--nnodes=2", "--node-rank=" + node, "--nproc-per-node=" + nproc,
                                    "--master-port=" + port, "--max-restarts=2", elastic_worker(), dir.path(), "8",
                                    "20", "2", "3"};
  };
  Launcher node0(dir, args("0", "2"), kToken, "node0");
  Launcher node1(dir, args("1", "1"), kToken, "node1");
  Result r1 = node1.wait(std::chrono::seconds(120));
  Result r0 = node0.wait(std::chrono::seconds(120));
  ASSERT_TRUE(r0.exited() && r0.code() == 0) << r0.describe();
  ASSERT_TRUE(r1.exited() && r1.code() == 0) << r1.describe();
  // Nodes of different sizes: 3 ranks, each step sums 1 + 2 + 3.
  EXPECT_EQ(done_line(dir), "world=3 restarts=1 steps=8 sum=48");
  EXPECT_TRUE(exists(dir.file("progress.0")));
  EXPECT_EQ(count_lines(dir.file("progress.1")), 3u * 8u);  // the second attempt ran every step on every rank
  // Node 1's summary shows the error the worker died of, from its error file.
  EXPECT_NE(r1.err.find("tdistrun: rank 2 (local_rank 0, pid "), std::string::npos) << r1.err;
  EXPECT_NE(r1.err.find("tdist::DistError: elastic_worker: rank 2 fails on purpose at step 3"), std::string::npos)
      << r1.err;
  EXPECT_NE(r1.err.find("restarting the workers in a new round"), std::string::npos) << r1.err;
  // The reason is the first failure reported: rank 2, or a rank that lost its connection to it.
  EXPECT_NE(r0.err.find("restarting the workers in a new round: rank "), std::string::npos) << r0.err;
  EXPECT_NE(r0.err.find("restart 1 of at most 2"), std::string::npos) << r0.err;
}

TEST(LauncherElastic, RestartsRunOutAndTheJobFails) {
  ScratchDir dir;
  // Rank 0 fails in every attempt (its fail step is in range whatever the restart count:
  // elastic_worker fails only in attempt 0, so use a worker that always fails).
  Result r = run(dir, {"--nproc-per-node=2", "--max-restarts=1", worker_path(), "fail", "1", "4"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 4) << r.describe();
  EXPECT_NE(r.err.find("restarting the workers in a new round"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no restarts left (--max-restarts 1); exiting with status 4"), std::string::npos) << r.err;
}

TEST(LauncherElastic, NodeThatDiesLeavesASmallerJobThatFinishes) {
  ScratchDir dir;
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  auto args = std::vector<std::string>{"--nnodes=2:3", "--nproc-per-node=2", "--rdzv-endpoint=" + endpoint,
                                       "--max-restarts=1", "--rdzv-conf=last_call_timeout=5", "--rdzv-id=shrink",
                                       elastic_worker(), dir.path(), "150", "40"};
  std::vector<std::unique_ptr<Launcher>> nodes;
  for (int n = 0; n < 3; ++n) nodes.push_back(std::make_unique<Launcher>(dir, args, kToken, "node" + std::to_string(n)));
  // Once the round of all three nodes trains, kill a node that does not host the store (its workers die with it).
  auto all_in_one_round = [&] {
    for (int n = 0; n < 3; ++n) {
      if (read_file(dir.file("node" + std::to_string(n) + ".err")).find(" of 6") == std::string::npos) return false;
    }
    return true;
  };
  ASSERT_TRUE(wait_until(all_in_one_round, std::chrono::seconds(90)));
  ASSERT_TRUE(wait_until([&] { return count_lines(dir.file("progress.0")) >= 6u * 3u; }, std::chrono::seconds(90)));
  int victim = -1;
  for (int n = 0; n < 3 && victim < 0; ++n) {
    if (read_file(dir.file("node" + std::to_string(n) + ".err")).find("joined the rendezvous store") !=
        std::string::npos) {
      victim = n;
    }
  }
  ASSERT_GE(victim, 0);
  nodes[static_cast<size_t>(victim)]->signal(SIGKILL);
  for (int n = 0; n < 3; ++n) {
    Result r = nodes[static_cast<size_t>(n)]->wait(std::chrono::seconds(150));
    if (n == victim) continue;
    ASSERT_TRUE(r.exited() && r.code() == 0) << "node " << n << r.describe();
  }
  EXPECT_EQ(done_line(dir), "world=4 restarts=1 steps=150 sum=1500");
}

TEST(LauncherElastic, RelaunchedNodeRejoinsAStaticJob) {
  ScratchDir dir;
  const std::string port = std::to_string(free_port());
  auto args = [&](const std::string& node) {
    return std::vector<std::string>{"--nnodes=2", "--node-rank=" + node, "--nproc-per-node=2", "--master-port=" + port,
                                    "--max-restarts=1", elastic_worker(), dir.path(), "150", "40"};
  };
  Launcher node0(dir, args("0"), kToken, "node0");
  auto node1 = std::make_unique<Launcher>(dir, args("1"), kToken, "node1");
  ASSERT_TRUE(wait_until([&] { return count_lines(dir.file("progress.0")) >= 4u * 3u; }, std::chrono::seconds(60)));
  node1->signal(SIGKILL);  // node 1 dies with its workers; node 0's fail and wait in the next round
  node1->wait();
  Launcher again(dir, args("1"), kToken, "again");  // the user starts node 1 again
  Result r_again = again.wait(std::chrono::seconds(150));
  Result r0 = node0.wait(std::chrono::seconds(150));
  ASSERT_TRUE(r0.exited() && r0.code() == 0) << r0.describe();
  ASSERT_TRUE(r_again.exited() && r_again.code() == 0) << r_again.describe();
  EXPECT_EQ(done_line(dir), "world=4 restarts=1 steps=150 sum=1500");
}

TEST(LauncherElastic, LateNodeIsAdmittedAtTheNextRound) {
  ScratchDir dir;
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  auto args = std::vector<std::string>{"--nnodes=1:2", "--nproc-per-node=2", "--rdzv-endpoint=" + endpoint,
                                       "--rdzv-conf=last_call_timeout=0.2", elastic_worker(), dir.path(), "200", "40"};
  Launcher first(dir, args, kToken, "first");
  ASSERT_TRUE(wait_until([&] { return count_lines(dir.file("progress.0")) >= 2u * 3u; }, std::chrono::seconds(60)));
  Launcher late(dir, args, kToken, "late");
  Result r_late = late.wait(std::chrono::seconds(150));
  Result r_first = first.wait(std::chrono::seconds(150));
  ASSERT_TRUE(r_first.exited() && r_first.code() == 0) << r_first.describe();
  ASSERT_TRUE(r_late.exited() && r_late.code() == 0) << r_late.describe();
  // A new member is not a failure: the restart count stays 0.
  EXPECT_EQ(done_line(dir), "world=4 restarts=0 steps=200 sum=2000");
  EXPECT_NE(r_first.err.find("a new node asked to join"), std::string::npos) << r_first.err;
  // Round 1's node ranks follow the order of joining it: the late node was waiting already.
  EXPECT_EQ(node_ranks_of(r_first.err), (std::vector<int>{0, 1}));
  EXPECT_EQ(node_ranks_of(r_late.err), (std::vector<int>{0}));
}

TEST(LauncherElastic, FewerThanMinNodesFailsNamingTheRound) {
  ScratchDir dir;
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  Result r = run(dir, {"--nnodes=2:3", "--rdzv-endpoint=" + endpoint, "--rdzv-conf=join_timeout=1", worker_path(),
                       "print"},
                 kToken);
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 1);
  EXPECT_NE(r.err.find("rendezvous round 0: 1 of at least 2 nodes joined within join_timeout 1s"), std::string::npos)
      << r.err;
}

TEST(LauncherElastic, SameNodeRankTwiceIsRefused) {
  ScratchDir dir;
  const std::string port = std::to_string(free_port());
  auto args = std::vector<std::string>{"--nnodes=3", "--node-rank=1", "--master-port=" + port,
                                       "--rdzv-conf=join_timeout=15", worker_path(), "print"};
  Launcher host(dir, {"--nnodes=3", "--node-rank=0", "--master-port=" + port, "--rdzv-conf=join_timeout=15",
                      worker_path(), "print"},
                kToken, "host");
  Launcher a(dir, args, kToken, "a");
  Launcher b(dir, args, kToken, "b");
  Result ra = a.wait(std::chrono::seconds(60));
  Result rb = b.wait(std::chrono::seconds(60));
  const std::string both = ra.err + rb.err;
  EXPECT_NE(both.find("node rank 1 joined twice: two nodes were given the same --node-rank"), std::string::npos)
      << both;
}

TEST(LauncherElastic, LogDirRedirectsTeeAndFilter) {
  ScratchDir dir;
  const std::string logs = dir.file("logs");
  // Local rank 0: stdout to its file only; rank 1: stderr to file and console; console shows rank 1 only.
  Result r = run(dir, {"--nproc-per-node=2", "--log-dir=" + logs, "--rdzv-id=logjob", "-r", "0:1", "--tee=1:2",
                       "--local-ranks-filter=1", worker_path(), "print"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  std::vector<std::string> jobs;
  for (const auto& e : std::filesystem::directory_iterator(logs)) jobs.push_back(e.path().filename());
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].rfind("logjob_", 0), 0u) << jobs[0];
  const std::string attempt = logs + "/" + jobs[0] + "/attempt_0/";
  EXPECT_EQ(read_file(attempt + "0/stdout.log"), "out 0 line1\nout 0 line2\ntail 0");
  EXPECT_FALSE(exists(attempt + "0/stderr.log"));
  EXPECT_EQ(read_file(attempt + "1/stderr.log"), "err 1\n");
  EXPECT_FALSE(exists(attempt + "1/stdout.log"));
  // The console: rank 1's lines only (its stderr tee'd), none of rank 0's.
  EXPECT_EQ(r.out, "[rank1]: out 1 line1\n[rank1]: out 1 line2\n[rank1]: tail 1\n");
  EXPECT_NE(r.err.find("[rank1]: err 1\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[rank0]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("worker logs and error files in " + logs + "/logjob_"), std::string::npos) << r.err;
}

TEST(LauncherElastic, ErrorFileOfAWorkerIsInTheSummary) {
  ScratchDir dir;
  // One worker: with several, a peer that loses it may be reaped first.
  Result r = run(dir, {"--nproc-per-node=1", elastic_worker(), dir.path(), "5", "0", "0", "2"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 128 + SIGABRT) << r.describe();
  const std::string first = "tdistrun: rank 0 (local_rank 0, pid ";
  const size_t at = r.err.find(first);
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("failed first: killed by signal 6 (SIGABRT)", at), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tdistrun:     tdist::DistError: elastic_worker: rank 0 fails on purpose at step 2", at),
            std::string::npos)
      << r.err;
}

// A free port p with 20000 <= p < 40000, so that a Slurm job id gives it (20000 + id % 20000).
int free_port_for_slurm() {
  std::mt19937 gen(std::random_device{}());
  for (int tries = 0; tries < 1000; ++tries) {
    int p = 20000 + static_cast<int>(gen() % 20000);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(p));
    bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (ok) return p;
  }
  throw std::runtime_error("no free port in 20000..39999");
}

TEST(LauncherElastic, SlurmAllocationNeedsNoNodeRank) {
  ScratchDir dir;
  const int port = free_port_for_slurm();
  auto slurm = [&](int node) {
    return cat(kToken, {"SLURM_JOB_ID=" + std::to_string(port - 20000 + 20000 * 7), "SLURM_NODEID=" + std::to_string(node),
                        "SLURM_JOB_NUM_NODES=2", "SLURM_JOB_NODELIST=localhost,otherhost", "SLURM_PROCID=0"});
  };
  // What sbatch runs on each node: the same command, no --nnodes, --node-rank or --master-*.
  const std::vector<std::string> args = {"--nproc-per-node=2", elastic_worker(), dir.path(), "4", "0"};
  Launcher node0(dir, args, cat(slurm(0), {"PET_MASTER_PORT="}), "node0");
  Launcher node1(dir, args, cat(slurm(1), {"PET_MASTER_PORT="}), "node1");
  Result r0 = node0.wait(std::chrono::seconds(120));
  Result r1 = node1.wait(std::chrono::seconds(120));
  ASSERT_TRUE(r0.exited() && r0.code() == 0) << r0.describe();
  ASSERT_TRUE(r1.exited() && r1.code() == 0) << r1.describe();
  EXPECT_EQ(done_line(dir), "world=4 restarts=0 steps=4 sum=40");
  EXPECT_NE(r0.err.find("hosting the rendezvous store on localhost:" + std::to_string(port)), std::string::npos) << r0.err;
  EXPECT_EQ(node_ranks_of(r1.err), (std::vector<int>{1}));
}

}  // namespace
}  // namespace launcher_test
