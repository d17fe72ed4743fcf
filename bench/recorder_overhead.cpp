// The flight recorder's cost on the smallest collective, in one pair of
// processes and one group: batches with the recorder and with it paused
// (trace::g_paused, an internal switch), alternating. Separate runs of
// tdist-bench, and even two groups of one run (each has its own shared-memory
// segment), differ by more than the effect. Run under tdistrun with 2
// ranks (bench/recorder_overhead.sh). Prints, per batch, the slowest rank's
// mean time per all_reduce; then the medians and the median of the pairs'
// ratios.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tdist/tdist.h"
#include "trace/flight_recorder.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The slowest rank's mean microseconds per all_reduce of `iters` on `g`.
double batch(const tdist::Group& g, int iters, size_t bytes) {
  std::vector<char> buf(std::max<size_t>(bytes, 4));
  tdist::Tensor t(buf.data(), tdist::DType::Float32, {static_cast<int64_t>(bytes / 4)});
  tdist::barrier(g);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) tdist::all_reduce(t, tdist::ReduceOp::SUM, g);
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / iters;
  tdist::all_reduce(tdist::Tensor(&us, tdist::DType::Float64, {1}), tdist::ReduceOp::MAX, g);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 30;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20000;
  const size_t bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 8;
  tdist::init_process_group("tdist");
  const int me = tdist::get_rank();
  std::vector<int> all(tdist::get_world_size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  // A group of its own: the default group's recorder also sees the timing's all_reduce of MAX.
  tdist::Group g = tdist::new_group(all);
  // RECORDER_OVERHEAD_ONLY=on|off: every batch alike (for perf stat).
  const char* only = std::getenv("RECORDER_OVERHEAD_ONLY");
  auto timed = [&](bool recording) {
    if (only) recording = std::string(only) == "on";
    tdist::trace::g_paused.store(!recording);
    return batch(g, iters, bytes);
  };
  for (int w = 0; w < 2; ++w) timed(true), timed(false);  // warm up both
  std::vector<double> t_on, t_off, ratio;
  for (int r = 0; r < rounds; ++r) {
    // Alternate which goes first, so that neither always follows the other.
    double a, b;
    if (r % 2 == 0) {
      a = timed(false);
      b = timed(true);
    } else {
      b = timed(true);
      a = timed(false);
    }
    t_off.push_back(a);
    t_on.push_back(b);
    ratio.push_back(b / a);
    if (me == 0) std::printf("round %2d: off %.4f us  on %.4f us  on/off %.4f\n", r, a, b, b / a);
  }
  if (me == 0)
    std::printf("all_reduce %zu B, %d ranks, %d rounds of %d: median off %.4f us, on %.4f us; "
                "median on/off %.4f (%+.1f ns)\n",
                bytes, tdist::get_world_size(), rounds, iters, median(t_off), median(t_on), median(ratio),
                (median(t_on) - median(t_off)) * 1000);
  tdist::destroy_process_group();
}
