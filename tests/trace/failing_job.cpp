// A tdist job that fails, for trace_launch_test.cpp: it initialises over
// env:// (as tdistrun starts it), runs a collective, dumps on SIGUSR1 (to
// TDIST_FLIGHT_RECORDER_DIR) and on request, then calls a collective with a
// shape that differs on the last rank: under TDIST_DEBUG=DETAIL every rank
// fails at once, dumps, and dies of the uncaught error, which goes to
// tdistrun's error file. With --only-fail it skips the SIGUSR1 and request
// dumps: the only dumps are the failure's.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tdist/tdist.h"
#include "tdist/trace.h"

int main(int argc, char** argv) {
  const bool only_fail = argc > 1 && std::string(argv[1]) == "--only-fail";
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // it dies of abort(): no core file in the test's folder
  tdist::init_process_group("tdist", "env://");
  const int me = tdist::get_rank();
  const int n = tdist::get_world_size();
  std::vector<float> a(8, 1.0f);
  tdist::all_reduce(tdist::Tensor(a.data(), tdist::DType::Float32, {8}));
  if (!only_fail) {
    const char* dir = std::getenv("TDIST_FLIGHT_RECORDER_DIR");
    const std::string dump = std::string(dir ? dir : ".") + "/tdist_fr_" + std::to_string(me) + ".json";
    raise(SIGUSR1);
    for (int i = 0; i < 2000 && !std::filesystem::exists(dump); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    tdist::dump_flight_recorder();
  }
  std::printf("rank %d of %d ready to fail\n", me, n);
  std::fflush(stdout);
  tdist::all_reduce(tdist::Tensor(a.data(), tdist::DType::Float32, {me == n - 1 ? 6 : 8}));
  return 0;  // not reached: the collective throws
}
