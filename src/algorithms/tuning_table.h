// The tuning tables: for each collective and engine, the rows the selector
// reads, first match wins, each naming an algorithm and when it runs (bytes,
// ranks, hosts, ranks per host). docs/algorithms.md shows these tables as
// tuning_markdown() renders them (a test keeps the two alike); the
// measurements behind each threshold are in its prose, not here.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "algorithms/tags.h"
#include "trace/engine_kind.h"

namespace tdist {

// The algorithms of each collective over the transport, in the order their
// files list them (each file's table is checked against this at compile
// time): the names TDIST_ALGO_<COLLECTIVE> accepts.
inline constexpr std::string_view kBroadcastAlgorithms[] = {"binomial", "scatter_allgather", "chain"};
inline constexpr std::string_view kAllReduceAlgorithms[] = {"recursive_doubling", "rabenseifner", "ring"};
inline constexpr std::string_view kBarrierAlgorithms[] = {"dissemination"};
inline constexpr std::string_view kReduceAlgorithms[] = {"binomial", "rabenseifner", "chain"};
inline constexpr std::string_view kAllGatherAlgorithms[] = {"ring", "bruck"};
inline constexpr std::string_view kGatherAlgorithms[] = {"linear", "binomial"};
inline constexpr std::string_view kScatterAlgorithms[] = {"linear", "binomial"};
inline constexpr std::string_view kReduceScatterAlgorithms[] = {"ring", "recursive_halving"};
inline constexpr std::string_view kAllToAllAlgorithms[] = {"pairwise", "bruck", "linear"};
// The hierarchical engine's paths (engines/hierarchical_engine.cpp), one
// list for every collective: "flat" runs the transport engine over the whole
// group.
inline constexpr std::string_view kHierarchicalPaths[] = {"leader", "replicated", "split", "flat"};

// The collectives with tables: OpCode Broadcast (1) .. AllToAll (9).
inline constexpr size_t kCollectives = 9;
constexpr bool has_table(OpCode code) {
  return static_cast<uint8_t>(code) >= 1 && static_cast<uint8_t>(code) <= kCollectives;
}
// Index of a collective's OpCode into per-collective arrays; callers check has_table() first.
constexpr size_t collective_index(OpCode code) { return static_cast<size_t>(code) - 1; }
// The transport algorithms of `code` (empty for an operation without a table).
std::span<const std::string_view> transport_algorithms(OpCode code);

// The position of `name` in `names`; -1 if absent. constexpr: a table row
// that names an unknown algorithm fails to compile.
constexpr int8_t index_of(std::span<const std::string_view> names, std::string_view name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int8_t>(i);
  return -1;
}

// Whether an algorithm file's table lists exactly `names`, in order.
template <typename Table, size_t N>
constexpr bool lists_exactly(const Table (&table)[N], std::span<const std::string_view> names) {
  if (N != names.size()) return false;
  for (size_t i = 0; i < N; ++i)
    if (table[i].name != names[i]) return false;
  return true;
}

// What the rows look at. Every field is the same on every rank (they must
// all pick the same engine and algorithm).
struct Shape {
  size_t bytes = 0;  // the collective's size, as each collective counts it (selector.h)
  size_t count = 0;  // elements, where it matters
  int n = 1;         // world size
  int hosts = 1;     // the group's hosts
  int ranks_per_host = 1;  // the most ranks on one of them
  bool equal_blocks = true;  // every rank's block has one size (all_gather, all_to_all)
  bool uniform = true;       // every host holds as many of the group's ranks
  // Every rank's blocks have one size, and the call says so for all ranks
  // (all_to_all_single without split sizes): equal_blocks looks at this
  // rank's lists only, which may differ from another's.
  bool even_split = false;
  // Every rank of the group runs on this host: TCP over loopback, where a
  // copy costs CPU time that the ranks share, rather than link time.
  bool one_host() const { return hosts == 1; }
};

// A property a row asks of the call besides its sizes.
enum class Need : uint8_t {
  Nothing,
  FewerElementsThanRanks,      // count < n
  FewerElementsThanHostRanks,  // count < ranks_per_host
  ElementsNotMultipleOfHostRanks,  // count % ranks_per_host != 0
  PowerOfTwoRanks,
  EqualBlocks,
  UnequalBlocks,
  UnevenHosts,  // hosts hold different numbers of the group's ranks
  EvenSplit,    // Shape::even_split
  // ranks_per_host x ceil(log2 hosts) <= 2: the messages each host sends in
  // a recursive-doubling exchange among hosts that every rank takes part in
  FewCrossHostMessages,
};
enum class Hosts : uint8_t { Any, One, Several };

inline constexpr size_t kAnySize = SIZE_MAX;

// One row: `algorithm` runs when every condition holds.
struct TuningRow {
  std::string_view algorithm;
  Hosts hosts = Hosts::Any;
  size_t below = kAnySize;  // bytes < below (or <=, with at_most)
  bool at_most = false;
  // bytes x max(1, ranks_per_host - 1) <= this: the copies one host's link
  // carries when every rank of the host sends the whole buffer.
  size_t host_copies_at_most = kAnySize;
  int ranks_from = 0;         // n >= ranks_from
  int ranks_below = INT_MAX;  // n < ranks_below
  Need need = Need::Nothing;
  int8_t index = -1;  // of `algorithm` in its table's list: filled in at compile time
};

struct TuningTable {
  OpCode collective;
  EngineKind engine;
  std::span<const std::string_view> algorithms;  // what the rows' names index
  std::span<const TuningRow> rows;               // the last one matches anything
};

// The table of `code` run by `engine` (Transport or Hierarchical).
const TuningTable& tuning_table(OpCode code, EngineKind engine);
// The index into table.algorithms of the first row that matches `s`.
int8_t choose(const TuningTable& table, const Shape& s);

// Every table as Markdown, as docs/algorithms.md shows it between its
// "tuning: begin" and "tuning: end" markers.
std::string tuning_markdown();

}  // namespace tdist
