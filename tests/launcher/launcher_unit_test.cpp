// Unit tests of tdistrun's pieces: option parsing, line prefixing, summary words.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <map>
#include <string>
#include <vector>

#include <cstdio>
#include <filesystem>

#include "error_file.h"
#include "log_files.h"
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
  ParseResult cpu = parse({"--nproc-per-node=cpu", "prog"});
  ASSERT_EQ(cpu.action, Action::kRun) << cpu.error;
  EXPECT_EQ(cpu.options.nproc_per_node, online_cpus());
  // torchrun's auto: one per accelerator where there are some, else one per CPU.
  ParseResult aut = parse({"--nproc-per-node=auto", "prog"});
  ASSERT_EQ(aut.action, Action::kRun) << aut.error;
  EXPECT_EQ(aut.options.nproc_per_node, nvidia_gpus() > 0 ? nvidia_gpus() : online_cpus());
}

TEST(LauncherOptions, NnodesFixedRange) {
  ParseResult r = parse({"--nnodes=2:2", "--node-rank=1", "prog"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.nnodes, 2);
  EXPECT_EQ(r.options.node_rank, 1);
  EXPECT_FALSE(r.options.rdzv.dynamic);
}

TEST(LauncherOptions, RendezvousModes) {
  // Several nodes without node ranks: the c10d rendezvous assigns them.
  ParseResult a = parse({"--nnodes=2", "--rdzv-endpoint=h.example:1234", "prog"});
  ASSERT_EQ(a.action, Action::kRun) << a.error;
  EXPECT_TRUE(a.options.rdzv.dynamic);
  EXPECT_EQ(a.options.master_addr, "h.example");
  EXPECT_EQ(a.options.master_port, 1234);
  ParseResult b = parse({"--nnodes=1:4", "--rdzv-endpoint=[::1]", "--rdzv-conf=join_timeout=9,last_call_timeout=0.5,read_timeout=3", "prog"});
  ASSERT_EQ(b.action, Action::kRun) << b.error;
  EXPECT_TRUE(b.options.rdzv.dynamic);
  EXPECT_EQ(b.options.rdzv.min_nodes, 1);
  EXPECT_EQ(b.options.rdzv.max_nodes, 4);
  EXPECT_EQ(b.options.master_addr, "::1");
  EXPECT_EQ(b.options.master_port, kDefaultRendezvousPort);
  EXPECT_DOUBLE_EQ(b.options.rdzv.join_timeout_s, 9);
  EXPECT_DOUBLE_EQ(b.options.rdzv.last_call_timeout_s, 0.5);
  // --node-rank keeps the static rendezvous; c10d ignores it with a warning.
  ParseResult c = parse({"--nnodes=2", "--node-rank=1", "prog"});
  EXPECT_FALSE(c.options.rdzv.dynamic);
  ParseResult d = parse({"--nnodes=2", "--node-rank=1", "--rdzv-backend=c10d", "prog"});
  EXPECT_TRUE(d.options.rdzv.dynamic);
  ASSERT_EQ(d.options.warnings.size(), 1u);  // the ignored node rank
  ParseResult e = parse({"--max-restarts=3", "--monitor-interval=0.5", "prog"});
  EXPECT_EQ(e.options.max_restarts, 3);
  EXPECT_DOUBLE_EQ(e.options.monitor_interval_s, 0.5);
  EXPECT_FALSE(e.options.rdzv.dynamic);
}

TEST(LauncherOptions, RedirectsTeeAndFilter) {
  ParseResult r = parse({"-r", "3", "-t1:2,0:1", "--local-ranks-filter=0,2", "--log-dir=/x", "prog"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.redirects.of(0), 3);
  EXPECT_EQ(r.options.redirects.of(5), 3);
  EXPECT_EQ(r.options.tee.of(1), 2);
  EXPECT_EQ(r.options.tee.of(0), 1);
  EXPECT_EQ(r.options.tee.of(2), 0);  // per-rank lists name their ranks; the others get none
  EXPECT_EQ(*r.options.local_ranks_filter, (std::set<int>{0, 2}));
  EXPECT_EQ(r.options.log_dir, "/x");
  ParseResult p = parse({"prog"}, {{"PET_REDIRECTS", "2"}, {"PET_MAX_RESTARTS", "4"}});
  EXPECT_EQ(p.options.redirects.of(0), 2);
  EXPECT_EQ(p.options.max_restarts, 4);
}

TEST(LauncherOptions, SlurmGivesTheNodeItsPlace) {
  std::map<std::string, std::string> slurm = {{"SLURM_JOB_ID", "123456"}, {"SLURM_NODEID", "2"},
                                              {"SLURM_JOB_NUM_NODES", "4"}, {"SLURM_JOB_NODELIST", "gpu[07-10],cpu1"}};
  ParseResult r = parse({"--nproc-per-node=8", "prog"}, slurm);
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.node_rank, 2);
  EXPECT_EQ(r.options.nnodes, 4);
  EXPECT_EQ(r.options.master_addr, "gpu07");
  EXPECT_EQ(r.options.master_port, 20000 + 123456 % 20000);
  EXPECT_FALSE(r.options.rdzv.dynamic);
  // The command line wins; a rendezvous option means the user chose another way.
  ParseResult m = parse({"--master-addr=a", "--master-port=7", "prog"}, slurm);
  EXPECT_EQ(m.options.master_addr, "a");
  EXPECT_EQ(m.options.master_port, 7);
  ParseResult c = parse({"--nnodes=4", "--rdzv-endpoint=h:1", "prog"}, slurm);
  EXPECT_TRUE(c.options.rdzv.dynamic);
  slurm["SLURM_NODEID"] = "4";
  ParseResult bad = parse({"prog"}, slurm);
  EXPECT_EQ(bad.action, Action::kUsageError);
  EXPECT_NE(bad.error.find("SLURM_NODEID"), std::string::npos) << bad.error;
  slurm["SLURM_NODEID"] = "0";
  slurm["SLURM_JOB_NODELIST"] = "gpu[07-";
  ParseResult malformed = parse({"prog"}, slurm);
  EXPECT_EQ(malformed.action, Action::kUsageError);
  EXPECT_NE(malformed.error.find("gpu[07-"), std::string::npos) << malformed.error;
}

// ---------------------------------------------------------------------------
// Error files and log layout

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/tdistrun-unit-XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) {
    ssize_t ignored = write(fd, text.data(), text.size());
    (void)ignored;
    close(fd);
  }
  return path;
}

TEST(LauncherErrorFile, TorchFormatAndTdistFormat) {
  std::string torch_file = write_temp(
      R"({"message": {"message": "ValueError: bad \"x\"\nnext", "extraInfo": {"py_callstack": "Traceback\n  File \u0022a.py\u0022", "timestamp": "1"}}})");
  auto e = read_error_file(torch_file);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "ValueError: bad \"x\"\nnext");
  EXPECT_EQ(e->traceback, "Traceback\n  File \"a.py\"");
  std::remove(torch_file.c_str());

  std::string plain = write_temp(R"({"message": "just text", "other": [1, {"a": null}, true]})");
  auto p = read_error_file(plain);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->message, "just text");
  std::remove(plain.c_str());

  for (const char* bad : {"", "{", "not json", R"({"message": )", R"({"other": "x"})", R"({"message": "x"} trailing)"}) {
    std::string f = write_temp(bad);
    EXPECT_FALSE(read_error_file(f).has_value()) << bad;
    std::remove(f.c_str());
  }
  // Nesting deeper than the reader follows is refused, not recursed into.
  std::string deep = write_temp("{\"message\": " + std::string(10000, '[') + std::string(10000, ']') + "}");
  EXPECT_FALSE(read_error_file(deep).has_value());
  std::remove(deep.c_str());
  EXPECT_FALSE(read_error_file("/nonexistent/error.json").has_value());
}

TEST(LauncherErrorFile, SummaryLinesAreBounded) {
  WorkerError e;
  for (int i = 0; i < 50; ++i) e.message += "m" + std::to_string(i) + "\n";
  for (int i = 0; i < 100; ++i) e.traceback += "t" + std::to_string(i) + "\n";
  auto lines = error_lines(e, "/p/error.json");
  EXPECT_EQ(lines.front(), "  error (/p/error.json):");
  EXPECT_EQ(lines[1], "    m0");
  EXPECT_EQ(lines.back(), "    | t99");  // a traceback's end is where the error is
  EXPECT_LT(lines.size(), 60u);
}

TEST(LauncherLogs, LayoutAndTargets) {
  char parent[] = "/tmp/tdistrun-logs-XXXXXX";
  ASSERT_NE(mkdtemp(parent), nullptr);
  ParseResult r = parse({"--log-dir", parent, "--rdzv-id=a/b", "-r", "0:1", "-t", "1:3", "--local-ranks-filter=1", "prog"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  {
    LogLayout logs(r.options);
    EXPECT_TRUE(logs.kept());
    EXPECT_EQ(logs.dir().rfind(std::string(parent) + "/a_b_", 0), 0u) << logs.dir();
    WorkerLogs w0 = logs.for_worker(2, 0);
    EXPECT_FALSE(w0.out.console);  // redirected, and filtered out
    EXPECT_EQ(w0.out.file, logs.dir() + "/attempt_2/0/stdout.log");
    EXPECT_TRUE(w0.err.file.empty());
    EXPECT_FALSE(w0.err.console);  // filtered out
    EXPECT_EQ(w0.error_file, logs.dir() + "/attempt_2/0/error.json");
    WorkerLogs w1 = logs.for_worker(2, 1);
    EXPECT_TRUE(w1.out.console);
    EXPECT_TRUE(w1.err.console);
    EXPECT_EQ(w1.err.file, logs.dir() + "/attempt_2/1/stderr.log");
    EXPECT_TRUE(std::filesystem::is_directory(logs.dir() + "/attempt_2/1"));
  }
  std::filesystem::remove_all(parent);
  // Without --log-dir or redirection the error files live in a directory removed at the end.
  ParseResult plain = parse({"prog"});
  std::string dir;
  {
    LogLayout logs(plain.options);
    EXPECT_FALSE(logs.kept());
    dir = logs.dir();
    WorkerLogs w = logs.for_worker(0, 0);
    EXPECT_TRUE(w.out.console && w.out.file.empty());
    EXPECT_TRUE(std::filesystem::is_directory(dir));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
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

TEST(LauncherOptions, OnFailurePolicy) {
  EXPECT_EQ(parse({"prog"}).options.on_failure, OnFailure::kRestart);
  EXPECT_EQ(parse({"--on-failure", "shrink", "prog"}).options.on_failure, OnFailure::kShrink);
  EXPECT_EQ(parse({"--on_failure=restart", "prog"}).options.on_failure, OnFailure::kRestart);
  EXPECT_EQ(parse({"prog"}, {{"TDIST_ON_FAILURE", "SHRINK"}}).options.on_failure, OnFailure::kShrink);
  EXPECT_EQ(parse({"prog"}, {{"TDIST_ON_FAILURE", ""}}).options.on_failure, OnFailure::kRestart);
  // The command line wins over the environment.
  EXPECT_EQ(parse({"--on-failure=restart", "prog"}, {{"TDIST_ON_FAILURE", "shrink"}}).options.on_failure,
            OnFailure::kRestart);
  ParseResult bad = parse({"--on-failure=sometimes", "prog"});
  ASSERT_EQ(bad.action, Action::kUsageError);
  EXPECT_NE(bad.error.find("'sometimes' for --on-failure"), std::string::npos) << bad.error;
  EXPECT_NE(bad.error.find("restart"), std::string::npos) << bad.error;
  EXPECT_NE(bad.error.find("shrink"), std::string::npos) << bad.error;
  ParseResult bad_env = parse({"prog"}, {{"TDIST_ON_FAILURE", "sometimes"}});
  ASSERT_EQ(bad_env.action, Action::kUsageError);
  EXPECT_NE(bad_env.error.find("TDIST_ON_FAILURE='sometimes'"), std::string::npos) << bad_env.error;
  EXPECT_NE(bad_env.error.find("restart, shrink"), std::string::npos) << bad_env.error;
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

// A typo gets the nearest known options (underscores read as dashes, as
// torchrun does), on the one line of the error; nothing near gets no guess.
TEST(LauncherOptions, AnUnknownOptionSuggestsTheNearestKnownOnes) {
  struct Case {
    std::string typed, suggestion;
  };
  for (const Case& c : std::vector<Case>{
           {"--nproc_per_nodes", "did you mean --nproc-per-node?"},
           {"--nprocs-per-node", "did you mean --nproc-per-node?"},
           {"--master_adress", "did you mean --master-addr?"},
           {"--nndoes", "did you mean --nnodes?"},
           {"--max_restats=3", "did you mean --max-restarts?"},
       }) {
    ParseResult r = parse({c.typed, "prog"});
    EXPECT_EQ(r.action, Action::kUsageError) << c.typed;
    EXPECT_NE(r.error.find(c.suggestion), std::string::npos) << c.typed << ": " << r.error;
    EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error;
  }
  ParseResult far = parse({"--frobnicate", "prog"});
  EXPECT_EQ(far.action, Action::kUsageError);
  EXPECT_EQ(far.error.find("did you mean"), std::string::npos) << far.error;
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

TEST(LauncherSummary, ShrinkListsTheFailuresInTheirOrderWithWhen) {
  std::vector<WorkerEnd> ends(3);
  for (int i = 0; i < 3; ++i) {
    ends[i].rank = i;
    ends[i].local_rank = i;
    ends[i].pid = 100 + i;
    ends[i].status = exited(0);
  }
  ends[2].status = signaled(SIGKILL);
  ends[2].ended_after_s = 0.25;
  ends[1].status = exited(3);
  ends[1].ended_after_s = 1.5;
  EXPECT_EQ(exit_sentence(ends[2]), "rank 2 (local_rank 2, pid 102) was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(exit_sentence(ends[1]), "rank 1 (local_rank 1, pid 101) exited with code 3");
  auto lines = shrink_summary_lines(ends, {2, 1}, {{}, {"  error:", "    boom"}}, 5, 0);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0], "tdistrun: 2 of 3 worker(s) failed and the others ran on (--on-failure shrink):");
  EXPECT_EQ(lines[1], "tdistrun:   rank 2 (local_rank 2, pid 102): killed by signal 9 (SIGKILL), 0.250s after the "
                      "workers started");
  EXPECT_EQ(lines[2], "tdistrun:   rank 1 (local_rank 1, pid 101): exit code 3, 1.500s after the workers started");
  EXPECT_EQ(lines[3], "tdistrun:     error:");
  EXPECT_EQ(lines[4], "tdistrun:       boom");
  EXPECT_EQ(lines[5], "tdistrun:   rank 0 (local_rank 0, pid 100): exited 0");
  EXPECT_EQ(lines[6], "tdistrun: exiting with status 0");
}

}  // namespace
}  // namespace tdistrun
