// tdist-bench: nccl-tests-style measurements of tdist's collectives. Run under
// tdistrun, e.g. tdistrun --nproc-per-node 2 tdist-bench -t all -b 8 -e 64M -c.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <exception>
#include <tdist/tdist.h>

#include "driver.h"
#include "options.h"
#include "tdist_comm.h"

namespace {
// Whether a launcher gave this process a rank (the variables init_process_group reads).
bool launched() {
  for (const char* v : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  const char* program = "tdist-bench";
  tbench::ParseResult parsed = tbench::parse_options(argc, argv);
  if (parsed.action == tbench::Action::Help) {
    std::fputs(tbench::help_text(program).c_str(), stdout);
    return 0;
  }
  if (parsed.action == tbench::Action::UsageError) {
    std::fprintf(stderr, "%s: %s (see --help)\n", program, parsed.error.c_str());
    return 2;
  }
  int rank = -1;
  try {
    const std::string& backend = parsed.options.backend;
    if (launched() || backend == "mpi") {
      tdist::init_process_group({.backend = backend});
    } else {  // started alone: one rank over an in-process store, like nccl-tests with one GPU
      tdist::init_process_group(
          {.backend = backend, .world_size = 1, .rank = 0, .store = std::make_shared<tdist::HashStore>()});
    }
    rank = tdist::get_rank();
    int status = 0;
    {
      tbench::TdistComm comm(parsed.options);
      status = tbench::run_benchmark(comm, parsed.options, program);
    }
    tdist::destroy_process_group();
    return status;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    // Before the group exists there is no rank to name (a bad setting, a failed rendezvous).
    if (rank >= 0)
      std::fprintf(stderr, "%s: rank %d: %s\n", program, rank, e.what());
    else
      std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 3;
  }
}
