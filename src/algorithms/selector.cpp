// The selector: the forced algorithms, the engine for a call, and the
// automatic picks, read from the tuning tables (tuning_table.cpp). The
// measurements behind every threshold: docs/algorithms.md.
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

int8_t ForcedAlgorithms::parse(OpCode code, const std::string& value) {
  if (value.empty() || value == "shm") return kNone;
  const std::span<const std::string_view> names = transport_algorithms(code);
  const int8_t at = index_of(names, value);
  if (at >= 0) return at;
  std::string valid;
  for (std::string_view name : names) valid += (valid.empty() ? "" : ", ") + std::string(name);
  throw_unknown_algorithm(op_code_name(collective_tag(code, 0)), value, valid + ", shm");
}

ForcedAlgorithms ForcedAlgorithms::from_environment() {
  ForcedAlgorithms forced;
  for (size_t i = 0; i < kCollectives; ++i) {
    const OpCode code = static_cast<OpCode>(i + 1);
    forced.forced_[i] = parse(code, forced_algorithm(op_code_name(collective_tag(code, 0))));
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
EngineKind pick_engine(const Shape& s, int8_t forced, EnginesAvailable have) {
  if (forced != ForcedAlgorithms::kNone) return EngineKind::Transport;
  if (have.shared_memory && s.one_host()) return EngineKind::SharedMemory;
  if (have.hierarchical && s.hosts > 1 && s.ranks_per_host > 1) return EngineKind::Hierarchical;
  return EngineKind::Transport;
}

EngineKind pick_engine(const Shape& s, const std::string& forced, EnginesAvailable have) {
  return pick_engine(s, forced.empty() || forced == "shm" ? ForcedAlgorithms::kNone : int8_t{0}, have);
}

Decision decide(OpCode code, const Shape& s, const ForcedAlgorithms& forced, EnginesAvailable have) {
  const int8_t forced_at = forced.of(code);
  Decision d;
  d.engine = pick_engine(s, forced_at, have);
  if (d.engine == EngineKind::SharedMemory || !has_table(code)) return d;
  const TuningTable& table = tuning_table(code, d.engine);
  d.algorithm = d.engine == EngineKind::Transport && forced_at >= 0 ? forced_at : choose(table, s);
  d.algorithm_name = table.algorithms[static_cast<size_t>(d.algorithm)].data();  // the tables' names are literals
  return d;
}

namespace {
std::string_view transport_pick(OpCode code, const Shape& s) {
  return transport_algorithms(code)[static_cast<size_t>(pick_transport(code, s))];
}
}  // namespace

std::string_view pick_all_reduce(const Shape& s) { return transport_pick(OpCode::AllReduce, s); }

std::string_view pick_hierarchical_all_reduce(const Shape& s, bool uniform) {
  Shape with = s;
  with.uniform = uniform;
  return kHierarchicalPaths[static_cast<size_t>(choose(tuning_table(OpCode::AllReduce, EngineKind::Hierarchical), with))];
}

std::string_view pick_broadcast(const Shape& s) { return transport_pick(OpCode::Broadcast, s); }
std::string_view pick_reduce(const Shape& s) { return transport_pick(OpCode::Reduce, s); }

std::string_view pick_all_gather(const Shape& s, bool equal) {
  Shape with = s;
  with.equal_blocks = equal;
  return transport_pick(OpCode::AllGather, with);
}

std::string_view pick_reduce_scatter(const Shape& s) { return transport_pick(OpCode::ReduceScatter, s); }
std::string_view pick_gather(const Shape& s) { return transport_pick(OpCode::Gather, s); }
std::string_view pick_scatter(const Shape& s) { return transport_pick(OpCode::Scatter, s); }

std::string_view pick_all_to_all(const Shape& s, bool uniform) {
  Shape with = s;
  with.equal_blocks = uniform;
  return transport_pick(OpCode::AllToAll, with);
}

}  // namespace tdist
