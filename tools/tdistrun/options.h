// tdistrun's command line: torchrun's options (dash or underscore spellings,
// "--opt V" or "--opt=V", unique prefixes, PET_<OPTION> defaults) parsed into
// one Options value. Parsing never exits; main decides what to do.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tdistrun {

inline constexpr int kDefaultMasterPort = 29500;

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;  // 0: pick a free port (single node only)
  bool standalone = false;
  std::string rdzv_id = "none";
  std::string role = "default";
  bool pass_local_rank = false;  // torch.distributed.launch without --use-env
  bool prefix_output = true;
  double kill_timeout_s = 5.0;
  std::string program;
  std::vector<std::string> program_args;
  // Handed to the workers as TDIST_JOB_TOKEN when not empty (job_token.h).
  std::string job_token;
  // Notes for the user (e.g. options that --standalone overrides); printed to stderr.
  std::vector<std::string> warnings;
};

enum class Action { kRun, kHelp, kVersion, kUsageError };

struct ParseResult {
  Action action = Action::kRun;
  Options options;
  std::string error;  // for kUsageError: one line naming the option, without "tdistrun: "
};

// Looks up an environment variable (nullopt when unset). Injected for tests.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// How many CPUs are online, and how many NVIDIA GPUs the driver lists.
int online_cpus();
int nvidia_gpus();

// args excludes argv[0].
ParseResult parse_options(const std::vector<std::string>& args, const EnvLookup& env);

}  // namespace tdistrun
