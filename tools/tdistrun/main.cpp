// tdistrun: torchrun for tdist. Wires the pieces together:
// options -> program lookup -> master port -> signal events -> supervisor.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "free_port.h"
#include "job_token.h"
#include "options.h"
#include "signals.h"
#include "supervisor.h"
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
  const std::string path = resolve_program(opt.program, &error);
  if (path.empty()) {
    std::fprintf(stderr, "tdistrun: cannot execute '%s': %s\n", opt.program.c_str(), error.c_str());
    return 127;
  }
  if (opt.master_port == 0) {
    opt.master_port = pick_free_port(&error);
    if (opt.master_port == 0) {
      std::fprintf(stderr, "tdistrun: cannot pick a free port for MASTER_PORT: %s\n", error.c_str());
      return 1;
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  try {
    SignalEvents::install();
    Supervisor supervisor(opt, path);
    return supervisor.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tdistrun: %s\n", e.what());
    return 1;
  }
}
