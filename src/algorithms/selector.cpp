// The selector: forced algorithms and the automatic picks with their
// thresholds. Measurements: tdist-bench over TCP on one host (TDIST_SHM=0),
// forced algorithms compared back to back; see each pick.
#include "algorithms/selector.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "tdist/errors.h"
#include "util/env.h"

namespace tdist {

std::string forced_algorithm(const char* collective) {
  std::string var = std::string("TDIST_ALGO_") + collective;
  std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) { return std::toupper(c); });
  auto v = get_env(var.c_str());
  if (!v) return "";
  std::string out = *v;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

void throw_unknown_algorithm(const char* collective, const std::string& name, const std::string& valid) {
  std::string var = std::string("TDIST_ALGO_") + collective;
  std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) { return std::toupper(c); });
  throw DistValueError(var + "=" + name + " is not a " + collective + " algorithm (valid: " + valid + ")");
}

std::string_view pick_all_reduce(size_t bytes, size_t count, int n) {
  if (bytes < 64 * 1024 || count < static_cast<size_t>(n)) return "recursive_doubling";
  if (bytes < 1024 * 1024) return "rabenseifner";
  return "ring";
}

std::string_view pick_broadcast(size_t bytes, size_t count, int n) {
  if (bytes < 256 * 1024 || count < static_cast<size_t>(n) || n < 3) return "binomial";
  return "scatter_allgather";
}

std::string_view pick_reduce(size_t bytes, size_t count, int n) {
  if (bytes < 256 * 1024 || count < static_cast<size_t>(n)) return "binomial";
  return "rabenseifner";
}

std::string_view pick_all_gather(size_t bytes, bool equal, int n) {
  (void)n;
  if (equal && bytes < 64 * 1024) return "bruck";
  return "ring";
}

std::string_view pick_reduce_scatter(size_t bytes, int n) {
  (void)n;
  if (bytes < 64 * 1024) return "recursive_halving";
  return "ring";
}

std::string_view pick_gather(size_t block_bytes, int n) {
  (void)n;
  return block_bytes < 16 * 1024 ? "binomial" : "linear";
}

std::string_view pick_scatter(size_t block_bytes, int n) {
  (void)n;
  return block_bytes < 16 * 1024 ? "binomial" : "linear";
}

std::string_view pick_all_to_all(size_t bytes, bool equal, int n) {
  (void)bytes;
  (void)equal;
  (void)n;
  return "pairwise";
}

}  // namespace tdist
