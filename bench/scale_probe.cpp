// What a job of N ranks costs to start: each rank times init_process_group
// and its first all_reduce (8 B) from one wall clock, then counts its sockets,
// threads and resident memory. Rank 0 prints the spread over ranks. Run by
// bench/scale.sh under tdistrun (one host) or across emulated hosts.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <tdist/tdist.h>

#include "common/process_counts.h"  // tests/common: built with -I tests

namespace {

double now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}


// min / median / max of one column of every rank's row.
std::string spread(const std::vector<double>& rows, int columns, int column, const char* format) {
  std::vector<double> v;
  for (size_t i = column; i < rows.size(); i += columns) v.push_back(rows[i]);
  std::sort(v.begin(), v.end());
  char out[128];
  std::snprintf(out, sizeof(out), format, v.front(), v[v.size() / 2], v.back());
  return out;
}

}  // namespace

int main() {
  // The launcher's start time when it gives one (every rank then counts
  // from one instant), else this process's own.
  const char* launched = std::getenv("SCALE_PROBE_START_MS");
  const double t0 = launched ? std::atof(launched) : now_ms();
  tdist::init_process_group({.backend = "tdist"});
  const double t1 = now_ms();
  std::vector<double> one{1.0};
  tdist::all_reduce(one, tdist::ReduceOp::SUM);
  const double t2 = now_ms();
  const int n = tdist::get_world_size();
  if (one[0] != n) {
    std::fprintf(stderr, "scale_probe: rank %d: all_reduce gave %g, expected %d\n", tdist::get_rank(), one[0], n);
    return 1;
  }
  constexpr int kColumns = 6;
  namespace counts = tdist::process_counts;
  std::vector<double> mine{t1 - t0, t2 - t1, t2, double(counts::sockets()), double(counts::threads()),
                           counts::resident_kib() / 1024.0};
  std::vector<double> all(kColumns * n);
  tdist::all_gather_into_tensor(all, mine);
  if (tdist::get_rank() == 0) {
    double last = 0;
    for (int r = 0; r < n; ++r) last = std::max(last, all[r * kColumns + 2]);
    std::printf("ranks %d: init + first all_reduce %.0f ms (last rank done, from launch); init ms %s; "
                "first all_reduce ms %s; sockets %s; threads %s; resident MiB %s (min / median / max)\n",
                n, last - t0, spread(all, kColumns, 0, "%.0f / %.0f / %.0f").c_str(),
                spread(all, kColumns, 1, "%.1f / %.1f / %.1f").c_str(),
                spread(all, kColumns, 3, "%.0f / %.0f / %.0f").c_str(),
                spread(all, kColumns, 4, "%.0f / %.0f / %.0f").c_str(),
                spread(all, kColumns, 5, "%.1f / %.1f / %.1f").c_str());
  }
  tdist::destroy_process_group();
}
