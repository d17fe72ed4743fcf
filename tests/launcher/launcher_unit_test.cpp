// Unit tests of tdistrun's pieces: option parsing, line prefixing, summary words.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <map>
#include <string>
#include <vector>

#include "options.h"
#include "output.h"
#include "summary.h"

namespace tdistrun {
namespace {

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

ParseResult parse(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  return parse_options(args, fake_env(std::move(env)));
}

TEST(LauncherOptions, Defaults) {
  ParseResult r = parse({"prog"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  const Options& o = r.options;
  EXPECT_EQ(o.nproc_per_node, 1);
  EXPECT_EQ(o.nnodes, 1);
  EXPECT_EQ(o.node_rank, 0);
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 29500);
  EXPECT_EQ(o.rdzv_id, "none");
  EXPECT_FALSE(o.pass_local_rank);
  EXPECT_TRUE(o.prefix_output);
  EXPECT_DOUBLE_EQ(o.kill_timeout_s, 5.0);
  EXPECT_EQ(o.program, "prog");
  EXPECT_TRUE(o.program_args.empty());
}

TEST(LauncherOptions, OptionsEndAtProgramOrDoubleDash) {
  ParseResult r = parse({"--nnodes=1", "prog", "--nnodes=3", "-x"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.program, "prog");
  EXPECT_EQ(r.options.program_args, (std::vector<std::string>{"--nnodes=3", "-x"}));

  r = parse({"--", "--weird-name", "a"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.program, "--weird-name");
  EXPECT_EQ(r.options.program_args, (std::vector<std::string>{"a"}));
}

TEST(LauncherOptions, LastOccurrenceWins) {
  ParseResult r = parse({"--nproc-per-node=2", "--nproc_per_node", "3", "prog"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.nproc_per_node, 3);
}

TEST(LauncherOptions, AutoAndCpu) {
  for (const char* v : {"auto", "cpu"}) {
    ParseResult r = parse({std::string("--nproc-per-node=") + v, "prog"});
    ASSERT_EQ(r.action, Action::kRun) << r.error;
    EXPECT_EQ(r.options.nproc_per_node, online_cpus());
  }
}

TEST(LauncherOptions, NnodesFixedRange) {
  ParseResult r = parse({"--nnodes=2:2", "--node-rank=1", "prog"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.nnodes, 2);
  EXPECT_EQ(r.options.node_rank, 1);
}

TEST(LauncherOptions, StandaloneOverridesMaster) {
  ParseResult r = parse({"--standalone", "--master-addr=10.0.0.1", "--master-port=1234", "prog"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.master_addr, "127.0.0.1");
  EXPECT_EQ(r.options.master_port, 0);  // main picks a free port
  EXPECT_EQ(r.options.warnings.size(), 2u);
}

TEST(LauncherOptions, UseEnvForms) {
  EXPECT_FALSE(parse({"--use-env", "prog"}).options.pass_local_rank);
  EXPECT_FALSE(parse({"--use-env=true", "prog"}).options.pass_local_rank);
  EXPECT_TRUE(parse({"--use-env=false", "prog"}).options.pass_local_rank);
  EXPECT_TRUE(parse({"--use_env=0", "prog"}).options.pass_local_rank);
  EXPECT_TRUE(parse({"--pass-local-rank", "prog"}).options.pass_local_rank);
}

TEST(LauncherOptions, PrefixSwitches) {
  EXPECT_FALSE(parse({"--no-prefix", "prog"}).options.prefix_output);
  EXPECT_FALSE(parse({"prog"}, {{"TDIST_RUN_PREFIX", "0"}}).options.prefix_output);
  EXPECT_TRUE(parse({"prog"}, {{"TDIST_RUN_PREFIX", "1"}}).options.prefix_output);
  EXPECT_EQ(parse({"prog"}, {{"TDIST_RUN_PREFIX", "maybe"}}).action, Action::kUsageError);
}

TEST(LauncherOptions, PetDefaultsAndCommandLineWins) {
  ParseResult r = parse({"--nnodes=4", "prog"}, {{"PET_NPROC_PER_NODE", "3"}, {"PET_NNODES", "2"},
                                                 {"PET_MASTER_ADDR", "node0"}, {"PET_STANDALONE", "0"}});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.nproc_per_node, 3);
  EXPECT_EQ(r.options.nnodes, 4);
  EXPECT_EQ(r.options.master_addr, "node0");
  EXPECT_FALSE(r.options.standalone);
}

TEST(LauncherOptions, HelpAndVersion) {
  EXPECT_EQ(parse({"--help"}).action, Action::kHelp);
  EXPECT_EQ(parse({"-h", "prog"}).action, Action::kHelp);
  EXPECT_EQ(parse({"--he"}).action, Action::kHelp);
  EXPECT_EQ(parse({"--version"}).action, Action::kVersion);
  // After PROGRAM, --help belongs to the program.
  EXPECT_EQ(parse({"prog", "--help"}).action, Action::kRun);
}

TEST(LauncherOptions, ErrorsNameTheOption) {
  struct Case {
    std::vector<std::string> args;
    std::string names;
  };
  for (const Case& c : std::vector<Case>{
           {{"--nproc-per-node=two", "prog"}, "--nproc-per-node"},
           {{"--nproc=0", "prog"}, "--nproc-per-node"},  // abbreviation: the full name is shown
           {{"--nnodes", "prog"}, "--nnodes"},          // "prog" taken as the value
           {{"--master-port", "99999", "prog"}, "--master-port"},
           {{"--no-prefix=1", "prog"}, "--no-prefix"},
           {{"--unknown_thing", "prog"}, "--unknown_thing"},
           {{"--no", "prog"}, "ambiguous"},
       }) {
    ParseResult r = parse(c.args);
    EXPECT_EQ(r.action, Action::kUsageError) << c.args[0];
    EXPECT_NE(r.error.find(c.names), std::string::npos) << r.error;
  }
}

// ---------------------------------------------------------------------------

struct Captured {
  std::vector<std::string> emits;
  std::string all() const {
    std::string s;
    for (const auto& e : emits) s += e;
    return s;
  }
};

LinePrefixer prefixer(Captured& c, size_t max_line = LinePrefixer::kDefaultMaxLine) {
  return LinePrefixer("[rank7]: ", [&c](std::string_view d) { c.emits.emplace_back(d); }, max_line);
}

TEST(LauncherLinePrefixer, WholeLinesOnly) {
  Captured c;
  auto p = prefixer(c);
  p.feed("a\nb");
  EXPECT_EQ(c.all(), "[rank7]: a\n");
  p.feed("c");
  EXPECT_EQ(c.all(), "[rank7]: a\n");
  EXPECT_EQ(p.pending(), 2u);
  p.feed("d\ne\n\n");
  EXPECT_EQ(c.all(), "[rank7]: a\n[rank7]: bcd\n[rank7]: e\n[rank7]: \n");
  p.finish();  // nothing pending: nothing emitted
  EXPECT_EQ(c.all(), "[rank7]: a\n[rank7]: bcd\n[rank7]: e\n[rank7]: \n");
}

TEST(LauncherLinePrefixer, OneEmitPerFeed) {
  Captured c;
  auto p = prefixer(c);
  p.feed("1\n2\n3\n");
  ASSERT_EQ(c.emits.size(), 1u);
  EXPECT_EQ(c.emits[0], "[rank7]: 1\n[rank7]: 2\n[rank7]: 3\n");
}

TEST(LauncherLinePrefixer, FinishFlushesPartialLine) {
  Captured c;
  auto p = prefixer(c);
  p.feed("x\nhalf");
  p.finish();
  EXPECT_EQ(c.all(), "[rank7]: x\n[rank7]: half\n");
  EXPECT_EQ(p.pending(), 0u);
}

TEST(LauncherLinePrefixer, LongLinesSplitAtTheLimit) {
  Captured c;
  auto p = prefixer(c, 4);
  p.feed("abcdefghij");
  EXPECT_EQ(c.all(), "[rank7]: abcd\n[rank7]: efgh\n");
  EXPECT_EQ(p.pending(), 2u);
  p.feed("kl\nmnop\n");
  EXPECT_EQ(c.all(), "[rank7]: abcd\n[rank7]: efgh\n[rank7]: ijkl\n[rank7]: mnop\n");
}

// ---------------------------------------------------------------------------

int exited(int code) { return (code & 0xff) << 8; }  // a wait status, as W* macros read it
int signaled(int sig) { return sig & 0x7f; }

TEST(LauncherSummary, Statuses) {
  ASSERT_TRUE(WIFEXITED(exited(3)));
  ASSERT_TRUE(WIFSIGNALED(signaled(SIGKILL)));
  EXPECT_EQ(describe_status(exited(0)), "exited 0");
  EXPECT_EQ(describe_status(exited(3)), "exit code 3");
  EXPECT_EQ(describe_status(signaled(SIGKILL)), "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(exit_code_of(exited(3)), 3);
  EXPECT_EQ(exit_code_of(signaled(SIGSEGV)), 128 + SIGSEGV);
}

TEST(LauncherSummary, EndsCausedByTheLauncher) {
  WorkerEnd e;
  e.status = signaled(SIGTERM);
  e.signal_sent = SIGTERM;
  EXPECT_EQ(describe_end(e, 5), "terminated by the launcher (SIGTERM)");
  e.forwarded = true;
  EXPECT_EQ(describe_end(e, 5), "terminated by SIGTERM (forwarded by the launcher)");
  e.status = signaled(SIGKILL);
  e.escalated = true;
  EXPECT_EQ(describe_end(e, 5), "killed by the launcher with SIGKILL after the 5s grace period");
  e.status = exited(0);
  EXPECT_EQ(describe_end(e, 5), "exited 0 (after the launcher sent SIGTERM)");
  WorkerEnd plain;
  plain.status = exited(0);
  EXPECT_EQ(describe_end(plain, 5), "exited 0");
}

TEST(LauncherSummary, FirstFailureFirstThenByRank) {
  std::vector<WorkerEnd> ends(3);
  for (int i = 0; i < 3; ++i) {
    ends[i].rank = 4 + i;
    ends[i].local_rank = i;
    ends[i].pid = 100 + i;
    ends[i].status = signaled(SIGTERM);
    ends[i].signal_sent = SIGTERM;
  }
  ends[2].status = exited(3);
  ends[2].signal_sent = 0;
  auto lines = summary_lines(ends, 2, 0, 5, 3);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "tdistrun: rank 6 (local_rank 2, pid 102) failed first: exit code 3");
  EXPECT_EQ(lines[1], "tdistrun:   rank 4 (local_rank 0, pid 100): terminated by the launcher (SIGTERM)");
  EXPECT_EQ(lines[2], "tdistrun:   rank 5 (local_rank 1, pid 101): terminated by the launcher (SIGTERM)");
  EXPECT_EQ(lines[3], "tdistrun: exiting with status 3");
}

}  // namespace
}  // namespace tdistrun
