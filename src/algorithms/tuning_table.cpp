// The tuning tables the selector reads. Each row says when its algorithm
// wins; why it wins, and the measurements, are in docs/algorithms.md.
#include "algorithms/tuning_table.h"

#include <algorithm>
#include <array>

#include "tdist/errors.h"

namespace tdist {

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;
using enum Need;
using enum Hosts;

// Transport engine. Few bytes: recursive doubling (fewest rounds); then
// Rabenseifner where n is a power of two (no whole-buffer fold), then the ring.
constexpr TuningRow kAllReduceRows[] = {
    {.algorithm = "recursive_doubling", .need = FewerElementsThanRanks},
    {.algorithm = "recursive_doubling", .hosts = One, .below = 512 * KiB},
    {.algorithm = "recursive_doubling", .hosts = Several, .below = 32 * KiB},
    {.algorithm = "rabenseifner", .hosts = One, .below = 8 * MiB, .need = PowerOfTwoRanks},
    {.algorithm = "rabenseifner", .hosts = Several, .below = 512 * KiB, .need = PowerOfTwoRanks},
    {.algorithm = "ring"},
};
// One host: the tree makes the fewest copies; across hosts the chain keeps
// every link busy.
constexpr TuningRow kBroadcastRows[] = {
    {.algorithm = "binomial", .ranks_below = 3},
    {.algorithm = "binomial", .need = FewerElementsThanRanks},
    {.algorithm = "binomial", .hosts = One},
    {.algorithm = "binomial", .below = 32 * KiB},
    {.algorithm = "chain"},
};
// One host: the chain folds each segment while it is in cache. Across hosts
// the chain too from 128 KiB, and with 3 to 8 ranks (all that was measured)
// from 16 KiB, 8 KiB with 3: each link carries the buffer once and the root's
// link too (the tree's root takes one from each child, Rabenseifner's gather
// more than one); below, Rabenseifner sends less than the tree. Two ranks:
// one message.
constexpr TuningRow kReduceRows[] = {
    {.algorithm = "binomial", .need = FewerElementsThanRanks},
    {.algorithm = "binomial", .hosts = One, .below = 1 * MiB},
    {.algorithm = "chain", .hosts = One},
    {.algorithm = "binomial", .ranks_below = 3},
    {.algorithm = "binomial", .below = 8 * KiB, .ranks_below = 4},
    {.algorithm = "binomial", .below = 16 * KiB, .ranks_below = 9},
    {.algorithm = "chain", .ranks_below = 9},
    {.algorithm = "binomial", .below = 64 * KiB},
    {.algorithm = "rabenseifner", .below = 128 * KiB},
    {.algorithm = "chain"},
};
// Bruck: fewer rounds for equal blocks; with 2 ranks the ring lands in place.
constexpr TuningRow kAllGatherRows[] = {
    {.algorithm = "bruck", .below = 2 * MiB, .ranks_from = 3, .need = EqualBlocks},
    {.algorithm = "ring"},
};
// Recursive halving: log2(n) rounds for small data. With a number of ranks
// that is not a power of two, some ranks first hand all their inputs to a
// partner and get their block back last: across hosts that cost more than
// the ring's n-1 rounds from 16 KiB with 3, 5 and 6 ranks (docs/algorithms.md:
// reduce_scatter), not measured with more, where the ring's rounds add up; on
// one host it stays ahead.
constexpr TuningRow kReduceScatterRows[] = {
    {.algorithm = "recursive_halving", .below = 256 * KiB, .need = PowerOfTwoRanks},
    {.algorithm = "recursive_halving", .hosts = One, .below = 256 * KiB},
    {.algorithm = "recursive_halving", .below = 16 * KiB},
    {.algorithm = "ring", .ranks_below = 8},
    {.algorithm = "recursive_halving", .below = 256 * KiB},
    {.algorithm = "ring"},
};
// The binomial gather was never faster than the linear one.
constexpr TuningRow kGatherRows[] = {{.algorithm = "linear"}};
// The binomial scatter halves the root's sends: faster for small blocks from 8 ranks.
constexpr TuningRow kScatterRows[] = {
    {.algorithm = "binomial", .below = 16 * KiB, .ranks_from = 8},
    {.algorithm = "linear"},
};
// Across hosts with 8 ranks or more, blocks under 64 KiB: linear, whose one
// round of latency beats pairwise's n-1 and Bruck's log2 n when ranks wait
// for cores or links. Bruck: fewer rounds for small equal blocks, which only
// the caller can vouch for.
constexpr TuningRow kAllToAllRows[] = {
    {.algorithm = "linear", .hosts = Several, .below = 64 * KiB, .ranks_from = 8},
    {.algorithm = "bruck", .below = 8 * KiB, .at_most = true, .ranks_from = 3, .need = EqualBlocks},
    {.algorithm = "pairwise"},
};
constexpr TuningRow kBarrierRows[] = {{.algorithm = "dissemination"}};

// Hierarchical engine. Hosts of different sizes cut the buffer differently,
// so only the leader path fits them. On hosts of one size, few bytes go
// `replicated` (two steps, and no rank waits for another's step among
// hosts) while the extra copies on each host's link cost less than the step
// inside the host it saves, and every rank's exchange among hosts makes few
// messages per host (2 hosts of 2: one round, two messages); with more, the
// hosts' links and cores carry L times the leaders' messages and `leader`
// is faster (docs/algorithms.md: hierarchical all_reduce). Then `leader`
// (the fewest bytes between hosts) up to 64 KiB, then `split`.
constexpr TuningRow kHierarchicalAllReduceRows[] = {
    {.algorithm = "leader", .need = UnevenHosts},
    {.algorithm = "replicated", .host_copies_at_most = 4 * KiB, .need = FewCrossHostMessages},
    {.algorithm = "leader", .need = FewerElementsThanHostRanks},
    {.algorithm = "leader", .below = 64 * KiB, .at_most = true},
    {.algorithm = "split"},
};
// Where all_reduce would split, and the host's ranks divide the elements;
// with 5 ranks or more only from 256 KiB: below, split's step among hosts
// reduces each half by a tree (the root's link takes a buffer from each
// child) where leader's whole buffer goes by the chain from 128 KiB, and its
// L ranks crowd the network where leader's one does (docs/algorithms.md).
constexpr TuningRow kHierarchicalReduceRows[] = {
    {.algorithm = "leader", .need = UnevenHosts},
    {.algorithm = "leader", .need = FewerElementsThanHostRanks},
    {.algorithm = "leader", .below = 64 * KiB},
    {.algorithm = "leader", .below = 256 * KiB, .ranks_from = 5},
    {.algorithm = "leader", .need = ElementsNotMultipleOfHostRanks},
    {.algorithm = "split"},
};
constexpr TuningRow kHierarchicalBroadcastRows[] = {
    {.algorithm = "leader", .need = UnevenHosts},
    {.algorithm = "leader", .need = FewerElementsThanHostRanks},
    {.algorithm = "leader", .below = 64 * KiB},
    {.algorithm = "split"},
};
// Blocks of one size on hosts of one size only. Up to 64 KiB in all through
// each host's first rank: one message stream per host's link, of L blocks
// each, and one wait inside the host after the network (docs/algorithms.md:
// all_gather and reduce_scatter across hosts).
constexpr TuningRow kHierarchicalBlocksRows[] = {
    {.algorithm = "flat", .need = UnevenHosts},
    {.algorithm = "flat", .need = UnequalBlocks},
    {.algorithm = "leader", .below = 64 * KiB, .at_most = true},
    {.algorithm = "split"},
};
constexpr TuningRow kHierarchicalLeaderRows[] = {{.algorithm = "leader"}};
// Each block already crosses its host's link once over the whole group;
// small blocks of one size go grouped by host (`split`: fewer messages, the
// same bytes), which only a call without split sizes can vouch for on every
// rank (docs/algorithms.md: all_to_all).
constexpr TuningRow kHierarchicalAllToAllRows[] = {
    {.algorithm = "flat", .need = UnevenHosts},
    {.algorithm = "split", .below = 16 * KiB, .need = EvenSplit},
    {.algorithm = "flat"},
};

// A table's rows with each algorithm's index filled in, so that a pick
// compares no strings.
template <size_t N>
constexpr std::array<TuningRow, N> indexed(const TuningRow (&rows)[N], std::span<const std::string_view> names) {
  std::array<TuningRow, N> out{};
  for (size_t i = 0; i < N; ++i) {
    out[i] = rows[i];
    out[i].index = index_of(names, rows[i].algorithm);
  }
  return out;
}

constexpr auto kAllReduce = indexed(kAllReduceRows, kAllReduceAlgorithms);
constexpr auto kBroadcast = indexed(kBroadcastRows, kBroadcastAlgorithms);
constexpr auto kReduce = indexed(kReduceRows, kReduceAlgorithms);
constexpr auto kAllGather = indexed(kAllGatherRows, kAllGatherAlgorithms);
constexpr auto kReduceScatter = indexed(kReduceScatterRows, kReduceScatterAlgorithms);
constexpr auto kGather = indexed(kGatherRows, kGatherAlgorithms);
constexpr auto kScatter = indexed(kScatterRows, kScatterAlgorithms);
constexpr auto kAllToAll = indexed(kAllToAllRows, kAllToAllAlgorithms);
constexpr auto kBarrier = indexed(kBarrierRows, kBarrierAlgorithms);
constexpr auto kHierarchicalAllReduce = indexed(kHierarchicalAllReduceRows, kHierarchicalPaths);
constexpr auto kHierarchicalReduce = indexed(kHierarchicalReduceRows, kHierarchicalPaths);
constexpr auto kHierarchicalBroadcast = indexed(kHierarchicalBroadcastRows, kHierarchicalPaths);
constexpr auto kHierarchicalBlocks = indexed(kHierarchicalBlocksRows, kHierarchicalPaths);
constexpr auto kHierarchicalLeader = indexed(kHierarchicalLeaderRows, kHierarchicalPaths);
constexpr auto kHierarchicalAllToAll = indexed(kHierarchicalAllToAllRows, kHierarchicalPaths);

constexpr bool names_known(std::span<const TuningRow> rows, std::span<const std::string_view> names) {
  for (const TuningRow& r : rows)
    if (r.index < 0 || names[static_cast<size_t>(r.index)] != r.algorithm) return false;
  return rows.back().hosts == Any && rows.back().below == kAnySize && rows.back().need == Nothing &&
         rows.back().ranks_from == 0 && rows.back().ranks_below == INT_MAX &&
         rows.back().host_copies_at_most == kAnySize;
}

// By OpCode - 1: Broadcast, AllReduce, Barrier, Reduce, AllGather, Gather,
// Scatter, ReduceScatter, AllToAll.
constexpr TuningTable kTransport[kCollectives] = {
    {OpCode::Broadcast, EngineKind::Transport, kBroadcastAlgorithms, kBroadcast},
    {OpCode::AllReduce, EngineKind::Transport, kAllReduceAlgorithms, kAllReduce},
    {OpCode::Barrier, EngineKind::Transport, kBarrierAlgorithms, kBarrier},
    {OpCode::Reduce, EngineKind::Transport, kReduceAlgorithms, kReduce},
    {OpCode::AllGather, EngineKind::Transport, kAllGatherAlgorithms, kAllGather},
    {OpCode::Gather, EngineKind::Transport, kGatherAlgorithms, kGather},
    {OpCode::Scatter, EngineKind::Transport, kScatterAlgorithms, kScatter},
    {OpCode::ReduceScatter, EngineKind::Transport, kReduceScatterAlgorithms, kReduceScatter},
    {OpCode::AllToAll, EngineKind::Transport, kAllToAllAlgorithms, kAllToAll},
};
constexpr TuningTable kHierarchical[kCollectives] = {
    {OpCode::Broadcast, EngineKind::Hierarchical, kHierarchicalPaths, kHierarchicalBroadcast},
    {OpCode::AllReduce, EngineKind::Hierarchical, kHierarchicalPaths, kHierarchicalAllReduce},
    {OpCode::Barrier, EngineKind::Hierarchical, kHierarchicalPaths, kHierarchicalLeader},
    {OpCode::Reduce, EngineKind::Hierarchical, kHierarchicalPaths, kHierarchicalReduce},
    {OpCode::AllGather, EngineKind::Hierarchical, kHierarchicalPaths, kHierarchicalBlocks},
    {OpCode::Gather, EngineKind::Hierarchical, kHierarchicalPaths, kHierarchicalLeader},
    {OpCode::Scatter, EngineKind::Hierarchical, kHierarchicalPaths, kHierarchicalLeader},
    {OpCode::ReduceScatter, EngineKind::Hierarchical, kHierarchicalPaths, kHierarchicalBlocks},
    {OpCode::AllToAll, EngineKind::Hierarchical, kHierarchicalPaths, kHierarchicalAllToAll},
};

constexpr bool tables_sound() {
  for (size_t i = 0; i < kCollectives; ++i) {
    const OpCode code = static_cast<OpCode>(i + 1);
    if (kTransport[i].collective != code || kHierarchical[i].collective != code) return false;
    if (!names_known(kTransport[i].rows, kTransport[i].algorithms)) return false;
    if (!names_known(kHierarchical[i].rows, kHierarchical[i].algorithms)) return false;
  }
  return true;
}
static_assert(tables_sound(), "a tuning row names an unknown algorithm, or a table does not end with a catch-all row");

bool matches(const TuningRow& r, const Shape& s) {
  if (r.hosts == One && !s.one_host()) return false;
  if (r.hosts == Several && s.one_host()) return false;
  if (r.below != kAnySize && (r.at_most ? s.bytes > r.below : s.bytes >= r.below)) return false;
  if (r.host_copies_at_most != kAnySize &&
      s.bytes * static_cast<size_t>(std::max(1, s.ranks_per_host - 1)) > r.host_copies_at_most)
    return false;
  if (s.n < r.ranks_from || s.n >= r.ranks_below) return false;
  const size_t per_host = static_cast<size_t>(std::max(1, s.ranks_per_host));
  switch (r.need) {
    case Nothing: return true;
    case FewerElementsThanRanks: return s.count < static_cast<size_t>(s.n);
    case FewerElementsThanHostRanks: return s.count < per_host;
    case ElementsNotMultipleOfHostRanks: return s.count % per_host != 0;
    case PowerOfTwoRanks: return (s.n & (s.n - 1)) == 0;
    case EqualBlocks: return s.equal_blocks;
    case UnequalBlocks: return !s.equal_blocks;
    case UnevenHosts: return !s.uniform;
    case EvenSplit: return s.even_split;
    case FewCrossHostMessages: {
      int rounds = 0;  // ceil(log2 hosts)
      while ((1 << rounds) < s.hosts) ++rounds;
      return per_host * static_cast<size_t>(rounds) <= 2;
    }
  }
  return false;
}

std::string size_text(size_t bytes) {
  if (bytes >= MiB && bytes % MiB == 0) return std::to_string(bytes / MiB) + " MiB";
  if (bytes >= KiB && bytes % KiB == 0) return std::to_string(bytes / KiB) + " KiB";
  return std::to_string(bytes) + " B";
}

const char* need_text(Need n) {
  switch (n) {
    case Nothing: return "";
    case FewerElementsThanRanks: return "fewer elements than ranks";
    case FewerElementsThanHostRanks: return "fewer elements than ranks per host";
    case ElementsNotMultipleOfHostRanks: return "elements not a multiple of the ranks per host";
    case PowerOfTwoRanks: return "a power of two ranks";
    case EqualBlocks: return "blocks of one size";
    case UnequalBlocks: return "blocks of different sizes";
    case UnevenHosts: return "hosts of different sizes";
    case EvenSplit: return "blocks of one size on every rank (no split sizes)";
    case FewCrossHostMessages: return "ranks per host × ⌈log2 hosts⌉ at most 2";
  }
  return "";
}

std::string when(const TuningRow& r, bool last) {
  std::string out;
  auto add = [&](const std::string& what) { out += (out.empty() ? "" : ", ") + what; };
  if (r.need != Nothing) add(need_text(r.need));
  if (r.hosts == One) add("one host");
  if (r.hosts == Several) add("several hosts");
  if (r.ranks_from > 0) add("n ≥ " + std::to_string(r.ranks_from));
  if (r.ranks_below != INT_MAX) add("n < " + std::to_string(r.ranks_below));
  if (r.below != kAnySize) add((r.at_most ? "at most " : "under ") + size_text(r.below));
  if (r.host_copies_at_most != kAnySize) add("bytes × (ranks per host - 1) at most " + size_text(r.host_copies_at_most));
  if (out.empty()) out = last ? "otherwise" : "always";
  return out;
}

}  // namespace

std::span<const std::string_view> transport_algorithms(OpCode code) {
  if (!has_table(code)) return {};
  return kTransport[collective_index(code)].algorithms;
}

const TuningTable& tuning_table(OpCode code, EngineKind engine) {
  if (!has_table(code) || (engine != EngineKind::Transport && engine != EngineKind::Hierarchical))
    throw DistBackendError(std::string("no tuning table for ") + op_code_name(collective_tag(code, 0)) + " on the " +
                           engine_kind_name(engine) + " engine");
  return (engine == EngineKind::Transport ? kTransport : kHierarchical)[collective_index(code)];
}

int8_t choose(const TuningTable& table, const Shape& s) {
  for (const TuningRow& r : table.rows)
    if (matches(r, s)) return r.index;
  return table.rows.back().index;  // not reached: the last row matches anything
}

std::string tuning_markdown() {
  std::string out = "| Collective | Engine | Algorithm | When (the first row that matches) |\n|---|---|---|---|\n";
  for (const TuningTable* tables : {kTransport, kHierarchical})
    for (size_t i = 0; i < kCollectives; ++i) {
      const TuningTable& t = tables[i];
      const char* collective = op_code_name(collective_tag(t.collective, 0));
      for (size_t k = 0; k < t.rows.size(); ++k)
        out += std::string("| ") + collective + " | " + engine_kind_name(t.engine) + " | `" +
               std::string(t.rows[k].algorithm) + "` | " + when(t.rows[k], k + 1 == t.rows.size()) + " |\n";
    }
  return out;
}

}  // namespace tdist
