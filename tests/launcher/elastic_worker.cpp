// A training loop for the elastic launcher tests: every step all_reduces
// (rank + 1) and checks the sum against the world it was launched into, so a
// restarted or resized job is checked too.
//
//   elastic_worker OUT_DIR STEPS STEP_MS [FAIL_RANK FAIL_STEP]
//
// Each rank writes its pid to OUT_DIR/pid.<rank>.<restart> and appends
// "progress" lines to OUT_DIR/progress.<restart> while it trains; at the end, rank 0 writes OUT_DIR/done with "world=W restarts=R
// steps=S sum=X". In the first attempt (TORCHELASTIC_RESTART_COUNT 0),
// FAIL_RANK throws an uncaught tdist::DistError at FAIL_STEP: the library
// writes it to TORCHELASTIC_ERROR_FILE and the worker ends with SIGABRT.
#include <tdist/tdist.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: elastic_worker OUT_DIR STEPS STEP_MS [FAIL_RANK FAIL_STEP]\n");
    return 99;
  }
  const std::string out = argv[1];
  const int steps = std::atoi(argv[2]);
  const int step_ms = std::atoi(argv[3]);
  const int fail_rank = argc >= 6 ? std::atoi(argv[4]) : -1;
  const int fail_step = argc >= 6 ? std::atoi(argv[5]) : -1;
  const char* restarts_env = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const int restarts = restarts_env ? std::atoi(restarts_env) : 0;

  tdist::init_process_group("gloo");
  const int rank = tdist::get_rank();
  const int world = tdist::get_world_size();
  std::ofstream(out + "/pid." + std::to_string(rank) + "." + std::to_string(restarts)) << getpid() << "\n";
  double total = 0;
  for (int step = 0; step < steps; ++step) {
    if (restarts == 0 && rank == fail_rank && step == fail_step) {
      throw tdist::DistError("elastic_worker: rank " + std::to_string(rank) + " fails on purpose at step " +
                             std::to_string(step));
    }
    float v = static_cast<float>(rank + 1);
    tdist::all_reduce(tdist::Tensor(&v, 1));
    const float expected = static_cast<float>(world) * (world + 1) / 2;
    if (v != expected) {
      std::fprintf(stderr, "rank %d step %d: all_reduce gave %g, expected %g\n", rank, step, v, expected);
      return 7;
    }
    total += v;
    std::ofstream(out + "/progress." + std::to_string(restarts), std::ios::app) << rank << " " << step << "\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  }
  tdist::barrier();
  if (rank == 0) {
    std::ofstream(out + "/done") << "world=" << world << " restarts=" << restarts << " steps=" << steps
                                 << " sum=" << total << "\n";
  }
  tdist::destroy_process_group();
  return 0;
}
