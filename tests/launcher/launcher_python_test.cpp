// torchrun's command lines end to end: the built tdistrun runs a Python script
// (not executable), a module (-m) and a --run-path script with Python, as
// torchrun does, and a C++ program with --no-python or without it (Python could
// not run it); an unknown option and an etcd rendezvous are refused
// with one clear line; torchrun's options without effect say so in one line.
// The scripts need only Python's standard library.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "run_launcher.h"

namespace launcher_test {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

// Writes what the worker saw to PROBE_DIR/rank<RANK>.txt, one item a line.
constexpr const char* kProbe = R"(import os, sys
rank = os.environ["RANK"]
with open(os.path.join(os.environ["PROBE_DIR"], "rank" + rank + ".txt"), "w") as f:
    f.write("\n".join([sys.executable, __name__, repr(sys.argv), os.environ["WORLD_SIZE"]]) + "\n")
print("hello from", rank)
)";

struct Seen {
  std::string executable, name, argv, world_size;
};

Seen seen_by(const ScratchDir& dir, int rank) {
  auto lines = lines_of(read_file(dir.file("rank" + std::to_string(rank) + ".txt")));
  lines.resize(4);
  return Seen{lines[0], lines[1], lines[2], lines[3]};
}

// A file of mode 0644: torchrun's scripts need not be executable.
std::string write_script(const ScratchDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  chmod(path.c_str(), 0644);
  return path;
}

// Python runs PROGRAM here: the harness's PET_NO_PYTHON=1 is turned off.
std::vector<std::string> python_env(const ScratchDir& dir, std::vector<std::string> more = {}) {
  std::vector<std::string> env{"PET_NO_PYTHON=0", "PYTHON_EXEC=" + std::string(kPython), "PROBE_DIR=" + dir.path()};
  env.insert(env.end(), more.begin(), more.end());
  return env;
}

#define REQUIRE_PYTHON() \
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is not installed"

size_t count_lines(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

TEST(LauncherPython, AScriptThatIsNotExecutableRunsOnTwoRanks) {
  REQUIRE_PYTHON();
  ScratchDir dir;
  const std::string script = write_script(dir, "probe.py", kProbe);
  // torchrun's documentation, single node: --standalone --nnodes=1 --nproc-per-node=N SCRIPT.py ARGS
  Result r = run(dir, {"--standalone", "--nnodes=1", "--nproc_per_node=2", script, "--arg1", "b"}, python_env(dir));
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  for (int rank = 0; rank < 2; ++rank) {
    Seen s = seen_by(dir, rank);
    EXPECT_EQ(s.executable, kPython);
    EXPECT_EQ(s.name, "__main__");
    EXPECT_EQ(s.argv, "['" + script + "', '--arg1', 'b']");
    EXPECT_EQ(s.world_size, "2");
    EXPECT_NE(r.out.find("[rank" + std::to_string(rank) + "]: hello from " + std::to_string(rank) + "\n"),
              std::string::npos)
        << r.out;
  }
}

TEST(LauncherPython, AModuleWithTheLocalRankAfterIt) {
  REQUIRE_PYTHON();
  ScratchDir dir;
  const std::string module = write_script(dir, "tdist_launch_probe.py", kProbe);
  Result r = run(dir, {"--nproc-per-node=2", "--use_env=0", "-m", "tdist_launch_probe", "x"},
                 python_env(dir, {"PYTHONPATH=" + dir.path()}));
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  for (int rank = 0; rank < 2; ++rank) {
    Seen s = seen_by(dir, rank);
    EXPECT_EQ(s.name, "__main__");
    EXPECT_EQ(s.argv, "['" + module + "', '--local-rank=" + std::to_string(rank) + "', 'x']");
  }
}

TEST(LauncherPython, RunPath) {
  REQUIRE_PYTHON();
  ScratchDir dir;
  const std::string script = write_script(dir, "probe.py", kProbe);
  Result r = run(dir, {"--run-path", "--nproc-per-node=1", script, "y"}, python_env(dir));
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  Seen s = seen_by(dir, 0);
  EXPECT_EQ(s.name, "__main__");
  EXPECT_EQ(s.argv, "['" + script + "', 'y']");
}

TEST(LauncherPython, WithoutPythonExecTheConfiguredPython) {
  const std::string configured = TDISTRUN_CONFIGURED_PYTHON;
  if (configured.empty() || access(configured.c_str(), X_OK) != 0) GTEST_SKIP() << "no Python configured";
  ScratchDir dir;
  const std::string script = write_script(dir, "probe.py", kProbe);
  Result r = run(dir, {script}, {"PET_NO_PYTHON=0", "PROBE_DIR=" + dir.path()});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_EQ(seen_by(dir, 0).executable, configured);
}

TEST(LauncherPython, NoPythonExecutesACppProgram) {
  ScratchDir dir;
  Result r = run(dir, {"--no-python", "--nproc-per-node=2", worker_path(), "dump", dir.path()}, {"PET_NO_PYTHON=0"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_TRUE(exists(dir.file("rank0.env")));
  EXPECT_TRUE(exists(dir.file("rank1.env")));
}

// Python could not run it, so tdistrun executes it, as tdist's C++ programs have always been launched.
TEST(LauncherPython, ACompiledProgramRunsWithoutNoPython) {
  ScratchDir dir;
  Result r = run(dir, {"--nproc-per-node=2", worker_path(), "dump", dir.path()}, python_env(dir));
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_TRUE(exists(dir.file("rank0.env")));
  EXPECT_TRUE(exists(dir.file("rank1.env")));
}

TEST(LauncherPython, OptionsWithoutEffectSayOneLineEach) {
  ScratchDir dir;
  Result r = run(dir, {"--start-method=spawn", "--numa_binding", "node", "--signals-to-handle=SIGTERM,SIGUSR1",
                       "--nproc-per-node=1", worker_path(), "dump", dir.path()});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_EQ(count_lines(r.err), 2u) << r.err;  // --signals-to-handle is honoured: no line
  for (const char* given : {"--start-method spawn", "--numa_binding node"}) {
    EXPECT_NE(r.err.find(std::string("tdistrun: warning: ") + given + " has no effect here: "), std::string::npos)
        << r.err;
  }
  Result c = run(dir, {"--print-completion", "bash"});
  ASSERT_TRUE(c.exited() && c.code() == 0) << c.describe();
  EXPECT_EQ(count_lines(c.err), 1u) << c.err;
}

TEST(LauncherPython, TheLinePrefixTemplate) {
  ScratchDir dir;
  Result r = run(dir, {"--log-line-prefix-template=${role_name}${local_rank}|${rank}: ", "--role=trainer",
                       "--nproc-per-node=2", "/bin/sh", "-c", "echo hi"});
  ASSERT_TRUE(r.exited() && r.code() == 0) << r.describe();
  EXPECT_NE(r.out.find("trainer0|0: hi\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trainer1|1: hi\n"), std::string::npos) << r.out;
}

TEST(LauncherPython, AnUnknownOptionAndEtcdAreOneLineErrors) {
  ScratchDir dir;
  Result u = run(dir, {"--frobnicate=3", "train.py"});
  ASSERT_TRUE(u.exited()) << u.describe();
  EXPECT_EQ(u.code(), 2);
  EXPECT_NE(u.err.find("unknown option '--frobnicate'"), std::string::npos) << u.err;
  EXPECT_EQ(count_lines(u.err), 1u) << u.err;
  for (const char* backend : {"etcd", "etcd-v2"}) {
    Result e = run(dir, {"--nnodes=1:2", "--rdzv-backend", backend, "--rdzv-endpoint=localhost:2379", "train.py"});
    ASSERT_TRUE(e.exited()) << e.describe();
    EXPECT_EQ(e.code(), 2);
    EXPECT_NE(e.err.find(std::string("--rdzv-backend ") + backend + ": tdistrun has no etcd rendezvous"),
              std::string::npos)
        << e.err;
    EXPECT_NE(e.err.find("c10d"), std::string::npos) << e.err;
    EXPECT_NE(e.err.find("static"), std::string::npos) << e.err;
    EXPECT_EQ(count_lines(e.err), 1u) << e.err;
  }
}

}  // namespace
}  // namespace launcher_test
