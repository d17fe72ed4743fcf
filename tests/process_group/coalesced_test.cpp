// all_reduce_coalesced, ranks as threads: every world size, op x dtype, lists
// mixing empty, one-element and odd tensors (packed into one buffer) with
// large ones (reduced in place) and more small tensors than one buffer
// holds; one Work per list, async and blocking, in flight with other
// collectives; mismatched dtypes and an empty list as value errors before
// anything is sent; an error reaches the one Work. Also the default
// Backend::all_reduce_coalesced (one all_reduce per tensor, joined by
// AggregateWork), AggregateWork alone, and Work::get_future_result.
#include <atomic>
#include <thread>

#include "process_group/coll_util.h"
#include "work/aggregate_work.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

// Tensor k of a list, element i, of rank r: salted by k so that a tensor
// landing in another's place shows.
long coalesced_input(ReduceOp op, int r, size_t k, size_t i) { return reduce_input(op, r, i, static_cast<int>(k * 3 + 1)); }

// Reduces a list of tensors of `counts` elements with all_reduce_coalesced
// (async or not) and checks each against the reduction computed locally.
void check_coalesced(ProcessGroup& pg, ReduceOp op, DType dtype, const std::vector<size_t>& counts, bool async_op) {
  const int n = pg.size(), me = pg.rank();
  std::vector<Buffer> bufs;
  bufs.reserve(counts.size());
  for (size_t k = 0; k < counts.size(); ++k)
    bufs.emplace_back(dtype, counts[k], [&](size_t i) { return coalesced_input(op, me, k, i); });
  std::vector<Tensor> ts;
  for (auto& b : bufs) ts.push_back(b.tensor());
  auto work = pg.all_reduce_coalesced(ts, AllReduceCoalescedOptions{.op = op, .async_op = async_op});
  work->wait();
  require(work->is_completed() && work->is_success(), "all_reduce_coalesced work not successful after wait");
  require(work->op_name() == "all_reduce_coalesced", "op name " + work->op_name());
  require(work->result().size() == ts.size(), "result() does not list every tensor");
  for (size_t k = 0; k < counts.size(); ++k) {
    require(work->result()[k].data() == ts[k].data(), "result()[" + std::to_string(k) + "] is not the tensor");
    auto input = [&](int r, size_t i) { return coalesced_input(op, r, k, i); };
    require_same(bufs[k], reference_reduction(op, dtype, counts[k], n, input),
                 describe("all_reduce_coalesced", dtype, counts[k], n,
                          std::string(op.name()) + " tensor " + std::to_string(k) + (async_op ? " async" : "")));
  }
}

class CollCoalesced : public ::testing::TestWithParam<int> {};

// Small lists (all packed into one buffer), every op and dtype.
TEST_P(CollCoalesced, EveryOpAndDtypeSmallSizes) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    bool async_op = false;
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dtype)) continue;
        check_coalesced(pg, op, dtype, {7, 0, 1, 3, 0, 129}, async_op = !async_op);
        check_coalesced(pg, op, dtype, {1}, async_op);  // a list of one
        check_coalesced(pg, op, dtype, {0, 0}, async_op);  // nothing to reduce
      }
  });
}

// Large tensors (in place) between small ones (packed), and more small
// tensors than one packing buffer holds.
TEST_P(CollCoalesced, LargeAndManySmallTensors) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    std::vector<size_t> mixed = {5, kLarge * 2, 0, 3, 1, kLarge * 2 + 1, 9};
    std::vector<size_t> many(151, 7001);  // ~4.2 MB of float32 in tensors below the in-place size: two buffers
    many.push_back(2);
    for (DType dtype : {DType::Float32, DType::Int64, DType::Float16, DType::Complex128})
      for (ReduceOp op : {ReduceOp(ReduceOp::SUM), ReduceOp(ReduceOp::MAX), ReduceOp(ReduceOp::AVG)}) {
        if (!reduce_op_supported(op, dtype)) continue;
        check_coalesced(pg, op, dtype, mixed, true);
      }
    check_coalesced(pg, ReduceOp::SUM, DType::Float32, many, false);
    check_coalesced(pg, ReduceOp::MIN, DType::Int32, many, true);
  });
}

// Several coalesced lists in flight with all_reduces, waited in reverse: each
// list is one operation with one Work, in issue order with the others.
TEST_P(CollCoalesced, InFlightWithOtherCollectives) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    std::vector<std::vector<int64_t>> a(6, std::vector<int64_t>(33)), b(6, std::vector<int64_t>(70001));
    std::vector<std::vector<int64_t>> single(6, std::vector<int64_t>(5));
    std::vector<std::shared_ptr<Work>> works;
    for (size_t k = 0; k < a.size(); ++k) {
      for (auto& x : a[k]) x = static_cast<int64_t>(k * 10 + me);
      for (auto& x : b[k]) x = static_cast<int64_t>(k * 1000 + me);
      for (auto& x : single[k]) x = me + 1;
      works.push_back(pg.all_reduce_coalesced({Tensor(a[k]), Tensor(b[k])}, ReduceOp::SUM));
      works.push_back(pg.all_reduce(single[k], ReduceOp::PRODUCT));
    }
    for (size_t k = works.size(); k-- > 0;) works[k]->wait();
    int64_t factorial = 1;
    for (int r = 1; r <= n; ++r) factorial *= r;
    for (size_t k = 0; k < a.size(); ++k) {
      for (auto x : a[k]) ASSERT_EQ(x, static_cast<int64_t>(k * 10 * n + n * (n - 1) / 2)) << "list " << k;
      for (auto x : b[k]) ASSERT_EQ(x, static_cast<int64_t>(k * 1000 * n + n * (n - 1) / 2)) << "list " << k;
      for (auto x : single[k]) ASSERT_EQ(x, factorial) << "all_reduce " << k;
    }
    // The future's value is the list, as the Work's result.
    auto work = pg.all_reduce_coalesced({Tensor(a[0]), Tensor(single[0])}, ReduceOp::MAX);
    const auto& value = work->get_future()->value();
    require(value.size() == 2 && value[0].data() == a[0].data() && value[1].data() == single[0].data(),
            "the future's value is not the list");
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollCoalesced, ::testing::ValuesIn(world_sizes()), world_name);

TEST(CollCoalescedErrors, MismatchedDtypesAndEmptyListsAreValueErrors) {
  with_thread_world(3, [](ProcessGroup& pg) {
    std::vector<float> f(4, 1.0f);
    std::vector<double> d(4, 1.0);
    std::vector<int32_t> i(2, 1);
    std::string m = value_error_of([&] { pg.all_reduce_coalesced({Tensor(f), Tensor(d)}); }, "float32 + float64");
    require(has(m, "all_reduce_coalesced") && has(m, "same dtype") && has(m, "float64") && has(m, "tensors[1]"),
            "message: " + m);
    value_error_of([&] { pg.all_reduce_coalesced({Tensor(f), Tensor(f), Tensor(i)}); }, "float32 + int32");
    value_error_of([&] { pg.all_reduce_coalesced(std::vector<Tensor>{}); }, "an empty list");
    value_error_of([&] { pg.all_reduce_coalesced({Tensor(f)}, ReduceOp::BAND); }, "BAND on float32");
    require(f[0] == 1.0f && d[0] == 1.0 && i[0] == 1, "a refused call changed a tensor");
    // The group is usable, and the ranks agree on the next operation.
    std::vector<float> g(3, 2.0f);
    pg.all_reduce_coalesced({Tensor(f), Tensor(g)})->wait();
    require(f[0] == 3.0f && g[2] == 6.0f, "after the refused calls: " + std::to_string(f[0]) + ", " +
                                              std::to_string(g[2]));
  });
}

// A rank that never joins: the one Work fails at the group's deadline with
// the operation named, and its result future says TIMEOUT.
TEST(CollCoalescedErrors, FailureReachesTheOneWork) {
  std::atomic<bool> done{false};
  with_thread_world(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 1) {
          while (!done.load()) std::this_thread::sleep_for(milliseconds(2));
          return;
        }
        std::vector<float> a(3, 1.0f), b(100000, 1.0f);
        auto work = pg.all_reduce_coalesced({Tensor(a), Tensor(b)});
        auto result = work->get_future_result();
        try {
          work->wait();
          done = true;
          throw std::logic_error("all_reduce_coalesced without rank 1 succeeded");
        } catch (const DistBackendError& e) {
          require(has(e.what(), "all_reduce_coalesced #1") && has(e.what(), "Timed out"),
                  std::string("message: ") + e.what());
        }
        done = true;
        require(work->is_completed() && !work->is_success() && work->exception(), "failed work state");
        require(result->wait() == WorkResult::TIMEOUT,
                std::string("get_future_result: ") + work_result_name(result->value()));
      },
      milliseconds(2000));
}

// --- the default Backend::all_reduce_coalesced and AggregateWork -------------

// A backend that has only all_reduce (a group's, forwarded): it gets the
// default all_reduce_coalesced of Backend.
class AllReduceOnly final : public Backend {
 public:
  explicit AllReduceOnly(ProcessGroup& pg) : Backend(pg.rank(), pg.size()), pg_(pg) {}
  std::string name() const override { return "all_reduce_only"; }
  std::shared_ptr<Work> all_reduce(const Operation& op) override {
    ++calls;
    return pg_.all_reduce(op.tensor(), {.op = op.reduce_op, .timeout = op.timeout, .async_op = op.async_op});
  }
  int calls = 0;

 private:
  ProcessGroup& pg_;
};

TEST_P(CollCoalesced, DefaultIsOneAllReducePerTensorJoined) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    AllReduceOnly backend(pg);
    for (bool async_op : {true, false}) {
      std::vector<int32_t> x(7, me), y(0), z(70001, 2 * me);
      const std::vector<Tensor> tensors{Tensor(x), Tensor(y), Tensor(z)};
      auto work = backend.run({.kind = OpKind::AllReduceCoalesced, .inputs = tensors, .reduce_op = ReduceOp::SUM,
                               .timeout = pg.timeout(), .async_op = async_op});
      require(work->op_name() == "all_reduce_coalesced" && work->result().size() == 3, "the joined work");
      work->get_future()->wait();
      require(work->is_completed() && work->is_success(), "joined work after its future");
      for (auto v : x) ASSERT_EQ(v, n * (n - 1) / 2);
      for (auto v : z) ASSERT_EQ(v, n * (n - 1));
    }
    require(backend.calls == 6, "all_reduce calls: " + std::to_string(backend.calls));
  });
}

TEST(AggregateWork, CompletesWithTheLastPartAndTheFirstErrorInIssueOrder) {
  auto p1 = std::make_shared<PendingWork>("all_reduce", 4);
  auto p2 = std::make_shared<PendingWork>("all_reduce", 5);
  auto p3 = std::make_shared<PendingWork>("all_reduce", 6);
  std::vector<float> v(2);
  auto agg = AggregateWork::join("all_reduce_coalesced", {p1, p2, p3}, {Tensor(v)});
  auto result = agg->get_future_result();
  require(agg->sequence_number() == 4 && !agg->is_completed(), "pending aggregate");
  p2->finish(std::make_exception_ptr(DistBackendError("part two failed: Timed out after 5 ms")));
  p3->finish();
  require(!agg->is_completed() && !result->completed(), "complete before every part is");
  p1->finish(std::make_exception_ptr(DistNetworkError("part one failed: connection closed by the peer")));
  require(agg->is_completed() && !agg->is_success(), "aggregate after its parts");
  try {
    agg->wait();
    throw std::logic_error("the aggregate of failed parts succeeded");
  } catch (const DistNetworkError& e) {
    require(has(e.what(), "part one failed"), std::string("not the first part's error: ") + e.what());
  }
  EXPECT_THROW(agg->get_future()->wait(), DistNetworkError);
  require(result->wait() == WorkResult::COMM_ERROR, std::string("result: ") + work_result_name(result->value()));

  // Parts complete before the join, and a timeout first in issue order.
  auto q1 = std::make_shared<PendingWork>("all_reduce", 1);
  auto q2 = std::make_shared<PendingWork>("all_reduce", 2);
  q1->finish(std::make_exception_ptr(DistBackendError("all_reduce #1: Timed out after 10 ms")));
  q2->finish();
  auto done = AggregateWork::join("all_reduce_coalesced", {q1, q2}, {});
  require(done->is_completed() && done->get_future_result()->value() == WorkResult::TIMEOUT, "joined complete parts");

  // A callback on the result future runs when the last part completes.
  auto part = std::make_shared<PendingWork>("all_reduce", 3);
  auto ok = AggregateWork::join("all_reduce_coalesced", {part}, {});
  std::atomic<int> seen{-1};
  ok->get_future_result()->add_done_callback([&](WorkResult r) { seen = static_cast<int>(r); });
  require(seen.load() == -1, "callback before completion");
  part->finish();
  require(seen.load() == static_cast<int>(WorkResult::SUCCESS) && ok->is_success(), "callback after completion");
}

TEST(WorkResultFuture, SuccessTimeoutAndOtherErrors) {
  require(Work::result_of(nullptr) == WorkResult::SUCCESS, "no error");
  require(Work::result_of(std::make_exception_ptr(DistBackendError("x: Timed out after 1 s"))) == WorkResult::TIMEOUT,
          "Timed out");
  require(Work::result_of(std::make_exception_ptr(DistBackendError("Rank 0 timed out in monitoredBarrier"))) ==
              WorkResult::TIMEOUT,
          "monitoredBarrier");
  require(Work::result_of(std::make_exception_ptr(DistNetworkError("connection lost"))) == WorkResult::COMM_ERROR,
          "other");
  require(std::string(work_result_name(WorkResult::COMM_ERROR)) == "COMM_ERROR", "name");

  // A completed collective: SUCCESS, at once; a pending one: once it completes.
  std::atomic<bool> go{false};
  with_thread_world(2, [&](ProcessGroup& pg) {
    std::vector<int64_t> v(4, pg.rank());
    auto done = pg.all_reduce(v, AllReduceOptions{.async_op = false});
    done->wait();
    auto r = done->get_future_result();
    require(r->completed() && r->value() == WorkResult::SUCCESS, "completed work");
    if (pg.rank() == 1)
      while (!go.load()) std::this_thread::sleep_for(milliseconds(1));
    auto work = pg.all_reduce(v);
    auto pending = work->get_future_result();
    auto seen = std::make_shared<std::atomic<int>>(-1);  // the callback may outlive this frame on failure
    pending->add_done_callback([seen](WorkResult x) { *seen = static_cast<int>(x); });
    if (pg.rank() == 0) {
      require(!pending->completed(), "completed before rank 1 joined");
      go = true;
    }
    require(pending->wait() == WorkResult::SUCCESS, "pending work's result");
    // Callbacks run on the completing thread, after wait() may have returned.
    for (int i = 0; i < 10000 && seen->load() < 0; ++i) std::this_thread::sleep_for(milliseconds(1));
    require(seen->load() == 0, "the callback saw " + std::to_string(seen->load()));
    // Point-to-point works have no future, so no result future either (as get_future).
    auto p2p = pg.rank() == 0 ? pg.send(v, 1) : pg.recv(v, 0);
    EXPECT_THROW(p2p->get_future_result(), DistBackendError);
    p2p->wait();
  });

  // A group destroyed under a pending operation: COMM_ERROR, not TIMEOUT.
  std::atomic<bool> seen_error{false};
  with_thread_world(2, [&](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      while (!seen_error.load()) std::this_thread::sleep_for(milliseconds(2));
      return;
    }
    std::vector<float> v(8, 1.0f);
    auto work = pg.all_reduce(v);
    auto result = work->get_future_result();
    pg.shutdown();
    const WorkResult r = result->wait();
    seen_error = true;
    require(r == WorkResult::COMM_ERROR, std::string("after destroy: ") + work_result_name(r));
    EXPECT_THROW(work->wait(), DistError);
  });
}

}  // namespace
}  // namespace tdist::testing
