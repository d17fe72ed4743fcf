// Which algorithm runs a collective: the one TDIST_ALGO_<COLLECTIVE> names
// (for benchmarks and bug reports), else the selector's pick by message size
// and world size. The thresholds and the measurements behind them are in
// selector.cpp.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "algorithms/collective.h"

namespace tdist {

template <typename Fn>
struct Algorithm {
  std::string_view name;
  Fn run;
};

// DistValueError: "TDIST_ALGO_<COLLECTIVE>=<name> is not a <collective> algorithm (valid: ...)".
[[noreturn]] void throw_unknown_algorithm(const char* collective, const std::string& name, const std::string& valid);

// The algorithm of `table` to run. "shm" names the backend's shared-memory
// path; when it reaches the algorithms (a group that is not on one host) the
// selector picks as if nothing were forced.
template <typename Fn, size_t N>
Fn select_algorithm(const char* collective, const Algorithm<Fn> (&table)[N], std::string_view automatic) {
  std::string forced = forced_algorithm(collective);
  std::string_view want = forced.empty() || forced == "shm" ? automatic : std::string_view(forced);
  for (const auto& a : table)
    if (a.name == want) return a.run;
  std::string valid;
  for (const auto& a : table) valid += (valid.empty() ? "" : ", ") + std::string(a.name);
  throw_unknown_algorithm(collective, forced, valid + ", shm");
}

// The automatic picks. `bytes` is the size of the whole buffer unless said
// otherwise; n the world size (> 1).
std::string_view pick_all_reduce(size_t bytes, size_t count, int n);
std::string_view pick_broadcast(size_t bytes, size_t count, int n);
std::string_view pick_reduce(size_t bytes, size_t count, int n);
// bytes: the whole output; equal: whether every rank's block has one size.
std::string_view pick_all_gather(size_t bytes, bool equal, int n);
// bytes: the whole input (all blocks).
std::string_view pick_reduce_scatter(size_t bytes, int n);
// bytes: one rank's block.
std::string_view pick_gather(size_t block_bytes, int n);
std::string_view pick_scatter(size_t block_bytes, int n);
// bytes: one rank's whole send buffer; equal: all blocks of one size.
std::string_view pick_all_to_all(size_t bytes, bool equal, int n);

}  // namespace tdist
