// Which algorithm runs a collective: the one TDIST_ALGO_<COLLECTIVE> names
// (for benchmarks and bug reports), else the selector's pick by message size,
// world size and placement (one host or several). Every algorithm, its cost
// model, the thresholds and the measurements behind them: docs/algorithms.md.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "algorithms/collective.h"
#include "algorithms/tuning_table.h"
#include "trace/engine_kind.h"

namespace tdist {

template <typename Fn>
struct Algorithm {
  std::string_view name;
  Fn run;
};

// DistValueError: "TDIST_ALGO_<COLLECTIVE>=<name> is not a <collective> algorithm (valid: ...)".
[[noreturn]] void throw_unknown_algorithm(const char* collective, const std::string& name, const std::string& valid);

// The index into transport_algorithms(code) that the automatic pick chooses for `s`.
inline int8_t pick_transport(OpCode code, const Shape& s) {
  return choose(tuning_table(code, EngineKind::Transport), s);
}

// The algorithm of `table` to run: the context's decision where the selector
// made one for this call, else the forced one, else automatic() (an index
// into the table, evaluated only then). "shm" names the shared-memory engine;
// when it reaches the algorithms (a group that is not on one host) the
// automatic pick runs. `table` lists transport_algorithms(code) in order
// (each algorithm file checks that at compile time).
template <typename Fn, size_t N, typename Automatic>
Fn select_algorithm(const CollectiveContext& ctx, OpCode code, const Algorithm<Fn> (&table)[N],
                    const Automatic& automatic) {
  int8_t at = ctx.decision.transport_algorithm();
  if (at < 0) at = ctx.forced ? ctx.forced->of(code)
                              : ForcedAlgorithms::parse(code, forced_algorithm(op_code_name(collective_tag(code, 0))));
  if (at < 0) at = automatic();
  return table[static_cast<size_t>(at)].run;
}

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
// The engine for a collective of `s`. `forced`: the transport algorithm its
// TDIST_ALGO_<COLLECTIVE> names, which forces the transport engine, or
// ForcedAlgorithms::kNone (unset, or "shm"), which leaves the choice here.
EngineKind pick_engine(const Shape& s, int8_t forced, EnginesAvailable have);
// The same, with the setting's text ("", "shm" or an algorithm's name).
EngineKind pick_engine(const Shape& s, const std::string& forced, EnginesAvailable have);

// The one decision of a collective call `code` of shape `s`: the engine
// (pick_engine), then its algorithm from the engine's tuning table (the
// forced one on the transport engine); the shared-memory engine has none.
// `s.bytes` counts as the collective's pick below says.
Decision decide(OpCode code, const Shape& s, const ForcedAlgorithms& forced, EnginesAvailable have);

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
