// tdistrun's command line: torchrun's options (dash or underscore spellings,
// "--opt V" or "--opt=V", unique prefixes, PET_<OPTION> defaults) parsed into
// one Options value. Parsing never exits; main decides what to do.
#pragma once

#include <signal.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tdistrun {

inline constexpr int kDefaultMasterPort = 29500;
inline constexpr int kDefaultRendezvousPort = 29400;  // torchrun's, for --rdzv-endpoint HOST

// Which of a worker's streams go to files (--redirects) or to files and the
// console (--tee): torchrun's Std values 0 none, 1 stdout, 2 stderr, 3 both.
struct StdChoice {
  int all = 0;                               // for local ranks not in per_rank
  std::vector<std::pair<int, int>> per_rank;  // (local_rank, value) from "0:1,1:2"
  int of(int local_rank) const;
};

// How the nodes find each other (the agents' rendezvous, rendezvous.h).
struct RendezvousOptions {
  // "static": node ranks come from --node-rank (or Slurm); "c10d": the
  // rendezvous assigns them in the order the nodes join.
  std::string backend = "static";
  bool dynamic = false;  // node ranks assigned by the rendezvous
  int min_nodes = 1;
  int max_nodes = 1;
  // --rdzv-conf: seconds.
  double join_timeout_s = 600;       // for MIN nodes to join a round
  double last_call_timeout_s = 30;   // more nodes may join after MIN did (dynamic)
  double close_timeout_s = 60;       // the host waits this long for the others to leave
};

// How PROGRAM runs, as torchrun decides: with Python (program.h names the
// interpreter) unless --no-python.
enum class ProgramKind {
  kPythonScript,   // python -u PROGRAM ARGS
  kPythonModule,   // -m/--module: python -u -m PROGRAM ARGS
  kPythonRunPath,  // --run-path: runpy.run_path(PROGRAM) with sys.argv = [PROGRAM, ARGS]
  kExecutable,     // --no-python: PROGRAM ARGS, found through PATH like a shell
};

// What the agent does when a worker exits non-zero or is killed (--on-failure).
enum class OnFailure {
  kRestart,  // stop every worker, start a new round (--max-restarts; torchrun's)
  kShrink,   // let the others run on; tell them through the store (exited/<rank>)
  // shrink, and start a replacement that joins the running job
  // (TDIST_JOIN_RUNNING_JOB=1), up to --max-restarts replacements
  kShrinkAndReplace,
};

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;  // the fixed node count; with MIN:MAX, the maximum
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;  // 0: pick a free port (single node only)
  bool standalone = false;
  RendezvousOptions rdzv;
  int max_restarts = 0;
  OnFailure on_failure = OnFailure::kRestart;
  double monitor_interval_s = 0.1;
  std::string log_dir;  // "" none
  StdChoice redirects, tee;
  std::optional<std::set<int>> local_ranks_filter;  // console output of these local ranks only
  std::string rdzv_id = "none";
  std::string role = "default";
  bool pass_local_rank = false;  // torch.distributed.launch without --use-env
  bool prefix_output = true;
  double kill_timeout_s = 5.0;  // --kill-timeout, torchrun's --shutdown-timeout
  // --signals-to-handle: the signals tdistrun passes to its workers, which
  // then stop (SIGKILL after kill_timeout_s); torchrun's default set. SIGUSR1,
  // when not listed, is passed on without stopping anything (signals.h).
  std::vector<int> signals_to_handle = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  // --virtual-local-rank: every worker gets LOCAL_RANK=0 and sees only its own
  // device: CUDA_VISIBLE_DEVICES (and HIP_VISIBLE_DEVICES where the launcher
  // has it) is the local rank's entry of the launcher's list, or the local
  // rank itself without one. Read at parse time and checked against
  // --nproc-per-node.
  bool virtual_local_rank = false;
  std::vector<std::string> visible_devices;  // the launcher's CUDA/HIP_VISIBLE_DEVICES entries; empty: unset
  bool hip_visible_devices = false;          // they came from HIP_VISIBLE_DEVICES
  // --log-line-prefix-template: the console prefix of each worker line, with
  // torchrun's macros (output.h); empty: "[rank${rank}]: ".
  std::string line_prefix_template;
  ProgramKind program_kind = ProgramKind::kPythonScript;
  std::string program;
  std::vector<std::string> program_args;
  // The workers' command before ARGS (program.h), set by main once PROGRAM is
  // found: {"/usr/bin/python3", "-u", "train.py"}; empty: {program}.
  std::vector<std::string> command;
  // Handed to the workers as TDIST_JOB_TOKEN when not empty (job_token.h).
  std::string job_token;
  // Notes for the user (e.g. options that --standalone overrides); printed to stderr.
  std::vector<std::string> warnings;
};

// kNothing: an option that only prints (torchrun's --print-completion) was
// given; main prints the warnings and exits 0.
enum class Action { kRun, kHelp, kVersion, kUsageError, kNothing };

struct ParseResult {
  Action action = Action::kRun;
  Options options;
  std::string error;  // for kUsageError: one line naming the option, without "tdistrun: "
};

// Looks up an environment variable (nullopt when unset). Injected for tests.
// The launcher's own reading: the scheduler's variables (SLURM_*) and the
// environment form of its options, whose TDIST_* values tdist's settings
// registry checks (options.cpp).
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// How many CPUs are online, and how many NVIDIA GPUs the driver lists.
int online_cpus();
int nvidia_gpus();

// args excludes argv[0].
ParseResult parse_options(const std::vector<std::string>& args, const EnvLookup& env);

}  // namespace tdistrun
