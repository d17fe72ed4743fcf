// Every algorithm of every collective, called directly (no backend, no
// selector) over the in-memory transport, with messages delivered in a random
// order where the Transport contract allows it and delayed at random: world
// sizes 1..8, every root, sizes 1, odd, uneven and larger (0 through the selector), results compared
// bit for bit with a rank-order reduction computed locally. Then the
// selector's own picks on emulated hosts, and a lost message: every rank ends,
// by its deadline, and the ones that fail name the peer.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "algorithms/collective.h"
#include "shm_engine/host_segment_util.h"
#include "transport/memory_transport.h"

namespace tdist::testing {
namespace {

using namespace tdist::algorithms;

using std::chrono::milliseconds;

// A group of one never reaches the algorithms (the collectives return at
// once), and a transport refuses a message to oneself.
const std::vector<int> kWorldSizes = {2, 3, 4, 5, 8};

// Runs body on every rank of a fabric of n, each with a context for `code`.
void on_fabric(int n, FabricFaults faults, OpCode code, const std::function<void(CollectiveContext&)>& body,
               milliseconds timeout = std::chrono::seconds(60)) {
  MemoryFabric fabric(n, faults);
  std::vector<std::unique_ptr<Transport>> ends;
  for (int r = 0; r < n; ++r) ends.push_back(fabric.endpoint(r));
  run_in_threads(n, [&](int r) {
    CollectiveContext ctx{*ends[r], collective_tag(code, 1), Deadline::after(timeout)};
    body(ctx);
  });
}

// Reordered and delayed, differently for each call.
FabricFaults shuffled(unsigned seed) {
  FabricFaults f;
  f.seed = seed;
  f.reorder = true;
  f.max_delay = std::chrono::microseconds(seed % 3 == 0 ? 200 : 0);
  return f;
}

// Empty tensors never reach an algorithm either (the collectives skip them):
// they are tested through the selector's entry points below.
std::vector<size_t> counts(int n) { return {1, 7, 13 * static_cast<size_t>(n) + 1, 1000}; }

std::string where(const char* algo, int n, size_t count, int rank) {
  return std::string(algo) + ", " + std::to_string(n) + " ranks, " + std::to_string(count) + " elements, rank " +
         std::to_string(rank);
}

// Elements [at, at + count) of b as a buffer of their own.
Buffer part(DType dt, const Buffer& b, size_t at, size_t count) {
  Buffer out(dt, count);
  if (count)
    std::memcpy(out.data(), static_cast<const char*>(const_cast<Buffer&>(b).data()) + at * dtype_size(dt),
                count * dtype_size(dt));
  return out;
}

// The fabric itself: with reordering on, a message sent later by another
// rank may arrive first (else these tests would prove less than they say),
// while one sender's messages under one tag keep their order.
TEST(AlgorithmsAlone, TheFabricReordersOnlyWhatTransportAllows) {
  int overtaken = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    MemoryFabric fabric(3, shuffled(seed));
    auto a = fabric.endpoint(0), b = fabric.endpoint(1), c = fabric.endpoint(2);
    const Deadline deadline = Deadline::after(std::chrono::seconds(30));
    int first[5] = {10, 11, 12, 13, 14}, second = 2;
    std::vector<std::shared_ptr<Request>> sends;
    for (int i = 0; i < 5; ++i) sends.push_back(a->isend(1, 7, &first[i], sizeof(int)));  // rank 0 sends first
    sends.push_back(c->isend(1, 7, &second, sizeof(second)));
    std::vector<int> got(6, 0), from(6, -1);
    for (int i = 0; i < 6; ++i) {
      auto r = b->irecv(kAnySender, 7, &got[i], sizeof(int));
      b->wait(*r, deadline);
      from[i] = r->source();
    }
    for (auto& s : sends) a->wait(*s, deadline);
    if (from[0] == 2) ++overtaken;
    std::vector<int> from_zero;
    for (int i = 0; i < 6; ++i)
      if (from[i] == 0) from_zero.push_back(got[i]);
    EXPECT_EQ(from_zero, std::vector<int>({10, 11, 12, 13, 14})) << "seed " << seed << ": one tag's order changed";
  }
  EXPECT_GT(overtaken, 0) << "in 20 shuffled runs, rank 2's message never overtook rank 0's";
}

using ReduceAlgorithm = void (*)(CollectiveContext&, const Tensor&, ReduceOp);

TEST(AlgorithmsAlone, AllReduce) {
  const std::pair<const char*, ReduceAlgorithm> algos[] = {
      {"recursive_doubling", all_reduce_recursive_doubling},
      {"rabenseifner", all_reduce_rabenseifner},
      {"ring", all_reduce_ring},
  };
  unsigned seed = 0;
  for (int n : kWorldSizes)
    for (auto [name, run] : algos)
      for (DType dt : {DType::Int32, DType::Float32, DType::BFloat16})
        for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX, ReduceOp::PRODUCT})
          for (size_t count : counts(n))
            on_fabric(n, shuffled(++seed), OpCode::AllReduce, [&](CollectiveContext& ctx) {
              Buffer b = rank_buffer(dt, count, ctx.rank());
              run(ctx, b.tensor(), op);
              EXPECT_EQ(compare_exact(b, expected_reduction(dt, op, count, n)), "")
                  << where(name, n, count, ctx.rank()) << ", " << dtype_name(dt) << " " << op.name();
            });
}

TEST(AlgorithmsAlone, Reduce) {
  using Fn = void (*)(CollectiveContext&, const Tensor&, int, ReduceOp);
  const std::pair<const char*, Fn> algos[] = {
      {"binomial", reduce_binomial_tree}, {"rabenseifner", reduce_rabenseifner}, {"chain", reduce_chain}};
  unsigned seed = 100;
  for (int n : kWorldSizes)
    for (auto [name, run] : algos)
      for (int root = 0; root < n; ++root)
        for (size_t count : counts(n))
          on_fabric(n, shuffled(++seed), OpCode::Reduce, [&](CollectiveContext& ctx) {
            const DType dt = DType::Int64;
            Buffer b = rank_buffer(dt, count, ctx.rank());
            run(ctx, b.tensor(), root, ReduceOp::SUM);
            if (ctx.rank() == root) {
              EXPECT_EQ(compare_exact(b, expected_reduction(dt, ReduceOp::SUM, count, n)), "")
                  << where(name, n, count, ctx.rank()) << ", root " << root;
            }
          });
}

TEST(AlgorithmsAlone, Broadcast) {
  using Fn = void (*)(CollectiveContext&, const Tensor&, int);
  const std::pair<const char*, Fn> algos[] = {
      {"binomial", broadcast_binomial}, {"scatter_allgather", broadcast_scatter_allgather}, {"chain", broadcast_chain}};
  unsigned seed = 200;
  for (int n : kWorldSizes)
    for (auto [name, run] : algos)
      for (int root = 0; root < n; ++root)
        for (size_t count : counts(n))
          on_fabric(n, shuffled(++seed), OpCode::Broadcast, [&](CollectiveContext& ctx) {
            const DType dt = DType::Float64;
            Buffer b = ctx.rank() == root ? rank_buffer(dt, count, root) : Buffer(dt, count);
            run(ctx, b.tensor(), root);
            EXPECT_EQ(compare_exact(b, rank_buffer(dt, count, root)), "")
                << where(name, n, count, ctx.rank()) << ", root " << root;
          });
}

TEST(AlgorithmsAlone, AllGatherEvenAndUneven) {
  using Fn = void (*)(CollectiveContext&, const std::vector<Tensor>&, const Tensor&);
  const std::pair<const char*, Fn> algos[] = {{"ring", all_gather_ring}, {"bruck", all_gather_bruck}};
  unsigned seed = 300;
  for (int n : kWorldSizes)
    for (auto [name, run] : algos)
      for (bool uneven : {false, true})
        for (size_t count : counts(n))
          on_fabric(n, shuffled(++seed), OpCode::AllGather, [&](CollectiveContext& ctx) {
            const DType dt = DType::Int16;
            auto size_of = [&](int r) { return uneven ? count + static_cast<size_t>(r) : count; };
            Buffer in = rank_buffer(dt, size_of(ctx.rank()), ctx.rank());
            std::vector<Buffer> outs;
            std::vector<Tensor> views;
            for (int r = 0; r < n; ++r) outs.emplace_back(dt, size_of(r));
            for (auto& o : outs) views.push_back(o.tensor());
            run(ctx, views, in.tensor());
            for (int r = 0; r < n; ++r)
              EXPECT_EQ(compare_exact(outs[r], rank_buffer(dt, size_of(r), r)), "")
                  << where(name, n, count, ctx.rank()) << ", block of rank " << r << (uneven ? ", uneven" : "");
          });
}

TEST(AlgorithmsAlone, GatherAndScatter) {
  using GatherFn = void (*)(CollectiveContext&, const std::vector<Tensor>&, const Tensor&, int);
  using ScatterFn = void (*)(CollectiveContext&, const Tensor&, const std::vector<Tensor>&, int);
  const std::tuple<const char*, GatherFn, ScatterFn> algos[] = {
      {"linear", gather_linear, scatter_linear}, {"binomial", gather_binomial, scatter_binomial}};
  unsigned seed = 400;
  const DType dt = DType::UInt8;
  for (int n : kWorldSizes)
    for (auto [name, gather_run, scatter_run] : algos)
      for (int root = 0; root < n; ++root)
        for (size_t count : counts(n)) {
          on_fabric(n, shuffled(++seed), OpCode::Gather, [&](CollectiveContext& ctx) {
            Buffer in = rank_buffer(dt, count, ctx.rank());
            std::vector<Buffer> outs;
            std::vector<Tensor> views;
            if (ctx.rank() == root)
              for (int r = 0; r < n; ++r) outs.emplace_back(dt, count);
            for (auto& o : outs) views.push_back(o.tensor());
            gather_run(ctx, views, in.tensor(), root);
            for (size_t r = 0; r < outs.size(); ++r)
              EXPECT_EQ(compare_exact(outs[r], rank_buffer(dt, count, static_cast<int>(r))), "")
                  << where(name, n, count, ctx.rank()) << ", gather root " << root << ", block " << r;
          });
          on_fabric(n, shuffled(++seed), OpCode::Scatter, [&](CollectiveContext& ctx) {
            std::vector<Buffer> ins;
            std::vector<Tensor> views;
            if (ctx.rank() == root)
              for (int r = 0; r < n; ++r) ins.push_back(rank_buffer(dt, count, r + 10));
            for (auto& i : ins) views.push_back(i.tensor());
            Buffer out(dt, count);
            scatter_run(ctx, out.tensor(), views, root);
            EXPECT_EQ(compare_exact(out, rank_buffer(dt, count, ctx.rank() + 10)), "")
                << where(name, n, count, ctx.rank()) << ", scatter root " << root;
          });
        }
}

TEST(AlgorithmsAlone, ReduceScatterEvenAndUneven) {
  using Fn = void (*)(CollectiveContext&, const Tensor&, const std::vector<Tensor>&, ReduceOp);
  const std::pair<const char*, Fn> algos[] = {{"ring", reduce_scatter_ring},
                                              {"recursive_halving", reduce_scatter_recursive_halving}};
  unsigned seed = 500;
  const DType dt = DType::Float32;
  for (int n : kWorldSizes)
    for (auto [name, run] : algos)
      for (bool uneven : {false, true})
        for (size_t count : counts(n))
          on_fabric(n, shuffled(++seed), OpCode::ReduceScatter, [&](CollectiveContext& ctx) {
            auto size_of = [&](int r) { return uneven ? count + static_cast<size_t>(2 * r) : count; };
            size_t total = 0;
            for (int r = 0; r < n; ++r) total += size_of(r);
            Buffer all = rank_buffer(dt, total, ctx.rank());
            std::vector<Tensor> inputs;
            size_t at = 0;
            for (int r = 0; r < n; ++r) {
              inputs.push_back(all.tensor().slice(static_cast<int64_t>(at), static_cast<int64_t>(size_of(r))));
              at += size_of(r);
            }
            Buffer out(dt, size_of(ctx.rank()));
            run(ctx, out.tensor(), inputs, ReduceOp::SUM);
            size_t mine = 0;
            for (int r = 0; r < ctx.rank(); ++r) mine += size_of(r);
            Buffer want = part(dt, expected_reduction(dt, ReduceOp::SUM, total, n), mine, size_of(ctx.rank()));
            EXPECT_EQ(compare_exact(out, want), "") << where(name, n, count, ctx.rank()) << (uneven ? ", uneven" : "");
          });
}

TEST(AlgorithmsAlone, AllToAll) {
  using Fn = void (*)(CollectiveContext&, const std::vector<Tensor>&, const std::vector<Tensor>&);
  const std::pair<const char*, Fn> algos[] = {
      {"pairwise", all_to_all_pairwise}, {"bruck", all_to_all_bruck}, {"linear", all_to_all_linear}};
  unsigned seed = 600;
  const DType dt = DType::Int32;
  for (int n : kWorldSizes)
    for (auto [name, run] : algos)
      for (bool uneven : {false, true}) {
        if (uneven && std::string(name) == "bruck") continue;  // bruck needs one block size
        for (size_t count : counts(n))
          on_fabric(n, shuffled(++seed), OpCode::AllToAll, [&](CollectiveContext& ctx) {
            // Rank s sends to rank d a block of size_of(s, d) elements, valued by (s, d).
            auto size_of = [&](int s, int d) { return uneven ? count + static_cast<size_t>((s + 2 * d) % 3) : count; };
            auto block = [&](int s, int d) { return rank_buffer(dt, size_of(s, d), 10 * s + d); };
            std::vector<Buffer> ins, outs;
            std::vector<Tensor> in_views, out_views;
            for (int d = 0; d < n; ++d) ins.push_back(block(ctx.rank(), d));
            for (int s = 0; s < n; ++s) outs.emplace_back(dt, size_of(s, ctx.rank()));
            for (auto& b : ins) in_views.push_back(b.tensor());
            for (auto& b : outs) out_views.push_back(b.tensor());
            run(ctx, out_views, in_views);
            for (int s = 0; s < n; ++s)
              EXPECT_EQ(compare_exact(outs[s], block(s, ctx.rank())), "")
                  << where(name, n, count, ctx.rank()) << ", from rank " << s << (uneven ? ", uneven" : "");
          });
      }
}

// The selector's picks where the ranks are spread over emulated hosts (it
// weighs copies and links differently there): every collective's automatic
// choice, for hosts x ranks per host, still gives the right answer.
TEST(AlgorithmsAlone, TheSelectorsPicksOnSeveralHosts) {
  unsigned seed = 700;
  for (auto [hosts, per_host] : {std::pair{2, 2}, std::pair{2, 3}, std::pair{4, 2}, std::pair{3, 1}})
    for (size_t count : {size_t{0}, size_t{1}, size_t{4099}, size_t{300000}}) {
      const int n = hosts * per_host;
      FabricFaults f = shuffled(++seed);
      f.ranks_per_host = per_host;
      on_fabric(n, f, OpCode::AllReduce, [&](CollectiveContext& ctx) {
        Buffer b = rank_buffer(DType::Float32, count, ctx.rank());
        all_reduce(ctx, b.tensor(), ReduceOp::SUM);
        EXPECT_EQ(compare_exact(b, expected_reduction(DType::Float32, ReduceOp::SUM, count, n)), "")
            << hosts << " hosts x " << per_host << ", " << count << " elements, rank " << ctx.rank();
      });
      on_fabric(n, f, OpCode::Broadcast, [&](CollectiveContext& ctx) {
        Buffer b = ctx.rank() == n - 1 ? rank_buffer(DType::Int8, count, 3) : Buffer(DType::Int8, count);
        broadcast(ctx, b.tensor(), n - 1);
        EXPECT_EQ(compare_exact(b, rank_buffer(DType::Int8, count, 3)), "")
            << hosts << " hosts x " << per_host << ", " << count << " elements, rank " << ctx.rank();
      });
    }
}

// A message lost on the way (its send fails): every rank ends by its
// deadline, none with a wrong result, and a rank that fails names a peer.
TEST(AlgorithmsAlone, ALostMessageEndsEveryRankByItsDeadline) {
  const int n = 4;
  const size_t count = 1000;
  long total = 0;
  on_fabric(n, {}, OpCode::AllReduce, [&](CollectiveContext& ctx) {
    Buffer b = rank_buffer(DType::Int32, count, ctx.rank());
    all_reduce_ring(ctx, b.tensor(), ReduceOp::SUM);
  });
  {
    MemoryFabric probe(n);
    std::vector<std::unique_ptr<Transport>> ends;
    for (int r = 0; r < n; ++r) ends.push_back(probe.endpoint(r));
    run_in_threads(n, [&](int r) {
      CollectiveContext ctx{*ends[r], collective_tag(OpCode::AllReduce, 1), Deadline::after(std::chrono::seconds(60))};
      Buffer b = rank_buffer(DType::Int32, count, r);
      all_reduce_ring(ctx, b.tensor(), ReduceOp::SUM);
    });
    total = probe.messages_sent();
  }
  ASSERT_GT(total, 0);
  for (long k : {0L, total / 2, total - 1}) {
    FabricFaults f;
    f.lose_message = k;
    std::vector<std::string> errors(n);
    const auto start = std::chrono::steady_clock::now();
    on_fabric(
        n, f, OpCode::AllReduce,
        [&](CollectiveContext& ctx) {
          Buffer b = rank_buffer(DType::Int32, count, ctx.rank());
          try {
            all_reduce_ring(ctx, b.tensor(), ReduceOp::SUM);
            EXPECT_EQ(compare_exact(b, expected_reduction(DType::Int32, ReduceOp::SUM, count, n)), "")
                << "rank " << ctx.rank() << " completed with a wrong result, message " << k << " lost";
          } catch (const DistError& e) {
            errors[ctx.rank()] = e.what();
          }
        },
        milliseconds(300));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
    int failed = 0;
    for (int r = 0; r < n; ++r)
      if (!errors[r].empty()) {
        ++failed;
        EXPECT_NE(errors[r].find("rank "), std::string::npos) << errors[r];
      }
    EXPECT_GT(failed, 0) << "message " << k << " of " << total << " was lost and every rank completed";
  }
}

}  // namespace
}  // namespace tdist::testing
