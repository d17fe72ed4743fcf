// The hierarchical engine: collectives of a group that spans hosts with
// several of its ranks on some, as steps inside each host (shared memory)
// and among hosts (MPICH's SMP collectives, Open MPI's HAN). Where the hosts
// hold as many ranks each, every rank of a host carries its share across at
// once, so a host's link and cores work together. docs/algorithms.md gives
// the cost of each.
#include <algorithm>
#include <functional>
#include <future>
#include <string>

#include "algorithms/blocks.h"
#include "algorithms/scratch.h"
#include "algorithms/selector.h"
#include "engines/engine.h"
#include "tensor/split.h"
#include "trace/timeline.h"
#include "transport/transport.h"
#include "util/bulk_copy.h"
#include "util/thread_name.h"

namespace tdist {

namespace {

bool equal_sizes(const std::vector<Tensor>& list) {
  return std::all_of(list.begin(), list.end(), [&](const Tensor& t) { return t.nbytes() == list[0].nbytes(); });
}

class HierarchicalEngine final : public Engine {
 public:
  explicit HierarchicalEngine(HostSplit split) : s_(std::move(split)) {
    size_t n = 0;
    for (const auto& members : s_.hosts) n += members.size();
    host_of_.resize(n);
    index_of_.resize(n);
    for (size_t h = 0; h < s_.hosts.size(); ++h)
      for (size_t i = 0; i < s_.hosts[h].size(); ++i) {
        host_of_[s_.hosts[h][i]] = static_cast<int>(h);
        index_of_[s_.hosts[h][i]] = static_cast<int>(i);
      }
  }
  EngineKind kind() const override { return EngineKind::Hierarchical; }

  void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op) override {
    if (!composes(op, t.dtype())) {
      transport_engine().all_reduce(ctx, t, op);
      return;
    }
    const ReduceOp outer = across(op);
    const int local_n = s_.local->size(), me = s_.local->rank();
    const size_t count = static_cast<size_t>(t.numel());
    const int8_t path = path_of(ctx, OpCode::AllReduce, t.nbytes(), count);
    if (path == kReplicated) {
      // Few bytes: every rank gets its host's sum, then carries it across
      // with the ranks of its local index; nobody waits for a leader.
      auto in_host = local(ctx, 0);
      s_.local_engine->all_reduce(in_host, t, op);
      auto among = cross(ctx, 1);
      s_.cross_engine->all_reduce(among, t, outer);
      return;
    }
    if (path == kLeader) {
      // Few bytes: one rank per host carries the host's sum across.
      auto in_host = local(ctx, 0);
      s_.local_engine->reduce(in_host, t, 0, op);
      if (me == 0) {
        auto among = cross(ctx, 1);
        s_.cross_engine->all_reduce(among, t, outer);
      }
      auto back = local(ctx, 2, true);
      s_.local_engine->broadcast(back, t, 0);
      return;
    }
    // Every rank of a host carries 1/local_n of it across, all at once:
    // reduce-scatter inside the host, all-reduce of each block among the
    // hosts' ranks of one local index, all-gather inside the host, in
    // segments (pipeline).
    std::vector<std::vector<Tensor>> blocks;
    for (const Tensor& segment : cut(t, segments_for(t.nbytes(), count / local_n)))
      blocks.push_back(cut(segment, local_n));
    pipeline(
        ctx, blocks.size(), 3,
        [&](size_t s, uint32_t step) {
          auto scatter = local(ctx, step);
          s_.local_engine->reduce_scatter(scatter, blocks[s][me], blocks[s], op);
        },
        [&](size_t s, uint32_t step) {
          auto among = cross(ctx, step + 1);
          s_.cross_engine->all_reduce(among, blocks[s][me], outer);
        },
        [&](size_t s, uint32_t step) {
          auto gather = local(ctx, step + 2, true);
          s_.local_engine->all_gather(gather, blocks[s], blocks[s][me]);
        });
  }

  // Every rank arrives in its host; one rank per host meets the others'; the
  // hosts' ranks leave when theirs returns.
  void barrier(CollectiveContext& ctx) override {
    auto arrive = local(ctx, 0);
    s_.local_engine->barrier(arrive);
    if (s_.local->rank() == 0) {
      auto among = cross(ctx, 1);
      algorithms::barrier_dissemination(among);
    }
    auto leave = local(ctx, 2, true);
    s_.local_engine->barrier(leave);
  }

  // The root's host first has it all (inside the host), then each of its
  // ranks sends its block to the ranks of its local index on the other hosts,
  // which put the blocks together inside their hosts; in segments. Hosts of
  // different sizes, or few bytes: the root's host's first rank sends the
  // whole buffer to the other hosts' first ranks instead.
  void broadcast(CollectiveContext& ctx, const Tensor& t, int root) override {
    const int root_host = host_of_[root], me = s_.local->rank();
    const size_t count = static_cast<size_t>(t.numel());
    const int local_n = s_.local->size();
    if (path_of(ctx, OpCode::Broadcast, t.nbytes(), count) != kSplit) {
      if (s_.host == root_host) {
        auto in_host = local(ctx, 0);
        s_.local_engine->broadcast(in_host, t, index_of_[root]);
      }
      if (me == 0) {
        auto among = cross(ctx, 1);
        s_.cross_engine->broadcast(among, t, root_host);
      }
      if (s_.host != root_host) {
        auto out = local(ctx, 2, true);
        s_.local_engine->broadcast(out, t, 0);
      }
      return;
    }
    // In segments (pipeline): the root's host shares a segment, its ranks
    // send their blocks of it across, the other hosts put them together.
    std::vector<Tensor> segments = cut(t, segments_for(t.nbytes(), count / local_n));
    std::vector<std::vector<Tensor>> blocks;
    for (const Tensor& segment : segments) blocks.push_back(cut(segment, local_n));
    const bool root_side = s_.host == root_host;
    pipeline(
        ctx, segments.size(), 3,
        [&](size_t s, uint32_t step) {
          if (!root_side) return;
          auto in_host = local(ctx, step);
          s_.local_engine->broadcast(in_host, segments[s], index_of_[root]);
        },
        [&](size_t s, uint32_t step) {
          auto among = cross(ctx, step + 1);
          s_.cross_engine->broadcast(among, blocks[s][me], root_host);
        },
        [&](size_t s, uint32_t step) {
          if (root_side) return;
          auto gather = local(ctx, step + 2, true);
          s_.local_engine->all_gather(gather, blocks[s], blocks[s][me]);
        });
  }

  // Hosts of one size, blocks of one size: the blocks of this local index
  // cross among the hosts first (every rank of a host at once, straight into
  // their outputs), then each host's ranks share them, one host's blocks at a
  // time; in segments (pipeline). Few bytes go through each host's first rank
  // (all_gather_through_leaders).
  void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) override {
    if (!s_.uniform || !equal_sizes(outputs)) {
      transport_engine().all_gather(ctx, outputs, input);
      return;
    }
    if (path_of(ctx, OpCode::AllGather, input.nbytes() * outputs.size(), 0) == kLeader) {
      all_gather_through_leaders(ctx, outputs, input);
      return;
    }
    const int me = s_.local->rank();
    const size_t hosts = s_.hosts.size();
    const int segments = segments_for(input.nbytes() * outputs.size(), static_cast<size_t>(input.numel()));
    const std::vector<Tensor> input_segments = cut(input, segments);
    std::vector<std::vector<Tensor>> output_segments;  // by rank, then segment
    for (const Tensor& out : outputs) output_segments.push_back(cut(out, segments));
    // Segment s of the blocks of `ranks`.
    auto segment_of = [&](const std::vector<int>& ranks, size_t s) {
      std::vector<Tensor> blocks;
      for (int r : ranks) blocks.push_back(output_segments[r][s]);
      return blocks;
    };
    std::vector<int> same_index;  // the ranks of this local index, by host
    for (const auto& members : s_.hosts) same_index.push_back(members[me]);
    pipeline(
        ctx, static_cast<size_t>(segments), static_cast<uint32_t>(1 + hosts), nullptr,
        [&](size_t s, uint32_t step) {
          auto among = cross(ctx, step);
          s_.cross_engine->all_gather(among, segment_of(same_index, s), input_segments[s]);
        },
        [&](size_t s, uint32_t step) {
          for (size_t h = 0; h < hosts; ++h) {
            std::vector<Tensor> blocks = segment_of(s_.hosts[h], s);
            auto share = local(ctx, step + 1 + static_cast<uint32_t>(h), true);
            s_.local_engine->all_gather(share, blocks, blocks[me]);
          }
        });
  }

  // Hosts of one size, blocks of one size: inside each host, one
  // reduce-scatter per host's blocks leaves each rank its host's part of the
  // block of its local index on every host; among the hosts, a reduce-scatter
  // of those parts then gives each rank its own block; in segments (pipeline).
  // Few bytes go through each host's first rank (reduce_scatter_through_leaders).
  void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                      ReduceOp op) override {
    if (!s_.uniform || !equal_sizes(inputs) || !composes(op, output.dtype())) {
      transport_engine().reduce_scatter(ctx, output, inputs, op);
      return;
    }
    if (path_of(ctx, OpCode::ReduceScatter, output.nbytes() * inputs.size(), 0) == kLeader) {
      reduce_scatter_through_leaders(ctx, output, inputs, op);
      return;
    }
    const size_t hosts = s_.hosts.size(), bytes = output.nbytes();
    const int64_t count = output.numel();
    Scratch partial(hosts * bytes);
    const int segments = segments_for(bytes * inputs.size(), static_cast<size_t>(count));
    const std::vector<Tensor> output_segments = cut(output, segments);
    std::vector<std::vector<Tensor>> part_segments;  // by host, then segment
    for (size_t h = 0; h < hosts; ++h)
      part_segments.push_back(cut(Tensor(partial.get() + h * bytes, output.dtype(), {count}), segments));
    std::vector<std::vector<Tensor>> input_segments;  // by rank, then segment
    for (const Tensor& in : inputs) input_segments.push_back(cut(in, segments));
    pipeline(
        ctx, static_cast<size_t>(segments), static_cast<uint32_t>(hosts + 1),
        [&](size_t s, uint32_t step) {
          for (size_t h = 0; h < hosts; ++h) {
            std::vector<Tensor> blocks;
            for (int r : s_.hosts[h]) blocks.push_back(input_segments[r][s]);
            auto fold = local(ctx, step + static_cast<uint32_t>(h));
            s_.local_engine->reduce_scatter(fold, part_segments[h][s], blocks, op);
          }
        },
        [&](size_t s, uint32_t step) {
          std::vector<Tensor> parts;
          for (size_t h = 0; h < hosts; ++h) parts.push_back(part_segments[h][s]);
          auto among = cross(ctx, step + static_cast<uint32_t>(hosts));
          s_.cross_engine->reduce_scatter(among, output_segments[s], parts, across(op));
        },
        nullptr);
  }

  // One rank per host folds its host's inputs; those ranks fold the hosts'
  // sums into the root's host. Many bytes on hosts of one size: every rank of
  // a host folds 1/local_n of the buffer across instead, and the root's host
  // gathers the pieces. Non-root tensors stay as they were: a rank that holds
  // a partial result holds it in a copy.
  void reduce(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) override {
    if (!composes(op, t.dtype())) {
      transport_engine().reduce(ctx, t, root, op);
      return;
    }
    const int root_host = host_of_[root], root_index = index_of_[root], me = s_.local->rank();
    const int local_n = s_.local->size();
    const bool is_root = ctx.rank() == root;
    const size_t count = static_cast<size_t>(t.numel());
    Scratch copy;
    auto own = [&](bool holds_partial) {  // the buffer this rank folds into
      if (is_root || !holds_partial) return t;
      copy = Scratch(t.nbytes());
      bulk_copy(copy.get(), t.data(), t.nbytes());
      return Tensor(copy.get(), t.dtype(), {t.numel()});
    };
    if (path_of(ctx, OpCode::Reduce, t.nbytes(), count) == kSplit) {
      const Tensor buf = own(true);
      std::vector<Tensor> blocks = cut(buf, local_n);
      auto fold = local(ctx, 0);
      s_.local_engine->reduce_scatter(fold, blocks[me], blocks, op);
      auto among = cross(ctx, 1);
      s_.cross_engine->reduce(among, blocks[me], root_host, across(op));
      if (s_.host == root_host) {
        auto collect = local(ctx, 2, true);
        s_.local_engine->gather(collect, is_root ? blocks : std::vector<Tensor>{}, blocks[me], root_index);
      }
      return;
    }
    // The leaders are the ranks of the root's local index where every host
    // has one, else each host's first rank (and the root's host's first rank
    // hands the result to the root).
    const int leader = s_.uniform ? root_index : 0;
    const Tensor buf = own(me == leader);
    auto in_host = local(ctx, 0);
    s_.local_engine->reduce(in_host, buf, leader, op);
    if (me == leader) {
      auto among = cross(ctx, 1);
      s_.cross_engine->reduce(among, buf, root_host, across(op));
    }
    if (s_.host == root_host && leader != root_index) {
      auto hand = local(ctx, 2, true);
      if (me == leader) hand.send(root_index, 0, buf.data(), buf.nbytes());
      if (is_root) hand.recv(leader, 0, t.data(), t.nbytes());
    }
  }

  // Each host's first rank (on the root's host, the root) gathers its host's
  // blocks, then sends them to the root in one message.
  void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) override {
    const int root_host = host_of_[root], me = s_.local->rank();
    const int leader = s_.host == root_host ? index_of_[root] : 0;
    const std::vector<int>& members = s_.hosts[s_.host];
    const size_t block = input.nbytes();
    Scratch packed;
    std::vector<Tensor> mine;  // this host's blocks, on its leader
    if (me == leader) {
      if (s_.host == root_host) {
        for (int r : members) mine.push_back(outputs[r]);
      } else {
        packed = Scratch(members.size() * block);
        mine = pieces(packed.get(), input, members.size());
      }
    }
    auto in_host = local(ctx, 0);
    s_.local_engine->gather(in_host, mine, input, leader);
    // Among hosts over the group's own connections: the leaders need no
    // communicator of their own.
    auto among = leaders(ctx);
    if (s_.host != root_host) {
      if (me == leader) among.send(root, 1, packed.get(), members.size() * block);
      return;
    }
    if (ctx.rank() != root) return;
    std::vector<Scratch> from(s_.hosts.size());
    abort_on_error(ctx.transport, [&] {
      std::vector<std::shared_ptr<Request>> reqs;
      for (size_t h = 0; h < s_.hosts.size(); ++h) {
        if (static_cast<int>(h) == root_host) continue;
        const size_t bytes = s_.hosts[h].size() * block;
        from[h] = Scratch(bytes);
        reqs.push_back(ctx.transport.irecv(s_.hosts[h][0], step_tag(ctx.tag, 1), from[h].get(), bytes));
      }
      for (auto& r : reqs) ctx.transport.wait(*r, among.deadline);
    });
    for (size_t h = 0; h < s_.hosts.size(); ++h)
      for (size_t i = 0; static_cast<int>(h) != root_host && i < s_.hosts[h].size(); ++i)
        bulk_copy(outputs[s_.hosts[h][i]].data(), from[h].get() + i * block, block);
  }

  // The mirror of gather: the root sends each other host's first rank its
  // host's blocks in one message, then every host scatters inside.
  void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) override {
    const int root_host = host_of_[root], me = s_.local->rank();
    const int leader = s_.host == root_host ? index_of_[root] : 0;
    const std::vector<int>& members = s_.hosts[s_.host];
    const size_t block = output.nbytes();
    Scratch packed;
    std::vector<Tensor> mine;  // this host's blocks, on its leader
    auto among = leaders(ctx);
    if (ctx.rank() == root) {
      std::vector<Scratch> to(s_.hosts.size());
      abort_on_error(ctx.transport, [&] {
        std::vector<std::shared_ptr<Request>> reqs;
        for (size_t h = 0; h < s_.hosts.size(); ++h) {
          if (static_cast<int>(h) == root_host) continue;
          const size_t bytes = s_.hosts[h].size() * block;
          to[h] = Scratch(bytes);
          for (size_t i = 0; i < s_.hosts[h].size(); ++i)
            bulk_copy(to[h].get() + i * block, inputs[s_.hosts[h][i]].data(), block);
          reqs.push_back(ctx.transport.isend(s_.hosts[h][0], step_tag(ctx.tag, 0), to[h].get(), bytes));
        }
        for (int r : members) mine.push_back(inputs[r]);
        auto in_host = local(ctx, 1);
        s_.local_engine->scatter(in_host, output, mine, leader);
        for (auto& r : reqs) ctx.transport.wait(*r, among.deadline);
      });
      return;
    }
    if (s_.host != root_host && me == leader) {
      packed = Scratch(members.size() * block);
      among.recv(root, 0, packed.get(), members.size() * block);
      mine = pieces(packed.get(), output, members.size());
    }
    auto in_host = local(ctx, 1, true);
    s_.local_engine->scatter(in_host, output, mine, leader);
  }

  // Over the whole group each block already crosses its host's link once,
  // the least any schedule can send. Small blocks of one size on every rank
  // (`split`) go in two steps grouped by host instead: the same bytes cross,
  // in H-1 messages per rank rather than n-L (all_to_all_by_host).
  void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                  const std::vector<Tensor>& inputs) override {
    if (s_.uniform && !inputs.empty() && path_of(ctx, OpCode::AllToAll, inputs[0].nbytes(), 0) == kSplit) {
      all_to_all_by_host(ctx, outputs, inputs);
      return;
    }
    transport_engine().all_to_all(ctx, outputs, inputs);
  }

 private:
  // The paths of the tuning tables (tuning_table.h), by index.
  static constexpr int8_t kLeader = index_of(kHierarchicalPaths, "leader");
  static constexpr int8_t kReplicated = index_of(kHierarchicalPaths, "replicated");
  static constexpr int8_t kSplit = index_of(kHierarchicalPaths, "split");
  static_assert(kLeader >= 0 && kReplicated >= 0 && kSplit >= 0);
  static constexpr Decision kLinearAllToAll{
      .engine = EngineKind::Transport, .algorithm = index_of(kAllToAllAlgorithms, "linear"), .algorithm_name = "linear"};
  static_assert(kLinearAllToAll.algorithm >= 0);

  // The path of `code`: the call's decision, made where it was issued; else
  // (the engine called without one) the table's pick for this call.
  int8_t path_of(CollectiveContext& ctx, OpCode code, size_t bytes, size_t count) const {
    if (const int8_t decided = ctx.decision.hierarchical_path(); decided >= 0) return decided;
    Shape s = shape_of(ctx, bytes, count);
    s.uniform = s_.uniform;
    return choose(tuning_table(code, EngineKind::Hierarchical), s);
  }
  // Steps in segments pipeline segments of this size (of the whole buffer),
  // at most this many.
  static constexpr size_t kSegmentBytes = 1 << 20, kMaxSegments = 64;
  // How many segments a buffer of `bytes` goes in, with at least one element
  // of the `count` that are cut in each.
  static int segments_for(size_t bytes, size_t count) {
    return static_cast<int>(std::max<size_t>(1, std::min({bytes / kSegmentBytes, kMaxSegments, count})));
  }

  using Step = std::function<void(size_t segment, uint32_t first_step)>;
  // Runs each segment through a step inside the host (`before`), one among
  // hosts (`between`) and another inside the host (`after`); a null step is
  // skipped. The step among hosts of one segment runs on a helper thread
  // while this thread does the host's steps of the segments around it, so
  // shared memory and the network work at once. Segment s's steps are
  // numbered from s * stride (each its own tag). A failure aborts the
  // transport, so the helper's step ends at once too.
  void pipeline(CollectiveContext& ctx, size_t segments, uint32_t stride, const Step& before, const Step& between,
                const Step& after) {
    auto first = [&](size_t s) { return static_cast<uint32_t>(s) * stride; };
    if (segments == 1) {
      if (before) before(0, 0);
      between(0, 0);
      if (after) after(0, 0);
      return;
    }
    abort_on_error(ctx.transport, [&] {
      std::future<void> carrying;  // the previous segment's step among hosts
      for (size_t s = 0; s <= segments; ++s) {
        if (s < segments && before) before(s, first(s));
        if (s > 0) carrying.get();
        if (s < segments)
          carrying = std::async(std::launch::async, [&between, s, step = first(s)] {
            name_this_thread("tdist-hier-net");  // so that top -H, gdb and perf tell it apart
            trace::set_step_thread(1);           // ... and timelines
            between(s, step);
          });
        if (s > 0 && after) after(s - 1, first(s - 1));
      }
    });
  }

  // For few bytes (the table's `leader` row) the messages and the waits cost
  // more than the bytes: each host's first rank gathers its host's
  // blocks, those ranks all-gather the hosts' packed blocks among them, and
  // each hands the whole result to its host's ranks. One stream per host's
  // link instead of L, of L blocks each, and no step inside the host after
  // the network but the broadcast (docs/algorithms.md: all_gather across
  // hosts). `packed` holds the result by host, each host's blocks by local
  // index.
  void all_gather_through_leaders(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) {
    const int me = s_.local->rank(), local_n = s_.local->size();
    const size_t hosts = s_.hosts.size(), block = input.nbytes(), per_host = static_cast<size_t>(local_n);
    Scratch packed(per_host * hosts * block);
    const Tensor region_like(packed.get(), input.dtype(), {input.numel() * static_cast<int64_t>(local_n)});
    const std::vector<Tensor> regions = pieces(packed.get(), region_like, hosts);
    std::vector<Tensor> mine;  // this host's blocks, on its first rank
    if (me == 0) mine = pieces(static_cast<char*>(regions[s_.host].data()), input, per_host);
    auto in_host = local(ctx, 0);
    s_.local_engine->gather(in_host, mine, input, 0);
    if (me == 0) {
      auto among = cross(ctx, 1);
      s_.cross_engine->all_gather(among, regions, regions[s_.host]);
    }
    const Tensor whole(packed.get(), input.dtype(), {input.numel() * static_cast<int64_t>(per_host * hosts)});
    auto out = local(ctx, 2, true);
    s_.local_engine->broadcast(out, whole, 0);
    if (block == 0) return;
    for (size_t h = 0; h < hosts; ++h)
      for (size_t i = 0; i < per_host; ++i)
        bulk_copy(outputs[s_.hosts[h][i]].data(), packed.get() + (h * per_host + i) * block, block);
  }

  // all_gather_through_leaders' mirror, for few bytes (the table's `leader`
  // row): each host's first rank folds its host's inputs (packed by host,
  // each host's blocks by local index), those ranks reduce-scatter the
  // hosts' parts among them, and each hands its host's ranks their blocks.
  void reduce_scatter_through_leaders(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                                      ReduceOp op) {
    const int me = s_.local->rank(), local_n = s_.local->size();
    const size_t hosts = s_.hosts.size(), block = output.nbytes(), per_host = static_cast<size_t>(local_n);
    Scratch packed(per_host * hosts * block), reduced(per_host * block);
    for (size_t h = 0; h < hosts && block > 0; ++h)
      for (size_t i = 0; i < per_host; ++i)
        bulk_copy(packed.get() + (h * per_host + i) * block, inputs[s_.hosts[h][i]].data(), block);
    const Tensor whole(packed.get(), output.dtype(), {output.numel() * static_cast<int64_t>(per_host * hosts)});
    auto fold = local(ctx, 0);
    s_.local_engine->reduce(fold, whole, 0, op);
    if (me == 0) {
      const Tensor part_like(packed.get(), output.dtype(), {output.numel() * static_cast<int64_t>(local_n)});
      const Tensor mine(reduced.get(), output.dtype(), {output.numel() * static_cast<int64_t>(local_n)});
      auto among = cross(ctx, 1);
      s_.cross_engine->reduce_scatter(among, mine, pieces(packed.get(), part_like, hosts), across(op));
    }
    auto out = local(ctx, 2, true);
    s_.local_engine->scatter(out, output, me == 0 ? pieces(reduced.get(), output, per_host) : std::vector<Tensor>{}, 0);
  }

  // all_to_all in two steps, for blocks of one size on hosts of one size.
  // Among hosts, rank i of a host sends rank i of every other host, in one
  // message, the blocks for all of that host's ranks; inside the host, its
  // ranks then hand each other what arrived for them. Each step packs its
  // blocks by destination in `outgoing` and receives into `incoming`: among
  // hosts, outgoing region h holds this rank's blocks for host h's ranks (by
  // local index) and incoming region h what rank i of host h sent; inside the
  // host, outgoing region j holds the blocks for local rank j (by host) and
  // incoming region j what local rank j passed on, the blocks from rank j of
  // every host (by host).
  void all_to_all_by_host(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                          const std::vector<Tensor>& inputs) {
    const size_t hosts = s_.hosts.size(), per_host = static_cast<size_t>(s_.local->size());
    const size_t block = inputs[0].nbytes();
    Scratch outgoing(hosts * per_host * block), incoming(hosts * per_host * block);
    const Tensor& like = inputs[0];
    auto regions = [&](const Scratch& s, size_t n, size_t blocks_each) {
      const Tensor region(s.get(), like.dtype(), {like.numel() * static_cast<int64_t>(blocks_each)});
      return pieces(s.get(), region, n);
    };
    auto at = [&](const Scratch& s, size_t region, size_t blocks_each, size_t b) {
      return s.get() + (region * blocks_each + b) * block;
    };
    const auto copy = [&](void* dst, const void* src) {
      if (block > 0) bulk_copy(dst, src, block);
    };
    for (size_t h = 0; h < hosts; ++h)
      for (size_t j = 0; j < per_host; ++j) copy(at(outgoing, h, per_host, j), inputs[s_.hosts[h][j]].data());
    // Every message at once (`linear`): pairwise would make H-1 rounds of these few bytes.
    auto among = cross(ctx, 0, kLinearAllToAll);
    s_.cross_engine->all_to_all(among, regions(incoming, hosts, per_host), regions(outgoing, hosts, per_host));
    for (size_t j = 0; j < per_host; ++j)
      for (size_t h = 0; h < hosts; ++h) copy(at(outgoing, j, hosts, h), at(incoming, h, per_host, j));
    auto share = local(ctx, 1, true);
    s_.local_engine->all_to_all(share, regions(incoming, per_host, hosts), regions(outgoing, per_host, hosts));
    for (size_t i = 0; i < per_host; ++i)
      for (size_t h = 0; h < hosts; ++h) copy(outputs[s_.hosts[h][i]].data(), at(incoming, i, hosts, h));
  }

  // Whether `op` can run in steps: AVG only as an average of equal-sized
  // hosts' averages of a floating type (integers would truncate twice).
  bool composes(ReduceOp op, DType dtype) const {
    return op != ReduceOp::AVG || (s_.uniform && (is_floating(dtype) || is_complex(dtype)));
  }
  // The op among hosts: PREMUL_SUM multiplies each input once, inside the host.
  static ReduceOp across(ReduceOp op) { return op.kind() == ReduceOp::PREMUL_SUM ? ReduceOp(ReduceOp::SUM) : op; }

  // Contexts for the steps of one operation: each step its own tag (see
  // OpCode::HostStep), so consecutive steps on one communicator never match
  // each other's messages.
  // `after_network`: the step follows one among hosts, so the ranks it waits
  // for may still be on the network (CollectiveContext::patient).
  CollectiveContext local(CollectiveContext& ctx, uint32_t step, bool after_network = false) const {
    return CollectiveContext{*s_.local, step_tag_of(ctx, step), ctx.deadline, ctx.forced, &s_.local_placement,
                             after_network};
  }
  // Steps among hosts end before the operation's deadline: a rank stuck on
  // the network then fails first and tells the ranks of its host, which wait
  // for it in a step inside the host, why (the peer it lost) before they time
  // out themselves and could only name it. Its error is final only after it
  // listened for the other ranks' notices (stall_grace), so the steps end two
  // such graces early: one to listen, one for a rank of this host that
  // started the operation later than the one waiting for it. Never more than
  // a fifth of the timeout (a grace is at least 50 ms).
  static Deadline among_hosts(const Deadline& d) {
    return d.sooner(std::min(2 * stall_grace(d.timeout()), d.timeout() / 5));
  }
  CollectiveContext cross(CollectiveContext& ctx, uint32_t step, Decision decision = {}) const {
    return CollectiveContext{*s_.cross, step_tag_of(ctx, step), among_hosts(ctx.deadline), ctx.forced,
                             &s_.cross_placement, false, decision};
  }
  // The group's own connections, for messages between hosts' leaders.
  static CollectiveContext leaders(CollectiveContext& ctx) {
    return CollectiveContext{ctx.transport, ctx.tag, among_hosts(ctx.deadline), ctx.forced, ctx.placement};
  }
  static uint64_t step_tag_of(const CollectiveContext& ctx, uint32_t step) {
    return collective_tag(OpCode::HostStep, sequence_of(ctx.tag), static_cast<uint16_t>(step));
  }

  // n blocks of t's elements, the first count % n one element longer.
  static std::vector<Tensor> cut(const Tensor& t, int n) {
    std::vector<Tensor> blocks;
    const size_t count = static_cast<size_t>(t.numel()), base = count / n, extra = count % n;
    int64_t at = 0;
    for (int i = 0; i < n; ++i) {
      const size_t len = base + (static_cast<size_t>(i) < extra ? 1 : 0);
      blocks.push_back(t.slice(at, static_cast<int64_t>(len)));
      at += static_cast<int64_t>(len);
    }
    return blocks;
  }
  // n consecutive blocks shaped like `like` in `base`.
  static std::vector<Tensor> pieces(char* base, const Tensor& like, size_t n) {
    return blocks_of(Tensor(base, like.dtype(), {like.numel() * static_cast<int64_t>(n)}), static_cast<int>(n));
  }

  HostSplit s_;
  std::vector<int> host_of_;   // by group rank: its host, an index into s_.hosts
  std::vector<int> index_of_;  // by group rank: its place among its host's ranks
};

}  // namespace

std::unique_ptr<Engine> make_hierarchical_engine(HostSplit split) {
  return std::make_unique<HierarchicalEngine>(std::move(split));
}

}  // namespace tdist
