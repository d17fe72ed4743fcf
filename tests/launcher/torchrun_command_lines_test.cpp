// torchrun's command lines parsed by tdistrun: the examples of torchrun's
// documentation and of Slurm templates as the shell expands them, every
// option of torch 2.x's torchrun in both spellings, the options without effect
// here (one line each), and the workers' command (Python unless --no-python).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "options.h"
#include "output.h"
#include "program.h"
#include "worker.h"

namespace tdistrun {
namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup env_of(Vars vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

ParseResult parse(std::vector<std::string> args, Vars env = {}) { return parse_options(args, env_of(std::move(env))); }

size_t count_containing(const std::vector<std::string>& lines, const std::string& text) {
  size_t n = 0;
  for (const auto& l : lines) n += l.find(text) != std::string::npos;
  return n;
}

// docs.pytorch.org/docs/stable/elastic/run.html, with $NUM_TRAINERS=4, $NUM_NODES=2,
// $JOB_ID=1234 and $HOST_NODE_ADDR=node1.example.com:29400.
TEST(TorchrunCommandLines, SingleNodeMultiWorker) {
  ParseResult r = parse({"--standalone", "--nnodes=1", "--nproc-per-node=4", "train.py", "--arg1", "x"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_TRUE(r.options.standalone);
  EXPECT_EQ(r.options.nproc_per_node, 4);
  EXPECT_EQ(r.options.master_port, 0);  // a free port
  EXPECT_EQ(r.options.program_kind, ProgramKind::kPythonScript);
  EXPECT_EQ(r.options.program, "train.py");
  EXPECT_EQ(r.options.program_args, (std::vector<std::string>{"--arg1", "x"}));
  EXPECT_TRUE(r.options.warnings.empty());
}

TEST(TorchrunCommandLines, StackedSingleNode) {
  ParseResult r = parse({"--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0", "--nnodes=1", "--nproc-per-node=4",
                         "train.py"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_TRUE(r.options.rdzv.dynamic);
  EXPECT_EQ(r.options.master_addr, "localhost");
  EXPECT_EQ(r.options.master_port, 0);
}

TEST(TorchrunCommandLines, FaultTolerant) {
  ParseResult r = parse({"--nnodes=2", "--nproc-per-node=4", "--max-restarts=3", "--rdzv-id=1234",
                         "--rdzv-backend=c10d", "--rdzv-endpoint=node1.example.com:29400", "train.py"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_TRUE(r.options.rdzv.dynamic);
  EXPECT_EQ(r.options.nnodes, 2);
  EXPECT_EQ(r.options.max_restarts, 3);
  EXPECT_EQ(r.options.rdzv_id, "1234");
  EXPECT_EQ(r.options.master_addr, "node1.example.com");
  EXPECT_EQ(r.options.master_port, 29400);
}

TEST(TorchrunCommandLines, ElasticMinMax) {
  ParseResult r = parse({"--nnodes=1:4", "--nproc-per-node=4", "--max-restarts=3", "--rdzv-id=1234",
                         "--rdzv-backend=c10d", "--rdzv-endpoint=node1.example.com", "train.py"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.rdzv.min_nodes, 1);
  EXPECT_EQ(r.options.rdzv.max_nodes, 4);
  EXPECT_EQ(r.options.master_port, kDefaultRendezvousPort);  // torchrun's default for HOST alone
}

TEST(TorchrunCommandLines, LegacyLaunchTwoNodes) {
  // torch.distributed.launch's documentation, node 2 of 2.
  ParseResult r = parse({"--nproc-per-node=8", "--nnodes=2", "--node-rank=1", "--master-addr=192.168.1.1",
                         "--master-port=1234", "train.py", "--arg1"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_FALSE(r.options.rdzv.dynamic);
  EXPECT_EQ(r.options.node_rank, 1);
  EXPECT_EQ(r.options.master_addr, "192.168.1.1");
  EXPECT_EQ(r.options.master_port, 1234);
}

// Inside an allocation of 4 nodes, on the third (Slurm's variables as srun sets them).
const Vars kSlurm = {{"SLURM_JOB_ID", "812345"}, {"SLURM_NODEID", "2"}, {"SLURM_JOB_NUM_NODES", "4"},
                     {"SLURM_NNODES", "4"}, {"SLURM_JOB_NODELIST", "gpu[01-04]"}, {"SLURM_GPUS_ON_NODE", "8"}};

TEST(TorchrunCommandLines, SlurmC10dTemplate) {
  // pytorch/examples' sbatch_run.sh: srun torchrun --nnodes 4 --nproc_per_node 1 --rdzv_id $RANDOM
  //   --rdzv_backend c10d --rdzv_endpoint $head_node_ip:29500 /shared/examples/multinode_torchrun.py 50 10
  ParseResult r = parse({"--nnodes", "4", "--nproc_per_node", "1", "--rdzv_id", "17321", "--rdzv_backend", "c10d",
                         "--rdzv_endpoint", "10.0.0.11:29500", "/shared/examples/multinode_torchrun.py", "50", "10"},
                        kSlurm);
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_TRUE(r.options.rdzv.dynamic);  // the rendezvous, not SLURM_NODEID, assigns node ranks
  EXPECT_EQ(r.options.nnodes, 4);
  EXPECT_EQ(r.options.rdzv_id, "17321");
  EXPECT_EQ(r.options.master_addr, "10.0.0.11");
  EXPECT_EQ(r.options.master_port, 29500);
  EXPECT_EQ(r.options.program, "/shared/examples/multinode_torchrun.py");
  EXPECT_EQ(r.options.program_args, (std::vector<std::string>{"50", "10"}));
}

TEST(TorchrunCommandLines, SlurmStaticTemplate) {
  // srun torchrun --nnodes $SLURM_NNODES --nproc-per-node $SLURM_GPUS_ON_NODE --node_rank $SLURM_NODEID
  //   --master_addr $MASTER_ADDR --master_port $MASTER_PORT train.py --config c.yaml
  ParseResult r = parse({"--nnodes", "4", "--nproc-per-node", "8", "--node_rank", "2", "--master_addr", "gpu01",
                         "--master_port", "29501", "train.py", "--config", "c.yaml"},
                        kSlurm);
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_FALSE(r.options.rdzv.dynamic);
  EXPECT_EQ(r.options.node_rank, 2);
  EXPECT_EQ(r.options.nproc_per_node, 8);
  EXPECT_EQ(r.options.master_addr, "gpu01");
  EXPECT_EQ(r.options.master_port, 29501);
}

TEST(TorchrunCommandLines, SlurmWithModuleAndRestarts) {
  // srun torchrun --nnodes=$SLURM_JOB_NUM_NODES --nproc_per_node=$SLURM_GPUS_ON_NODE --rdzv_id=$SLURM_JOB_ID
  //   --rdzv_backend=c10d --rdzv_endpoint=$head:29500 --max_restarts=3 -m trainer.main --epochs 2
  ParseResult r = parse({"--nnodes=4", "--nproc_per_node=8", "--rdzv_id=812345", "--rdzv_backend=c10d",
                         "--rdzv_endpoint=gpu01:29500", "--max_restarts=3", "-m", "trainer.main", "--epochs", "2"},
                        kSlurm);
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  EXPECT_EQ(r.options.program_kind, ProgramKind::kPythonModule);
  EXPECT_EQ(r.options.program, "trainer.main");
  EXPECT_EQ(r.options.program_args, (std::vector<std::string>{"--epochs", "2"}));
  EXPECT_EQ(r.options.max_restarts, 3);
}

// Every option of torchrun (torch 2.15's run.py) in both spellings, with a
// value torchrun takes: accepted, each with at most one line for the user.
TEST(TorchrunOptions, EveryOptionInBothSpellings) {
  struct Opt {
    std::string dashed;
    std::string value;  // "" for a flag
  };
  const std::vector<Opt> options = {
      {"nnodes", "1"}, {"nproc-per-node", "2"}, {"rdzv-backend", "c10d"}, {"rdzv-endpoint", "localhost:0"},
      {"rdzv-id", "job"}, {"rdzv-conf", "join_timeout=5,read_timeout=60"}, {"standalone", ""},
      {"max-restarts", "1"}, {"monitor-interval", "1"}, {"start-method", "forkserver"},
      {"event-log-handler", "null"}, {"role", "trainer"}, {"module", ""}, {"no-python", ""}, {"run-path", ""},
      {"log-dir", "/tmp/logs"}, {"redirects", "3"}, {"tee", "0:3"}, {"log-line-prefix-template", "${rank}: "},
      {"local-ranks-filter", "0,1"}, {"duplicate-stdout-filters", "loss,,acc"}, {"duplicate-stderr-filters", ""},
      {"node-rank", "0"}, {"master-addr", "127.0.0.1"}, {"master-port", "29500"}, {"local-addr", "10.0.0.2"},
      {"logs-specs", "my_specs"}, {"numa-binding", "core-complex"}, {"signals-to-handle", "SIGTERM,SIGUSR1,SIGUSR2"},
      {"shutdown-timeout", "30"}, {"virtual-local-rank", ""}, {"use-env", ""}};
  for (const auto& o : options) {
    std::string underscored = o.dashed;
    for (char& c : underscored) c = c == '-' ? '_' : c;
    for (const std::string& name : {o.dashed, underscored}) {
      for (bool inline_value : {false, true}) {
        std::vector<std::string> args{"--" + name};
        const bool flag = o.value.empty() && o.dashed.find("filters") == std::string::npos;
        if (!flag) {
          if (inline_value) {
            args[0] += "=" + o.value;
          } else {
            args.push_back(o.value);
          }
        }
        args.push_back("train.py");
        ParseResult r = parse(args);
        EXPECT_EQ(r.action, Action::kRun) << args[0] << ": " << r.error;
        EXPECT_LE(r.options.warnings.size(), 1u) << args[0];
      }
    }
  }
  // torchrun's short options.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-m", "pkg.mod"}, {"-r", "1", "t.py"}, {"-t", "2", "t.py"}, {"-r3", "t.py"}, {"-t=0:1", "t.py"}}) {
    EXPECT_EQ(parse(args).action, Action::kRun) << args[0];
  }
}

TEST(TorchrunOptions, OptionsWithoutEffectSayOneLineEach) {
  ParseResult r = parse({"--start-method=fork", "--numa-binding", "node", "--local_addr=10.0.0.2", "--logs-specs=x",
                         "--event-log-handler=null", "--duplicate-stdout-filters=a,b", "--duplicate_stderr_filters=c",
                         "train.py"});
  ASSERT_EQ(r.action, Action::kRun) << r.error;
  const auto& w = r.options.warnings;
  EXPECT_EQ(w.size(), 7u);
  EXPECT_EQ(count_containing(w, "has no effect here: "), 7u);
  EXPECT_EQ(count_containing(w, "--start-method fork has no effect here"), 1u);
  EXPECT_EQ(count_containing(w, "--numa-binding node has no effect"), 1u);
  EXPECT_EQ(count_containing(w, "--local_addr 10.0.0.2 has no effect"), 1u);
  for (const auto& line : w) EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  // Their environment forms too.
  ParseResult e = parse({"train.py"}, {{"PET_START_METHOD", "spawn"}});
  ASSERT_EQ(e.action, Action::kRun) << e.error;
  ASSERT_EQ(e.options.warnings.size(), 1u);
  EXPECT_NE(e.options.warnings[0].find("PET_START_METHOD=spawn has no effect here"), std::string::npos);
  // --print-completion prints its line and runs nothing, as torchrun's exits.
  ParseResult c = parse({"--print-completion", "zsh"});
  EXPECT_EQ(c.action, Action::kNothing);
  ASSERT_EQ(c.options.warnings.size(), 1u);
  EXPECT_NE(c.options.warnings[0].find("no shell completion"), std::string::npos);
}

TEST(TorchrunOptions, WrongValuesNameTheOptionAndValue) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> words;
  };
  for (const Case& c : std::vector<Case>{
           {{"--start-method=thread", "t.py"}, {"--start-method", "'thread'", "spawn, fork, forkserver"}},
           {{"--numa_binding", "near", "t.py"}, {"--numa_binding", "'near'", "node, socket, exclusive, core-complex"}},
           {{"--signals-to-handle=SIGTERM,SIGFOO", "t.py"}, {"--signals-to-handle", "SIGFOO"}},
           {{"--shutdown-timeout=-1", "t.py"}, {"--shutdown-timeout", "'-1'"}},
           {{"--print-completion=fish"}, {"--print-completion", "bash, zsh, tcsh"}},
           {{"--no-python", "-m", "pkg.mod"}, {"--no-python", "-m", "cannot be used together"}},
           {{"--nproc-per-node=xpu", "t.py"}, {"--nproc-per-node", "xpu"}},
           {{"t.py"}, {"PET_NO_PYTHON", "'yes please'"}},
       }) {
    ParseResult r = c.args.size() == 1 && c.args[0] == "t.py" ? parse(c.args, {{"PET_NO_PYTHON", "yes please"}})
                                                                : parse(c.args);
    ASSERT_EQ(r.action, Action::kUsageError) << c.args[0];
    for (const auto& word : c.words) EXPECT_NE(r.error.find(word), std::string::npos) << word << " in: " << r.error;
  }
}

TEST(TorchrunOptions, EtcdAndUnknownBackendsNameTheOnesThatExist) {
  for (const char* backend : {"etcd", "etcd-v2", "zookeeper"}) {
    ParseResult r = parse({"--rdzv-backend", backend, "--rdzv-endpoint=h:2379", "t.py"});
    ASSERT_EQ(r.action, Action::kUsageError) << backend;
    EXPECT_NE(r.error.find(std::string("--rdzv-backend ") + backend), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("c10d"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("static"), std::string::npos) << r.error;
  }
  EXPECT_NE(parse({"--rdzv-backend=etcd", "t.py"}).error.find("no etcd"), std::string::npos);
}

TEST(TorchrunOptions, HowProgramRuns) {
  EXPECT_EQ(parse({"t.py"}).options.program_kind, ProgramKind::kPythonScript);
  EXPECT_EQ(parse({"--module", "pkg"}).options.program_kind, ProgramKind::kPythonModule);
  EXPECT_EQ(parse({"--no_python", "./a.out"}).options.program_kind, ProgramKind::kExecutable);
  EXPECT_EQ(parse({"./a.out"}, {{"PET_NO_PYTHON", "1"}}).options.program_kind, ProgramKind::kExecutable);
  EXPECT_EQ(parse({"t.py"}, {{"PET_NO_PYTHON", "0"}}).options.program_kind, ProgramKind::kPythonScript);
  EXPECT_EQ(parse({"--no-python", "./a.out"}, {{"PET_NO_PYTHON", "0"}}).options.program_kind, ProgramKind::kExecutable);
  // --run-path takes precedence over --no-python and -m (torchrun's order), saying so.
  ParseResult r = parse({"--run-path", "--no-python", "/abs/t.py"});
  EXPECT_EQ(r.options.program_kind, ProgramKind::kPythonRunPath);
  ASSERT_EQ(r.options.warnings.size(), 1u);
  EXPECT_NE(r.options.warnings[0].find("--no-python is ignored"), std::string::npos);
  // -m is an option: more options may follow it, as in torchrun.
  ParseResult m = parse({"-m", "--nproc-per-node=2", "pkg.train", "--lr=1"});
  ASSERT_EQ(m.action, Action::kRun) << m.error;
  EXPECT_EQ(m.options.nproc_per_node, 2);
  EXPECT_EQ(m.options.program, "pkg.train");
}

TEST(TorchrunOptions, ShutdownTimeoutIsTheKillTimeout) {
  EXPECT_DOUBLE_EQ(parse({"--shutdown-timeout=30", "t.py"}).options.kill_timeout_s, 30);
  EXPECT_DOUBLE_EQ(parse({"t.py"}, {{"PET_SHUTDOWN_TIMEOUT", "12"}}).options.kill_timeout_s, 12);
  EXPECT_DOUBLE_EQ(parse({"t.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}}).options.kill_timeout_s, 7);
  EXPECT_DOUBLE_EQ(parse({"--shutdown-timeout=30", "--kill-timeout=2", "t.py"}).options.kill_timeout_s, 2);
  EXPECT_NE(parse({"t.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}}).error.find("TORCH_ELASTIC_SHUTDOWN_TIMEOUT"),
            std::string::npos);
}

TEST(TorchrunOptions, LinePrefixTemplate) {
  EXPECT_EQ(parse({"--log-line-prefix-template=${rank}| ", "t.py"}).options.line_prefix_template, "${rank}| ");
  EXPECT_EQ(parse({"t.py"}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[$rank]"}}).options.line_prefix_template,
            "[$rank]");
  const LinePrefixValues v{"trainer", 13, 5, "node7"};
  EXPECT_EQ(render_line_prefix("${hostname}:${rank}: ", v), "node7:13: ");
  EXPECT_EQ(render_line_prefix("[${role_name}${local_rank}]:", v), "[trainer5]:");
  EXPECT_EQ(render_line_prefix("$rank/$local_rank $$ $other ${nope} ${rank", v), "13/5 $ $other ${nope} ${rank");
  EXPECT_EQ(render_line_prefix("$", v), "$");
}

// torchrun's --signals-to-handle: the signals tdistrun passes on and stops the workers with.
TEST(TorchrunOptions, SignalsToHandleAreTheSignalsPassedOn) {
  EXPECT_EQ(parse({"t.py"}).options.signals_to_handle, (std::vector<int>{SIGINT, SIGTERM, SIGHUP, SIGQUIT}));
  EXPECT_EQ(parse({"--signals-to-handle", "SIGTERM, SIGUSR1,SIGUSR2,SIGTERM", "t.py"}).options.signals_to_handle,
            (std::vector<int>{SIGTERM, SIGUSR1, SIGUSR2}));
  EXPECT_EQ(parse({"t.py"}, {{"PET_SIGNALS_TO_HANDLE", "SIGINT"}}).options.signals_to_handle, std::vector<int>{SIGINT});
  EXPECT_TRUE(parse({"--signals_to_handle=SIGUSR1", "t.py"}).options.warnings.empty());
  for (const char* bad : {"SIGKILL", "SIGTERM,SIGSTOP", "SIGCHLD", "SIGTERM,", "TERM"}) {
    ParseResult r = parse({std::string("--signals-to-handle=") + bad, "t.py"});
    EXPECT_EQ(r.action, Action::kUsageError) << bad;
    EXPECT_NE(r.error.find("--signals-to-handle"), std::string::npos) << r.error;
  }
  // As torchrun's agent leaves it in the workers' environment.
  Options opt = parse({"--signals-to-handle=SIGTERM,SIGUSR1", "t.py"}).options;
  bool found = false;
  for (const auto& [k, v] : worker_variables(opt, WorkerPlacement{}, 0, false, ""))
    if (k == "TORCHELASTIC_SIGNALS_TO_HANDLE") found = v == "SIGTERM,SIGUSR1";
  EXPECT_TRUE(found);
}

// torchrun's --virtual-local-rank: LOCAL_RANK 0 everywhere, each worker its own device as device 0.
TEST(TorchrunOptions, VirtualLocalRank) {
  auto vars_of = [](const Options& opt, int local_rank, bool home_cpu_set = false) {
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : worker_variables(opt, WorkerPlacement{}, local_rank, false, "", home_cpu_set)) out[k] = v;
    return out;
  };
  Options plain = parse({"--nproc-per-node=3", "t.py"}).options;
  EXPECT_EQ(vars_of(plain, 2)["LOCAL_RANK"], "2");
  EXPECT_EQ(vars_of(plain, 2).count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(vars_of(plain, 2).count("TDIST_HOME_CPU"), 0u);

  Options v = parse({"--nproc-per-node=3", "--virtual-local-rank", "t.py"}).options;
  ASSERT_TRUE(v.virtual_local_rank);
  EXPECT_TRUE(v.warnings.empty());
  auto w2 = vars_of(v, 2);
  EXPECT_EQ(w2["LOCAL_RANK"], "0");
  EXPECT_EQ(w2["RANK"], "2");
  EXPECT_EQ(w2["CUDA_VISIBLE_DEVICES"], "2");
  EXPECT_EQ(w2.count("HIP_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(w2["TDIST_HOME_CPU"], "0");  // all LOCAL_RANK 0: no shared home CPU
  EXPECT_EQ(vars_of(v, 2, true).count("TDIST_HOME_CPU"), 0u);  // the user's choice stands

  Options listed = parse({"--nproc-per-node=2", "--virtual-local-rank", "t.py"},
                         {{"CUDA_VISIBLE_DEVICES", "4, 6,7"}}).options;
  EXPECT_EQ(vars_of(listed, 0)["CUDA_VISIBLE_DEVICES"], "4");
  EXPECT_EQ(vars_of(listed, 1)["CUDA_VISIBLE_DEVICES"], "6");
  Options hip = parse({"--nproc-per-node=2", "t.py"},
                      {{"PET_VIRTUAL_LOCAL_RANK", "1"}, {"HIP_VISIBLE_DEVICES", "1,0"}, {"CUDA_VISIBLE_DEVICES", "5"}})
                    .options;
  EXPECT_EQ(vars_of(hip, 0)["HIP_VISIBLE_DEVICES"], "1");
  EXPECT_EQ(vars_of(hip, 0)["CUDA_VISIBLE_DEVICES"], "1");
  EXPECT_FALSE(parse({"t.py"}, {{"PET_VIRTUAL_LOCAL_RANK", "0"}}).options.virtual_local_rank);

  ParseResult short_list = parse({"--nproc-per-node=3", "--virtual-local-rank", "t.py"}, {{"CUDA_VISIBLE_DEVICES", "0,1"}});
  ASSERT_EQ(short_list.action, Action::kUsageError);
  EXPECT_NE(short_list.error.find("CUDA_VISIBLE_DEVICES=0,1"), std::string::npos) << short_list.error;
  EXPECT_NE(short_list.error.find("3 local ranks"), std::string::npos) << short_list.error;
}

// ---------------------------------------------------------------------------
// The workers' command.

class ScratchFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/tdist-program-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0644) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  std::string dir_;
};

using WorkerCommandTest = ScratchFiles;

Options options_for(std::vector<std::string> args) {
  ParseResult r = parse(std::move(args));
  EXPECT_EQ(r.action, Action::kRun) << r.error;
  return r.options;
}

TEST_F(WorkerCommandTest, PythonRunsTheScriptWithPythonExec) {
  const std::string script = write("train.py", "print('hi')\n");  // not executable
  Options opt = options_for({"--pass-local-rank", script, "--lr", "1"});
  std::string error;
  auto cmd = worker_command(opt, env_of({{"PYTHON_EXEC", "/bin/sh"}}), &error);
  ASSERT_TRUE(cmd) << error;
  EXPECT_EQ(cmd->path, "/bin/sh");
  EXPECT_EQ(cmd->head, (std::vector<std::string>{"/bin/sh", "-u", script}));
  opt.command = cmd->head;
  // torchrun's place for --local-rank: right after the script.
  EXPECT_EQ(worker_argv(opt, 3), (std::vector<std::string>{"/bin/sh", "-u", script, "--local-rank=3", "--lr", "1"}));
}

TEST_F(WorkerCommandTest, ModuleAndRunPath) {
  std::string error;
  Options m = options_for({"-m", "pkg.train", "x"});
  auto cmd = worker_command(m, env_of({{"PYTHON_EXEC", "/bin/sh"}}), &error);
  ASSERT_TRUE(cmd) << error;
  EXPECT_EQ(cmd->head, (std::vector<std::string>{"/bin/sh", "-u", "-m", "pkg.train"}));

  const std::string script = write("t.py", "");
  Options r = options_for({"--run-path", script});
  cmd = worker_command(r, env_of({{"PYTHON_EXEC", "/bin/sh"}}), &error);
  ASSERT_TRUE(cmd) << error;
  ASSERT_EQ(cmd->head.size(), 5u);
  EXPECT_EQ(cmd->head[2], "-c");
  EXPECT_NE(cmd->head[3].find("runpy.run_path(sys.argv[0], run_name='__main__')"), std::string::npos);
  EXPECT_EQ(cmd->head[4], script);
}

TEST_F(WorkerCommandTest, NoPythonExecutesTheProgramWithTheLocalRankLast) {
  Options opt = options_for({"--no-python", "--pass-local-rank", "sh", "-c", "true"});
  std::string error;
  auto cmd = worker_command(opt, env_of({}), &error);
  ASSERT_TRUE(cmd) << error;
  EXPECT_EQ(cmd->head, (std::vector<std::string>{"sh"}));
  EXPECT_EQ(cmd->path.substr(cmd->path.rfind('/')), "/sh");
  opt.command = cmd->head;
  EXPECT_EQ(worker_argv(opt, 0), (std::vector<std::string>{"sh", "-c", "true", "--local-rank=0"}));
}

TEST_F(WorkerCommandTest, AnExecutableProgramOrShellScriptRunsItself) {
  const Vars env = {{"PYTHON_EXEC", "/bin/sh"}};
  std::string error;
  auto cmd = worker_command(options_for({"/proc/self/exe"}), env_of(env), &error);  // this test: compiled
  ASSERT_TRUE(cmd) << error;
  EXPECT_EQ(cmd->head, (std::vector<std::string>{"/proc/self/exe"}));
  const std::string job = write("job", "#!/bin/bash -e\necho hi\n", 0755);
  cmd = worker_command(options_for({job}), env_of(env), &error);
  ASSERT_TRUE(cmd) << error;
  EXPECT_EQ(cmd->head, (std::vector<std::string>{job}));
}

TEST_F(WorkerCommandTest, WhatPythonCannotRunSaysToPassNoPython) {
  const Vars env = {{"PYTHON_EXEC", "/bin/sh"}};
  std::string error;
  // Not executable: a compiled program, a shell script; and a program found only on PATH.
  const std::string compiled = write("compiled", std::string("\x7f" "ELF\x02\x01\x01", 7), 0644);
  EXPECT_FALSE(worker_command(options_for({compiled}), env_of(env), &error));
  EXPECT_NE(error.find("compiled program"), std::string::npos) << error;
  EXPECT_NE(error.find("--no-python"), std::string::npos) << error;
  const std::string job = write("job", "#!/bin/bash -e\necho hi\n", 0644);
  EXPECT_FALSE(worker_command(options_for({job}), env_of(env), &error));
  EXPECT_NE(error.find("bash script"), std::string::npos) << error;
  EXPECT_FALSE(worker_command(options_for({"sh"}), env_of(env), &error));
  EXPECT_NE(error.find("cannot run 'sh' with Python"), std::string::npos) << error;
  EXPECT_NE(error.find("pass --no-python"), std::string::npos) << error;
  EXPECT_FALSE(worker_command(options_for({dir_ + "/missing.py"}), env_of(env), &error));
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
  EXPECT_FALSE(worker_command(options_for({"/dev/null"}), env_of(env), &error));  // never read: it could be a pipe
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  // A Python script with another shebang (uv, env python3) is still Python's.
  const std::string uv = write("uv_script", "#!/usr/bin/env -S uv run --script\nprint(1)\n");
  EXPECT_TRUE(worker_command(options_for({uv}), env_of(env), &error)) << error;
  // A missing PYTHON_EXEC is named.
  const std::string ok = write("ok.py", "");
  EXPECT_FALSE(worker_command(options_for({ok}), env_of({{"PYTHON_EXEC", "/nonexistent/python"}}), &error));
  EXPECT_NE(error.find("PYTHON_EXEC=/nonexistent/python"), std::string::npos) << error;
}

TEST_F(WorkerCommandTest, TheConfiguredPythonWithoutPythonExec) {
  if (configured_python()[0] == '\0' || access(configured_python(), X_OK) != 0) {
    GTEST_SKIP() << "no Python configured for this build";
  }
  std::string error;
  std::vector<std::string> notes;
  EXPECT_EQ(python_interpreter(env_of({}), &error, &notes), configured_python());
  EXPECT_TRUE(notes.empty());
}

}  // namespace
}  // namespace tdistrun
