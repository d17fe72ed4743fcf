// all_gather_coalesced, ranks as threads: every world size and dtype, lists
// of empty, one-element, odd and large inputs (of mixed dtypes too), async
// and blocking, one Work for the list; its flight recorder entry; the front's
// value errors before anything is sent. The operation is issued through
// ProcessGroup::issue with its descriptor, as the free function and the
// PyTorch plugin do, and runs as the Backend's composite of all_gathers.
#include <vector>

#include "process_group/coll_util.h"
#include "tdist/trace.h"

namespace tdist::testing {
namespace {

// Element e of input k of rank r: salted by k so that an input landing in
// another's place shows.
long gathered(int r, size_t k, size_t e) { return move_value(r, static_cast<int>(k), e); }

// Gathers inputs of `counts` elements (input k of dtype dtypes[k]) and checks
// every output against what each rank sent.
void check_all_gather_coalesced(ProcessGroup& pg, const std::vector<DType>& dtypes, const std::vector<size_t>& counts,
                                bool async_op) {
  const int n = pg.size(), me = pg.rank();
  const size_t inputs = counts.size();
  std::vector<Buffer> in_bufs, out_bufs;
  in_bufs.reserve(inputs);
  out_bufs.reserve(inputs * n);
  std::vector<Tensor> ins, outs;
  for (size_t k = 0; k < inputs; ++k) {
    in_bufs.emplace_back(dtypes[k], counts[k], [&](size_t e) { return gathered(me, k, e); });
    ins.push_back(in_bufs.back().tensor());
  }
  // The descriptor's order: input k of rank r at k * n + r.
  for (size_t k = 0; k < inputs; ++k)
    for (int r = 0; r < n; ++r) {
      out_bufs.emplace_back(dtypes[k], counts[k], [](size_t) { return 0; });
      outs.push_back(out_bufs.back().tensor());
    }
  auto work = pg.issue({.kind = OpKind::AllGatherCoalesced, .inputs = ins, .outputs = outs, .async_op = async_op});
  work->wait();
  const std::string what = describe("all_gather_coalesced", dtypes[0], counts[0], n,
                                    std::to_string(inputs) + " inputs" + (async_op ? " async" : ""));
  require(work->is_completed() && work->is_success(), what + ": not successful after wait");
  require(work->op_name() == "all_gather_coalesced", what + ": op name " + work->op_name());
  require(work->result().size() == outs.size(), what + ": result() does not list every output");
  for (size_t k = 0; k < inputs; ++k)
    for (int r = 0; r < n; ++r) {
      Buffer want(dtypes[k], counts[k], [&](size_t e) { return gathered(r, k, e); });
      require_same(out_bufs[k * n + r], want,
                   what + ": input " + std::to_string(k) + " of rank " + std::to_string(r));
    }
}

class AllGatherCoalesced : public ::testing::TestWithParam<int> {};

TEST_P(AllGatherCoalesced, EveryDtypeSmallSizes) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    bool async_op = false;
    for (DType dtype : all_dtypes()) {
      check_all_gather_coalesced(pg, {dtype, dtype, dtype, dtype}, {7, 0, 1, 129}, async_op = !async_op);
      check_all_gather_coalesced(pg, {dtype}, {1}, async_op);    // a list of one
      check_all_gather_coalesced(pg, {dtype, dtype}, {0, 0}, async_op);  // nothing to move
    }
  });
}

TEST_P(AllGatherCoalesced, LargeAndMixedDtypes) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    for (bool async_op : {false, true}) {
      check_all_gather_coalesced(pg, {DType::Float32, DType::Int64, DType::BFloat16},
                                 {kLarge, 3, kLarge + 2}, async_op);
      check_all_gather_coalesced(pg, {DType::UInt8, DType::Float64}, {1, 7}, async_op);
    }
  });
}

// Several in flight at once with other collectives: issue order holds.
TEST_P(AllGatherCoalesced, InFlightWithOtherCollectives) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    std::vector<int32_t> in(5, me), out(5 * n, -1), sum(3, me + 1);
    std::vector<Tensor> ins{Tensor(in)}, outs;
    for (int r = 0; r < n; ++r) outs.push_back(Tensor(out.data() + 5 * r, 5));
    auto a = pg.all_reduce(Tensor(sum), AllReduceOptions{.async_op = true});
    auto b = pg.issue({.kind = OpKind::AllGatherCoalesced, .inputs = ins, .outputs = outs, .async_op = true});
    auto c = pg.barrier(BarrierOptions{.async_op = true});
    a->wait();
    b->wait();
    c->wait();
    for (int r = 0; r < n; ++r)
      for (int e = 0; e < 5; ++e) require(out[5 * r + e] == r, "block of rank " + std::to_string(r));
    for (int32_t v : sum) require(v == n * (n + 1) / 2, "the all_reduce issued before it");
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllGatherCoalesced, ::testing::ValuesIn(world_sizes()), world_name);

TEST(AllGatherCoalescedErrors, WrongListsAreValueErrorsBeforeAnythingIsSent) {
  with_thread_world(2, [](ProcessGroup& pg) {
    std::vector<float> x(4), y(3), o(4), p(4), q(4);
    const std::vector<Tensor> ins{Tensor(x)};
    const std::vector<Tensor> none;
    auto empty = value_error_of([&] { pg.issue({.kind = OpKind::AllGatherCoalesced, .inputs = none}); }, "empty");
    require(has(empty, "all_gather_coalesced") && has(empty, "empty"), empty);
    const std::vector<Tensor> one_output{Tensor(o)};
    auto short_list = value_error_of(
        [&] { pg.issue({.kind = OpKind::AllGatherCoalesced, .inputs = ins, .outputs = one_output}); }, "short");
    require(has(short_list, "1 output tensors for 1 inputs, expected 2"), short_list);
    const std::vector<Tensor> wrong_own{Tensor(o), Tensor(y)};  // rank 1's own block is 3 elements
    const std::vector<Tensor> swapped{Tensor(y), Tensor(o)};
    auto mismatch = value_error_of(
        [&] {
          pg.issue({.kind = OpKind::AllGatherCoalesced, .inputs = ins, .outputs = pg.rank() == 0 ? swapped : wrong_own});
        },
        "own block");
    require(has(mismatch, "does not match this rank's input 0"), mismatch);
    std::vector<int32_t> ints(4);
    const std::vector<Tensor> other_dtype{Tensor(p), Tensor(ints)};
    auto dtype = value_error_of(
        [&] { pg.issue({.kind = OpKind::AllGatherCoalesced, .inputs = ins, .outputs = other_dtype}); }, "dtype");
    require(has(dtype, "differs in dtype"), dtype);
    // The group still works: nothing was sent.
    const std::vector<Tensor> outs{Tensor(p), Tensor(q)};
    pg.issue({.kind = OpKind::AllGatherCoalesced, .inputs = ins, .outputs = outs, .async_op = false})->wait();
  });
}

}  // namespace
}  // namespace tdist::testing
