// Helpers of the arena tests: rank-specific data, the expected reductions
// (rank order, computed locally with the reduce layer), and where to look for
// the arena's segment (/proc/self/maps, /dev/shm).
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "backends/process_world.h"
#include "backends/world.h"
#include "common/scoped_env.h"
#include "reduce/reduction_kernels.h"

namespace tdist::testing {

// Element i of rank r: small values in [-2, 3], so that sums and products of
// up to 8 ranks stay exact in every dtype (and differ per rank and element).
inline long rank_value(size_t i, int r) { return static_cast<long>((i * 7 + static_cast<size_t>(r) * 5 + 3) % 6) - 2; }

inline Buffer rank_buffer(DType dtype, size_t count, int r) {
  return Buffer(dtype, count, [r](size_t i) { return rank_value(i, r); });
}

// What a reduction over n ranks' rank_buffers must give, bit for bit: rank 0
// combined with rank 1, the result with rank 2, ..., then finalized.
inline Buffer expected_reduction(DType dtype, ReduceOp op, size_t count, int n) {
  Buffer acc = rank_buffer(dtype, count, 0);
  for (int r = 1; r < n; ++r) {
    Buffer in = rank_buffer(dtype, count, r);
    reduction::combine(op, dtype, acc.data(), acc.data(), in.data(), count);
  }
  if (reduction::needs_finalize(op)) reduction::finalize(op, dtype, acc.data(), count, n);
  return acc;
}

// Whether this process maps an arena segment (the name is unlinked soon after
// set-up, but the mapping shows in /proc/self/maps, as "(deleted)").
inline bool maps_an_arena() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("/tdist-arena-") != std::string::npos) return true;
  return false;
}

// Names in /dev/shm of arena segments created by process `pid`.
inline std::vector<std::string> arena_names_of(pid_t pid) {
  std::vector<std::string> out;
  const std::string prefix = "tdist-arena-" + std::to_string(pid) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

// The error of each rank's calls on a world of threads ("" where they succeeded).
inline std::vector<std::string> errors_of(int n, const std::function<void(ProcessGroup&)>& calls,
                                          std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  std::vector<std::string> errors(n);
  with_thread_world(
      n,
      [&](ProcessGroup& pg) {
        try {
          calls(pg);
        } catch (const DistError& e) {
          errors[pg.rank()] = e.what();
        }
      },
      timeout);
  return errors;
}

// Reports the first differing element of `got` against `want`, or "".
inline std::string compare_exact(const Buffer& got, const Buffer& want) {
  if (got.same_bytes(want)) return "";
  for (size_t i = 0; i < want.count(); ++i)
    if (got.at(i) != want.at(i) || got.value(i) != want.value(i))
      return "element " + std::to_string(i) + ": got " + got.at(i) + ", want " + want.at(i);
  return "same values, different bits";
}

}  // namespace tdist::testing
