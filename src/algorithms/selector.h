// Which algorithm runs a collective: the one TDIST_ALGO_<COLLECTIVE> names
// (for benchmarks and bug reports), else the selector's pick by message size,
// world size and placement (one host or several). Every algorithm, its cost
// model, the thresholds and the measurements behind them: docs/algorithms.md.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "algorithms/collective.h"
#include "trace/engine_kind.h"

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
Fn select_algorithm(const CollectiveContext& ctx, OpCode code, const Algorithm<Fn> (&table)[N],
                    std::string_view automatic) {
  const char* collective = op_code_name(collective_tag(code, 0));
  std::string read_now;
  if (!ctx.forced) read_now = forced_algorithm(collective);
  const std::string& forced = ctx.forced ? (*ctx.forced)[static_cast<size_t>(code)] : read_now;
  std::string_view want = forced.empty() || forced == "shm" ? automatic : std::string_view(forced);
  for (const auto& a : table)
    if (a.name == want) {
      ctx.algorithm = a.name.data();  // the table's names are literals
      return a.run;
    }
  std::string valid;
  for (const auto& a : table) valid += (valid.empty() ? "" : ", ") + std::string(a.name);
  throw_unknown_algorithm(collective, forced, valid + ", shm");
}

// What the automatic picks look at. Every field is the same on every rank
// (they must all pick the same engine and algorithm).
struct Shape {
  size_t bytes = 0;  // the collective's size, as each pick says
  size_t count = 0;  // elements, where it matters
  int n = 1;         // world size
  int hosts = 1;     // the group's hosts
  int ranks_per_host = 1;  // the most ranks on one of them
  // Every rank of the group runs on this host: TCP over loopback, where a
  // copy costs CPU time that the ranks share, rather than link time.
  bool one_host() const { return hosts == 1; }
};

Placement placement_of(CollectiveContext& ctx);
// Whether every rank of the group is on this host.
inline bool one_host(CollectiveContext& ctx) { return placement_of(ctx).one_host(); }

inline Shape shape_of(const Placement& where, int n, size_t bytes, size_t count = 0) {
  return Shape{bytes, count, n, where.hosts, where.ranks_per_host};
}
inline Shape shape_of(CollectiveContext& ctx, size_t bytes, size_t count = 0) {
  return shape_of(placement_of(ctx), ctx.size(), bytes, count);
}

// The engines (src/engines) that can run a group's collectives.
struct EnginesAvailable {
  bool shared_memory = false;  // every rank on one host, with the group's segment
  bool hierarchical = false;   // several hosts, several ranks on some
};
// The engine for a collective of `s` (bytes: as the collective's own pick
// says). `forced` is its TDIST_ALGO_<COLLECTIVE>: a transport algorithm's
// name forces the transport engine, "shm" (or nothing) leaves the choice here.
EngineKind pick_engine(const Shape& s, const std::string& forced, EnginesAvailable have);

// bytes: the whole buffer.
std::string_view pick_all_reduce(const Shape& s);
// The hierarchical engine's all_reduce: "replicated" (an all_reduce inside
// each host, then every rank all-reduces the whole buffer with its local
// index's ranks on the other hosts), "leader" (one rank per host carries
// the host's sum across) or "split" (every rank of a host carries its block
// across, at once); uniform: every host holds as many of the group's ranks.
std::string_view pick_hierarchical_all_reduce(const Shape& s, bool uniform);
std::string_view pick_broadcast(const Shape& s);
std::string_view pick_reduce(const Shape& s);
// bytes: the whole output; equal: every rank's block has one size (all ranks
// pass the same sizes, so all know it).
std::string_view pick_all_gather(const Shape& s, bool equal);
// bytes: the whole input (all blocks).
std::string_view pick_reduce_scatter(const Shape& s);
// bytes: one rank's block.
std::string_view pick_gather(const Shape& s);
std::string_view pick_scatter(const Shape& s);
// bytes: one rank's block; uniform: the caller guarantees that every block
// of every rank has one size (a rank cannot tell on its own).
std::string_view pick_all_to_all(const Shape& s, bool uniform);

}  // namespace tdist
