// The selector: forced algorithms and the automatic picks with their
// thresholds. Every threshold comes from tdist-bench (in place, float32 SUM,
// the slowest rank's mean time; forced algorithms run back to back, the best
// or median of 3-5 runs quoted) on a 2-core VM shared with other work, so
// only clear differences were acted on:
//  - one host: TCP over loopback (TDIST_SHM=0), 2, 3, 4 and 8 ranks. The
//    ranks share the cores: every copy costs, links do not.
//  - several hosts: each rank in its own network namespace, every link
//    limited to 1 Gbit/s each way (tc tbf), 4 and 8 ranks: an emulated
//    1 GbE cluster where links cost and copies hardly do.
#include "algorithms/selector.h"

#include <algorithm>
#include <cctype>
#include <map>
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

ForcedAlgorithms read_forced_algorithms() {
  ForcedAlgorithms forced;
  // The collectives with algorithms to pick: Broadcast .. AllToAll.
  for (size_t code = 1; code <= static_cast<size_t>(OpCode::AllToAll); ++code) {
    uint64_t tag = collective_tag(static_cast<OpCode>(code), 0);
    forced[code] = forced_algorithm(op_code_name(tag));
  }
  return forced;
}

void throw_unknown_algorithm(const char* collective, const std::string& name, const std::string& valid) {
  std::string var = std::string("TDIST_ALGO_") + collective;
  std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) { return std::toupper(c); });
  throw DistValueError(var + "=" + name + " is not a " + collective + " algorithm (valid: " + valid + ")");
}

std::vector<std::vector<int>> ranks_by_host(const Transport& transport) {
  std::vector<std::vector<int>> hosts;
  std::map<std::string, size_t> index;
  for (int r = 0; r < transport.size(); ++r) {
    auto [it, fresh] = index.emplace(transport.host_of(r), hosts.size());
    if (fresh) hosts.emplace_back();
    hosts[it->second].push_back(r);
  }
  return hosts;
}

Placement placement_of(const Transport& transport) {
  const auto hosts = ranks_by_host(transport);
  Placement where;
  where.hosts = static_cast<int>(hosts.size());
  for (const auto& ranks : hosts) where.ranks_per_host = std::max(where.ranks_per_host, static_cast<int>(ranks.size()));
  return where;
}

Placement placement_of(CollectiveContext& ctx) {
  return ctx.placement ? *ctx.placement : placement_of(ctx.transport);
}

// Shared memory wherever the group has its segment: it beat every transport
// algorithm on one host at every size measured (docs/algorithms.md). The
// hierarchical engine, where a group has one, serves groups of several hosts
// with several ranks on some.
EngineKind pick_engine(const Shape& s, const std::string& forced, EnginesAvailable have) {
  if (!forced.empty() && forced != "shm") return EngineKind::Transport;
  if (have.shared_memory && s.one_host()) return EngineKind::SharedMemory;
  if (have.hierarchical && s.hosts > 1 && s.ranks_per_host > 1) return EngineKind::Hierarchical;
  return EngineKind::Transport;
}

namespace {
constexpr size_t KiB = 1024, MiB = 1024 * KiB;
bool power_of_two(int n) { return (n & (n - 1)) == 0; }
}  // namespace

// Few bytes: recursive doubling (fewest rounds); then Rabenseifner where n is
// a power of two (no whole-buffer fold), then the ring. The thresholds and
// their measurements: docs/algorithms.md.
std::string_view pick_all_reduce(const Shape& s) {
  if (s.count < static_cast<size_t>(s.n)) return "recursive_doubling";
  if (s.bytes < (s.one_host() ? 512 * KiB : 32 * KiB)) return "recursive_doubling";
  const size_t rabenseifner_below = !s.one_host() ? 512 * KiB : 8 * MiB;
  if (power_of_two(s.n) && s.bytes < rabenseifner_below) return "rabenseifner";
  return "ring";
}

// Hosts of different sizes cut the buffer differently, so only the leader
// path fits them. On hosts of one size, few bytes go `replicated` (two steps,
// and no rank waits for another's step among hosts), then `leader` (the
// fewest bytes between hosts), then `split` (docs/algorithms.md).
std::string_view pick_hierarchical_all_reduce(const Shape& s, bool uniform) {
  if (!uniform) return "leader";
  // `replicated` puts ranks_per_host copies on each host's link where
  // `leader` puts one: worth it while the extra copies cost less than the
  // step inside the host it saves.
  if (s.bytes * static_cast<size_t>(std::max(1, s.ranks_per_host - 1)) <= 4 * KiB) return "replicated";
  if (s.count < static_cast<size_t>(s.ranks_per_host) || s.bytes < 64 * KiB) return "leader";
  return "split";
}

// One host: the tree makes the fewest copies; across hosts the chain keeps
// every link busy (docs/algorithms.md).
std::string_view pick_broadcast(const Shape& s) {
  if (s.n < 3 || s.count < static_cast<size_t>(s.n) || s.one_host()) return "binomial";
  return s.bytes < 32 * KiB ? "binomial" : "chain";
}

// One host: the chain folds each segment while it is in cache; across hosts
// Rabenseifner sends less than the tree (docs/algorithms.md).
std::string_view pick_reduce(const Shape& s) {
  if (s.count < static_cast<size_t>(s.n)) return "binomial";
  if (s.one_host()) return s.bytes < 1 * MiB ? "binomial" : "chain";
  return s.n < 4 || s.bytes < 64 * KiB ? "binomial" : "rabenseifner";
}

// Bruck: fewer rounds for equal blocks; with 2 ranks the ring lands in place
// (docs/algorithms.md). Uneven blocks: ring.
std::string_view pick_all_gather(const Shape& s, bool equal) {
  return equal && s.n > 2 && s.bytes < 2 * MiB ? "bruck" : "ring";
}

// Recursive halving: log2(n) rounds for small data (docs/algorithms.md).
std::string_view pick_reduce_scatter(const Shape& s) { return s.bytes < 256 * KiB ? "recursive_halving" : "ring"; }

// The binomial gather was never faster than the linear one (docs/algorithms.md).
std::string_view pick_gather(const Shape&) { return "linear"; }

// The binomial scatter halves the root's sends: faster for small blocks from
// 8 ranks (docs/algorithms.md).
std::string_view pick_scatter(const Shape& s) {
  return s.n >= 8 && s.bytes < 16 * KiB ? "binomial" : "linear";
}

// Bruck: fewer rounds for small equal blocks, which only the caller can vouch
// for (docs/algorithms.md).
std::string_view pick_all_to_all(const Shape& s, bool uniform) {
  return uniform && s.n > 2 && s.bytes <= 8 * KiB ? "bruck" : "pairwise";
}

}  // namespace tdist
