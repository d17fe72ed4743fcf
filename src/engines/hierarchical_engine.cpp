// The hierarchical engine: collectives of a group that spans hosts with
// several of its ranks on some, as a step inside each host (shared memory),
// a step among hosts, and a step inside each host again (MPICH's SMP
// all_reduce, Open MPI's HAN). docs/algorithms.md gives the cost of each.
#include <algorithm>
#include <map>
#include <string>

#include "algorithms/selector.h"
#include "engines/engine.h"

namespace tdist {

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

namespace {

// A context for one step of a hierarchical operation: over `transport`,
// tagged as `code` of the operation's sequence number (each step its own
// tag, so the out-of-step check between consecutive steps holds as between
// consecutive collectives).
CollectiveContext step_context(CollectiveContext& ctx, Transport& transport, OpCode code, const Placement& where) {
  const uint64_t tag = collective_tag(code, sequence_of(ctx.tag), signature_of(ctx.tag));
  return CollectiveContext{transport, tag, ctx.deadline, ctx.forced, &where};
}

class HierarchicalEngine final : public Engine {
 public:
  explicit HierarchicalEngine(HostSplit split) : s_(std::move(split)) {}
  const char* name() const override { return "hierarchical"; }

  void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op) override {
    const bool integer_avg = op == ReduceOp::AVG && !is_floating(t.dtype()) && !is_complex(t.dtype());
    // AVG composes (an average of equal-sized hosts' averages) only with one
    // host size, and exactly only for floating types.
    if (op == ReduceOp::AVG && (!s_.uniform || integer_avg)) {
      transport_engine().all_reduce(ctx, t, op);
      return;
    }
    // PREMUL_SUM multiplies each input once: inside the host; the sums after that are plain.
    const ReduceOp outer = op.kind() == ReduceOp::PREMUL_SUM ? ReduceOp(ReduceOp::SUM) : op;
    const int local_n = s_.local->size(), me = s_.local->rank();
    const size_t count = static_cast<size_t>(t.numel());
    const Shape shape = shape_of(ctx, t.nbytes(), count);
    if (pick_hierarchical_all_reduce(shape, s_.uniform) == "leader") {
      // Few bytes: one rank per host carries the host's sum across.
      auto in_host = step_context(ctx, *s_.local, OpCode::Reduce, s_.local_placement);
      s_.local_engine->reduce(in_host, t, 0, op);
      if (me == 0) {
        auto among = step_context(ctx, *s_.cross, OpCode::AllReduce, s_.cross_placement);
        transport_engine().all_reduce(among, t, outer);
      }
      auto back = step_context(ctx, *s_.local, OpCode::Broadcast, s_.local_placement);
      s_.local_engine->broadcast(back, t, 0);
      return;
    }
    // Every rank of a host carries 1/local_n of it across, all at once:
    // reduce-scatter inside the host, all-reduce of each block among the
    // hosts' ranks of one local index, all-gather inside the host.
    std::vector<Tensor> blocks;
    blocks.reserve(local_n);
    const size_t base = count / local_n, extra = count % local_n;
    for (int i = 0, at = 0; i < local_n; ++i) {
      const size_t len = base + (static_cast<size_t>(i) < extra ? 1 : 0);
      blocks.push_back(t.slice(at, static_cast<int64_t>(len)));
      at += static_cast<int>(len);
    }
    auto scatter = step_context(ctx, *s_.local, OpCode::ReduceScatter, s_.local_placement);
    s_.local_engine->reduce_scatter(scatter, blocks[me], blocks, op);
    auto among = step_context(ctx, *s_.cross, OpCode::AllReduce, s_.cross_placement);
    transport_engine().all_reduce(among, blocks[me], outer);
    auto gather = step_context(ctx, *s_.local, OpCode::AllGather, s_.local_placement);
    s_.local_engine->all_gather(gather, blocks, blocks[me]);
  }

  // Every rank arrives in its host; one rank per host meets the others'; the
  // hosts' ranks leave when theirs returns.
  void barrier(CollectiveContext& ctx) override {
    auto arrive = step_context(ctx, *s_.local, OpCode::Barrier, s_.local_placement);
    s_.local_engine->barrier(arrive);
    if (s_.local->rank() == 0) {
      auto among = step_context(ctx, *s_.cross, OpCode::Barrier, s_.cross_placement);
      barrier_dissemination(among);
    }
    auto leave = step_context(ctx, *s_.local, OpCode::MonitoredBarrier, s_.local_placement);
    s_.local_engine->barrier(leave);
  }

  // Not hierarchical yet: the transport engine's algorithms over the whole group.
  void broadcast(CollectiveContext& ctx, const Tensor& t, int root) override {
    transport_engine().broadcast(ctx, t, root);
  }
  void reduce(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) override {
    transport_engine().reduce(ctx, t, root, op);
  }
  void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) override {
    transport_engine().all_gather(ctx, outputs, input);
  }
  void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) override {
    transport_engine().gather(ctx, outputs, input, root);
  }
  void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) override {
    transport_engine().scatter(ctx, output, inputs, root);
  }
  void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                      ReduceOp op) override {
    transport_engine().reduce_scatter(ctx, output, inputs, op);
  }
  void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                  const std::vector<Tensor>& inputs) override {
    transport_engine().all_to_all(ctx, outputs, inputs);
  }

 private:
  HostSplit s_;
};

}  // namespace

std::unique_ptr<Engine> make_hierarchical_engine(HostSplit split) {
  return std::make_unique<HierarchicalEngine>(std::move(split));
}

}  // namespace tdist
