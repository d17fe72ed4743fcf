// The free functions of distributed.h in forked processes over a TCPStore:
// every collective on the default group with global and group-relative
// ranks, several new_groups at once (non-contiguous, interleaved with the
// default group, async works waited out of order), rank translation,
// non-members, invalid groups, destroying one group, batch_isend_irecv.
#include <dlpack/dlpack.h>

#include <algorithm>
#include <numeric>

#include "process_group/process_util.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

std::vector<int32_t> filled(size_t n, int32_t v) { return std::vector<int32_t>(n, v); }

void require_all(const std::vector<int32_t>& v, int32_t want, const std::string& what) {
  for (size_t i = 0; i < v.size(); ++i)
    require(v[i] == want, what + ": element " + std::to_string(i) + " is " + std::to_string(v[i]) + ", expected " +
                              std::to_string(want));
}

TEST(CollFreeFunctions, EveryCollectiveOnTheDefaultGroup) {
  run_world(4, [](int me) {
    const int n = tdist::get_world_size();
    require(tdist::is_initialized() && tdist::get_rank() == me && n == 4, "rank/world size");
    require(tdist::get_backend() == "tdist", "backend is " + tdist::get_backend());
    // nccl: where the build has CUDA and the NCCL library loads (no GPU needed), as torch.
    require(tdist::is_gloo_available() && tdist::is_nccl_available() == !tdist::nccl_version().empty(),
            "torch's availability checks");
    Group world = tdist::group_world();
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    require(tdist::get_process_group_ranks(world) == all && tdist::get_process_group_ranks(nullptr) == all, "ranks");

    for (int root = 0; root < n; ++root) {
      // reduce: global dst and group_dst name the same rank on the default group.
      for (bool relative : {false, true}) {
        auto v = filled(9, me + 1);
        tdist::reduce(v, relative ? group_dst(root) : PeerRank(root), ReduceOp::SUM);
        require_all(v, me == root ? n * (n + 1) / 2 : me + 1, "reduce to " + std::to_string(root));
      }
      // broadcast, async
      auto b = filled(5, me == root ? 42 + root : -1);
      auto w = tdist::broadcast(b, group_src(root), nullptr, /*async_op=*/true);
      w->wait();
      require_all(b, 42 + root, "broadcast");
      // gather: list only on dst
      std::vector<std::vector<int32_t>> outs;
      std::vector<Tensor> views;
      if (me == root) {
        outs.assign(n, filled(3, -1));
        views.assign(outs.begin(), outs.end());
      }
      auto g = filled(3, me * 10 + root);
      tdist::gather(g, views, root);
      for (int r = 0; r < static_cast<int>(outs.size()); ++r) require_all(outs[r], r * 10 + root, "gather");
      // scatter: list only on src
      std::vector<std::vector<int32_t>> ins;
      std::vector<Tensor> in_views;
      if (me == root) {
        for (int r = 0; r < n; ++r) ins.push_back(filled(4, r * 100 + root));
        in_views.assign(ins.begin(), ins.end());
      }
      auto s = filled(4, -1);
      tdist::scatter(s, in_views, group_src(root));
      require_all(s, me * 100 + root, "scatter");
    }
    // all_gather, uneven
    std::vector<std::vector<int32_t>> ag(n);
    for (int r = 0; r < n; ++r) ag[r] = filled(r + 1, -1);
    auto mine = filled(me + 1, me);
    tdist::all_gather(std::vector<Tensor>(ag.begin(), ag.end()), mine);
    for (int r = 0; r < n; ++r) require_all(ag[r], r, "all_gather");
    // all_gather_into_tensor
    std::vector<int32_t> cat(2 * n, -1), two = filled(2, me);
    tdist::all_gather_into_tensor(cat, two);
    for (int i = 0; i < 2 * n; ++i) require(cat[i] == i / 2, "all_gather_into_tensor");
    // reduce_scatter and reduce_scatter_tensor
    std::vector<std::vector<int32_t>> rs_in;
    for (int r = 0; r < n; ++r) rs_in.push_back(filled(r + 2, me + r));
    auto rs_out = filled(me + 2, -1);
    tdist::reduce_scatter(rs_out, std::vector<Tensor>(rs_in.begin(), rs_in.end()), ReduceOp::MAX);
    require_all(rs_out, n - 1 + me, "reduce_scatter MAX");
    std::vector<int32_t> rst_in(3 * n);
    for (int i = 0; i < 3 * n; ++i) rst_in[i] = i / 3 + me;
    auto rst_out = filled(3, -1);
    tdist::reduce_scatter_tensor(rst_out, rst_in, ReduceOp::SUM);
    require_all(rst_out, n * me + n * (n - 1) / 2, "reduce_scatter_tensor");
    // all_to_all and all_to_all_single with uneven splits
    std::vector<std::vector<int32_t>> a_in, a_out;
    for (int q = 0; q < n; ++q) {
      a_in.push_back(filled(me + q + 1, me * 10 + q));
      a_out.push_back(filled(q + me + 1, -1));
    }
    tdist::all_to_all(std::vector<Tensor>(a_out.begin(), a_out.end()), std::vector<Tensor>(a_in.begin(), a_in.end()));
    for (int q = 0; q < n; ++q) require_all(a_out[q], q * 10 + me, "all_to_all");
    std::vector<int64_t> in_splits, out_splits;
    std::vector<int32_t> single_in, single_out;
    for (int q = 0; q < n; ++q) {
      in_splits.push_back(me + q);
      out_splits.push_back(q + me);
      for (int i = 0; i < me + q; ++i) single_in.push_back(me * 10 + q);
    }
    single_out.assign(single_in.size(), -1);
    auto w = tdist::all_to_all_single(single_out, single_in, out_splits, in_splits, nullptr, /*async_op=*/true);
    w->wait();
    size_t at = 0;
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < q + me; ++i) require(single_out[at++] == q * 10 + me, "all_to_all_single");
    tdist::barrier();
    tdist::monitored_barrier(nullptr, milliseconds(20000), true);
  });
}

// Groups {0,2,3} and {1,3} of a world of 4, used at once and interleaved with
// the default group; async works waited in reverse order.
TEST(CollFreeFunctions, SeveralGroupsInterleavedWithTheDefaultGroup) {
  run_world(4, [](int me) {
    Group g1 = tdist::new_group({3, 0, 2});  // any order: group ranks follow the sorted list
    Group g2 = tdist::new_group({1, 3});
    const bool in1 = me != 1, in2 = me == 1 || me == 3;

    // Rank translation.
    require(tdist::get_process_group_ranks(g1) == std::vector<int>({0, 2, 3}), "g1 ranks");
    require(tdist::get_process_group_ranks(g2) == std::vector<int>({1, 3}), "g2 ranks");
    require(tdist::get_group_rank(g1, 0) == 0 && tdist::get_group_rank(g1, 2) == 1 && tdist::get_group_rank(g1, 3) == 2,
            "get_group_rank g1");
    require(tdist::get_global_rank(g1, 1) == 2 && tdist::get_global_rank(g2, 0) == 1 && tdist::get_global_rank(g2, 1) == 3,
            "get_global_rank");
    value_error_of([&] { tdist::get_group_rank(g1, 1); }, "get_group_rank of a non-member");
    value_error_of([&] { tdist::get_global_rank(g2, 2); }, "get_global_rank outside the group");
    require(tdist::get_rank(g1) == (in1 ? tdist::get_group_rank(g1, me) : -1), "get_rank(g1)");
    require(tdist::get_world_size(g1) == (in1 ? 3 : -1), "get_world_size(g1)");
    require(tdist::get_rank(g2) == (in2 ? (me == 1 ? 0 : 1) : -1), "get_rank(g2)");
    require(tdist::get_world_size(g2) == (in2 ? 2 : -1), "get_world_size(g2)");

    // Non-members: every call is a no-op that leaves the tensors alone.
    if (!in1) {
      auto v = filled(4, 7);
      require(tdist::all_reduce(v, ReduceOp::SUM, g1)->is_completed(), "non-member work is complete");
      tdist::broadcast(v, 0, g1);
      tdist::reduce(v, 0, ReduceOp::SUM, g1);
      std::vector<std::vector<int32_t>> outs(3, filled(4, 1));
      tdist::all_gather(std::vector<Tensor>(outs.begin(), outs.end()), v, g1);
      tdist::barrier(g1);
      tdist::monitored_barrier(g1, milliseconds(100));
      std::vector<std::string> objs{"x"};
      tdist::broadcast_object_list(objs, 0, g1);
      require_all(v, 7, "non-member tensor");
      require(objs[0] == "x", "non-member object list");
      for (auto& o : outs) require_all(o, 1, "non-member outputs");
    }

    // Issue a mix of async operations on three groups, then wait in reverse.
    std::vector<std::shared_ptr<Work>> works;
    auto d1 = filled(6, me + 1), d2 = filled(6, me);
    auto a1 = filled(5, me + 1), r1 = filled(5, me + 1), b1 = filled(3, me == 2 ? 77 : -1);
    auto a2 = filled(7, me + 1), b2 = filled(2, me == 3 ? 55 : -1), s2 = filled(2, -1);
    std::vector<std::vector<int32_t>> s2_list;
    std::vector<Tensor> s2_views;
    works.push_back(tdist::all_reduce(d1, ReduceOp::SUM, nullptr, true));
    if (in1) {
      works.push_back(tdist::all_reduce(a1, ReduceOp::SUM, g1, true));
      works.push_back(tdist::reduce(r1, group_dst(2), ReduceOp::PRODUCT, g1, true));  // global 3
      works.push_back(tdist::broadcast(b1, 2, g1, true));                              // global 2 = group 1
    }
    if (in2) {
      works.push_back(tdist::all_reduce(a2, ReduceOp::MAX, g2, true));
      works.push_back(tdist::broadcast(b2, group_src(1), g2, true));  // global 3
      if (me == 3) {
        s2_list = {filled(2, 1001), filled(2, 1003)};
        s2_views.assign(s2_list.begin(), s2_list.end());
      }
      works.push_back(tdist::scatter(s2, s2_views, 3, g2, true));
    }
    works.push_back(tdist::all_reduce(d2, ReduceOp::MAX, nullptr, true));
    for (size_t k = works.size(); k-- > 0;) works[k]->wait();
    require_all(d1, 10, "default all_reduce");
    require_all(d2, 3, "default all_reduce MAX");
    if (in1) {
      require_all(a1, 1 + 3 + 4, "g1 all_reduce");
      require_all(r1, me == 3 ? 1 * 3 * 4 : me + 1, "g1 reduce to group_dst(2)");
      require_all(b1, 77, "g1 broadcast from global 2");
    }
    if (in2) {
      require_all(a2, 4, "g2 all_reduce MAX");
      require_all(b2, 55, "g2 broadcast from group_src(1)");
      require_all(s2, 1000 + me, "g2 scatter from global 3");
    }

    // Group-relative and global ranks in gather, all_gather_into_tensor and p2p.
    if (in1) {
      std::vector<std::vector<int32_t>> outs;
      std::vector<Tensor> views;
      if (me == 2) {
        outs.assign(3, filled(2, -1));
        views.assign(outs.begin(), outs.end());
      }
      auto mine = filled(2, me);
      tdist::gather(mine, views, group_dst(1), g1);  // global 2
      if (me == 2) {
        require_all(outs[0], 0, "g1 gather block 0");
        require_all(outs[1], 2, "g1 gather block 1");
        require_all(outs[2], 3, "g1 gather block 2");
      }
      std::vector<int32_t> cat(3, -1), one{me};
      tdist::all_gather_into_tensor(cat, one, g1);
      require(cat == std::vector<int32_t>({0, 2, 3}), "g1 all_gather_into_tensor");
    }
    if (in2) {
      auto t = filled(3, me);
      if (me == 1) {
        tdist::send(t, 3, g2, 11);                 // global dst
        tdist::send(t, group_dst(1), g2, 12);      // group dst
        int from = tdist::recv(t, kAnyPeer, g2, 13);
        require(from == 3, "recv from any in g2 returned " + std::to_string(from) + ", expected global 3");
        require_all(t, 3, "g2 p2p data");
      } else {
        auto u = filled(3, -1);
        require(tdist::recv(u, 1, g2, 11) == 1, "recv with global src returns the global rank");
        require_all(u, 1, "g2 p2p");
        require(tdist::recv(u, group_src(0), g2, 12) == 1, "recv with group src returns the global rank");
        tdist::send(t, group_dst(0), g2, 13);
      }
    }

    // Invalid groups are value errors on every rank and change nothing.
    std::string m = value_error_of([&] { tdist::new_group({0, 4}); }, "new_group with rank 4");
    require(has(m, "4"), "message does not name rank 4: " + m);
    value_error_of([&] { tdist::new_group({1, 1}); }, "new_group with a duplicate");
    value_error_of([&] { tdist::new_group({-1, 2}); }, "new_group with rank -1");
    if (in1) value_error_of([&] { tdist::broadcast(d1, 1, g1); }, "broadcast on g1 from the non-member global 1");
    Group g3 = tdist::new_group({0, 1});
    if (me <= 1) {
      auto v = filled(2, me + 5);
      tdist::all_reduce(v, ReduceOp::SUM, g3);
      require_all(v, 11, "g3 after invalid new_group calls");
    }

    // Destroying g1 leaves g2, g3 and the default group working; g1 itself fails fast.
    tdist::destroy_process_group(g1);
    if (in1) {
      auto w = filled(2, 1);
      bool failed = false;
      try {
        tdist::all_reduce(w, ReduceOp::SUM, g1);
      } catch (const DistError& e) {
        failed = has(e.what(), "destroyed");
        if (!failed) throw;
      }
      require(failed, "all_reduce on a destroyed group succeeded");
    }
    if (in2) {
      auto v = filled(3, me);
      tdist::all_reduce(v, ReduceOp::SUM, g2);
      require_all(v, 4, "g2 after destroying g1");
    }
    auto v = filled(3, 1);
    tdist::all_reduce(v);
    require_all(v, 4, "default group after destroying g1");
    tdist::barrier();
  });
}

// A blocking call's Work is reused for a later blocking call once its caller
// dropped it (no allocation per call); one that the caller keeps goes on
// describing its own operation, and async works are never shared.
TEST(CollFreeFunctions, BlockingWorksAreReusedOnlyOnceDropped) {
  run_world(2, [](int me) {
    auto a = filled(4, me + 1), b = filled(3, me == 0 ? 7 : -1);
    auto kept = tdist::all_reduce(a);
    auto next = tdist::broadcast(b, 0);
    require(kept != next, "a Work the caller holds was handed out again");
    require(kept->op_name() == "all_reduce" && next->op_name() == "broadcast", "op names");
    require(kept->sequence_number() < next->sequence_number(), "sequence numbers");
    require(kept->result().size() == 1 && kept->result()[0].data() == a.data(), "kept result");
    require(next->result().size() == 1 && next->result()[0].data() == b.data(), "next result");
    require(kept->is_success() && next->is_success(), "both complete");
    require_all(a, 3, "all_reduce");
    require_all(b, 7, "broadcast");

    const Work* dropped = tdist::all_reduce(a).get();
    auto again = tdist::broadcast(b, 0);
    require(again.get() == dropped, "a dropped blocking Work was not reused");
    require(again->op_name() == "broadcast" && again->result()[0].data() == b.data() && again->is_success() &&
                !again->exception(),
            "a reused Work describes its new operation");
    auto async = tdist::all_reduce(b, ReduceOp::SUM, nullptr, /*async_op=*/true);
    require(async != again, "an async Work is its own");
    async->wait();
    require_all(b, 14, "async all_reduce");
    require(kept->op_name() == "all_reduce" && kept->result()[0].data() == a.data(), "kept Work unchanged");

    // The same memory seen with another shape: the reused Work shows the new one.
    again.reset();
    auto reshaped = tdist::broadcast(tdist::Tensor(b.data(), DType::Int32, {3, 1}), 0);
    require(reshaped.get() == dropped && reshaped->result()[0].shape() == std::vector<int64_t>{3, 1},
            "a reused Work shows its new tensor's shape");
  });
}

// A blocking call on a tensor that owns its memory (adopted from DLPack) does
// not leave it alive in a Work kept for reuse: dropping the tensor frees it.
TEST(CollFreeFunctions, BlockingCallsKeepNoAdoptedTensorAlive) {
  run_world(2, [](int me) {
    struct Owned {
      DLManagedTensor managed{};
      std::vector<float> data = std::vector<float>(4, 1.0f);
      int64_t shape = 4;
      bool* freed;
    };
    bool freed = false;
    auto* owned = new Owned;
    owned->freed = &freed;
    DLTensor& t = owned->managed.dl_tensor;
    t.data = owned->data.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = &owned->shape;
    owned->managed.manager_ctx = owned;
    owned->managed.deleter = [](DLManagedTensor* self) {
      auto* o = static_cast<Owned*>(self->manager_ctx);
      *o->freed = true;
      delete o;
    };
    // A blocking call first, so that the group has a Work to reuse: the
    // adopted tensor's call must not be the one that reuses it.
    auto warm = filled(2, me);
    tdist::all_reduce(warm);
    {
      Tensor adopted = Tensor::from_dlpack(&owned->managed);
      tdist::all_reduce(adopted);  // blocking; the Work is dropped at once
      require(adopted.data_as<float>()[3] == 2.0f, "all_reduce of the adopted tensor");
    }
    require(freed, "a blocking call kept the adopted tensor alive after the caller dropped it");
    auto v = filled(2, me);
    tdist::all_reduce(v);  // the group goes on as before
    require_all(v, 1, "all_reduce after");
  });
}

// Every rank lists its send before its receive: must not deadlock, even with
// messages far larger than socket buffers; tags keep the two directions apart.
TEST(CollFreeFunctions, BatchIsendIrecvRingWithTags) {
  run_world(4, [](int me) {
    const int n = tdist::get_world_size();
    const int right = (me + 1) % n, left = (me - 1 + n) % n;
    const size_t big = 1 << 20;  // 4 MiB of floats
    std::vector<float> to_right(big, static_cast<float>(me)), from_left(big, -1.0f);
    std::vector<int64_t> to_left(3, me * 10), from_right(3, -1);
    std::vector<P2POp> ops;
    ops.emplace_back(P2POp::ISEND, Tensor(to_right), right, nullptr, 7);
    ops.emplace_back(P2POp::ISEND, Tensor(to_left), left, nullptr, 9);
    ops.emplace_back(P2POp::IRECV, Tensor(from_right), right, nullptr, 9);
    ops.emplace_back(P2POp::IRECV, Tensor(from_left), left, nullptr, 7);
    auto works = tdist::batch_isend_irecv(ops);
    require(works.size() == 4, "one work per op");
    for (size_t k = works.size(); k-- > 0;) works[k]->wait();
    for (float x : from_left) require(x == static_cast<float>(left), "ring data from the left");
    for (int64_t x : from_right) require(x == right * 10, "ring data from the right (tag 9)");
    // The same in a subgroup, with group-relative peers.
    Group g = tdist::new_group({1, 2, 3});
    if (me != 0) {
      int gr = tdist::get_rank(g), gn = tdist::get_world_size(g);
      std::vector<int32_t> out(1000, me), in(1000, -1);
      std::vector<P2POp> sub;
      sub.emplace_back(P2POp::ISEND, Tensor(out), group_peer((gr + 1) % gn), g, 3);
      sub.emplace_back(P2POp::IRECV, Tensor(in), group_peer((gr - 1 + gn) % gn), g, 3);
      for (auto& w : tdist::batch_isend_irecv(sub)) w->wait();
      int expect_from = tdist::get_global_rank(g, (gr - 1 + gn) % gn);
      require_all(in, expect_from, "subgroup ring");
    }
    tdist::barrier();
  });
}

}  // namespace
}  // namespace tdist::testing
