// tdistrun: torchrun for tdist. Wires the pieces together:
// options -> job token -> the workers' command (program.h) -> the agent (rendezvous, supervisor).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "agent.h"
#include "job_token.h"
#include "options.h"
#include "program.h"
#include "rendezvous.h"
#include "usage.h"
#include "worker.h"

int main(int argc, char** argv) {
  using namespace tdistrun;
  std::vector<std::string> args(argv + 1, argv + argc);
  ParseResult parsed = parse_options(args, process_env());
  switch (parsed.action) {
    case Action::kHelp:
      std::fputs(help_text().c_str(), stdout);
      return 0;
    case Action::kVersion:
      std::fputs(version_text().c_str(), stdout);
      return 0;
    case Action::kUsageError:
      std::fprintf(stderr, "tdistrun: %s\n", parsed.error.c_str());
      return 2;
    case Action::kNothing:
      for (const auto& w : parsed.options.warnings) std::fprintf(stderr, "tdistrun: warning: %s\n", w.c_str());
      return 0;
    case Action::kRun:
      break;
  }
  Options& opt = parsed.options;
  try {
    opt.job_token = job_token_for_workers(opt, process_env());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tdistrun: %s\n", e.what());
    return 1;
  }
  for (const auto& w : opt.warnings) std::fprintf(stderr, "tdistrun: warning: %s\n", w.c_str());

  std::string error;
  const std::optional<WorkerCommand> command = worker_command(opt, process_env(), &error);
  if (!command) {
    std::fprintf(stderr, "tdistrun: %s\n", error.c_str());
    return 127;
  }
  for (const auto& n : command->notes) std::fprintf(stderr, "tdistrun: note: %s\n", n.c_str());
  opt.command = command->head;
  const std::string& path = command->path;
  // The agent's own store admits only the job's processes too.
  if (!opt.job_token.empty()) setenv("TDIST_JOB_TOKEN", opt.job_token.c_str(), 1);
  std::fflush(stdout);
  std::fflush(stderr);
  try {
    return run_agent(opt, path);
  } catch (const RendezvousInterrupted& e) {
    std::fprintf(stderr, "tdistrun: stopped by a signal while waiting for the other nodes\n");
    return 128 + e.signal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tdistrun: %s\n", e.what());
    return 1;
  }
}
