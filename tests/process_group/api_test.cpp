// Ranks as threads: argument validation of every collective (DistValueError
// before anything is sent, the group usable afterwards), Work and Future
// semantics, barrier and monitored_barrier when every rank arrives.
#include <atomic>
#include <thread>

#include "process_group/coll_util.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

// A successful all_gather of each rank's rank: proves the group still works
// and that the ranks agree on the next sequence number.
void require_usable(ProcessGroup& pg) {
  const int n = pg.size();
  std::vector<int64_t> mine{pg.rank() + 100};
  std::vector<int64_t> all(n, -1);
  pg.all_gather_into_tensor(all, mine)->wait();
  for (int r = 0; r < n; ++r) require(all[r] == r + 100, "group unusable after a validation error");
}

void require_message(const std::string& m, std::initializer_list<const char*> parts) {
  for (const char* p : parts) require(has(m, p), "error message lacks '" + std::string(p) + "': " + m);
}

TEST(CollValidation, EveryCollectiveRejectsBadArgumentsBeforeSending) {
  with_thread_world(3, [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    std::vector<float> f4(4, 1.0f), f5(5, 1.0f), f12(12, 1.0f), f13(13, 1.0f);
    std::vector<int32_t> i4(4, 1);
    std::vector<std::complex<float>> c4(4);
    std::string m;

    // all_gather
    m = value_error_of([&] { pg.all_gather({f4, f4}, f4); }, "all_gather with 2 outputs");
    require_message(m, {"all_gather", "2 tensors", "expected 3"});
    m = value_error_of([&] { pg.all_gather({f4, i4, f4}, f4); }, "all_gather dtype mismatch");
    require_message(m, {"all_gather", "int32", "float32"});
    {
      std::vector<Tensor> outs{f4, f4, f4};
      outs[me] = f5;
      m = value_error_of([&] { pg.all_gather(outs, f4); }, "all_gather own block size");
      require_message(m, {"all_gather", "[5]", "[4]"});
    }
    require_usable(pg);

    // all_gather_into_tensor
    m = value_error_of([&] { pg.all_gather_into_tensor(f13, f4); }, "all_gather_into_tensor size");
    require_message(m, {"all_gather_into_tensor", "[13]", "[4]", "3"});
    m = value_error_of([&] { pg.all_gather_into_tensor(Tensor(i4.data(), DType::Int32, {4}), Tensor(f4.data(), DType::Float32, {1})); },
                       "all_gather_into_tensor dtype");
    require_message(m, {"all_gather_into_tensor", "int32", "float32"});

    // gather / scatter: lists on the wrong rank, wrong lengths, wrong sizes, bad roots
    if (me != 0) {
      m = value_error_of([&] { pg.gather({f4, f4, f4}, f4, 0); }, "gather_list on a non-root");
      require_message(m, {"gather", "gather_list", "empty"});
      m = value_error_of([&] { pg.scatter(f4, {f4, f4, f4}, 0); }, "scatter_list on a non-root");
      require_message(m, {"scatter", "scatter_list", "empty"});
    } else {
      m = value_error_of([&] { pg.gather({f4, f4}, f4, 0); }, "gather_list too short");
      require_message(m, {"gather", "2 tensors", "expected 3"});
      m = value_error_of([&] { pg.gather({f4, f5, f4}, f4, 0); }, "gather_list entry size");
      require_message(m, {"gather", "[5]", "[4]"});
      m = value_error_of([&] { pg.scatter(f4, {f4, f4, f4, f4}, 0); }, "scatter_list too long");
      require_message(m, {"scatter", "4 tensors", "expected 3"});
      m = value_error_of([&] { pg.scatter(f4, {f4, i4, f4}, 0); }, "scatter_list dtype");
      require_message(m, {"scatter", "int32", "float32"});
    }
    m = value_error_of([&] { pg.gather({}, f4, 3); }, "gather root 3");
    require_message(m, {"gather", "3"});
    m = value_error_of([&] { pg.scatter(f4, {}, -1); }, "scatter root -1");
    require_message(m, {"scatter", "-1"});
    require_usable(pg);

    // reduce
    m = value_error_of([&] { pg.reduce(f4, n, ReduceOp::SUM); }, "reduce root n");
    require_message(m, {"reduce", "3"});
    m = value_error_of([&] { pg.reduce(f4, 0, ReduceOp::BAND); }, "reduce BAND float32");
    require_message(m, {"reduce", "BAND", "float32"});
    m = value_error_of([&] { pg.reduce(c4, 0, ReduceOp::MAX); }, "reduce MAX complex64");
    require_message(m, {"reduce", "MAX", "complex64"});

    // reduce_scatter / reduce_scatter_tensor
    m = value_error_of([&] { pg.reduce_scatter(f4, {f4, f4}); }, "reduce_scatter 2 inputs");
    require_message(m, {"reduce_scatter", "2 tensors", "expected 3"});
    {
      std::vector<Tensor> ins{f4, f4, f4};
      ins[me] = f5;
      m = value_error_of([&] { pg.reduce_scatter(f4, ins); }, "reduce_scatter own block size");
      require_message(m, {"reduce_scatter", "[5]", "[4]"});
    }
    m = value_error_of([&] { pg.reduce_scatter(f4, {f4, f4, f4}, ReduceOp::BXOR); }, "reduce_scatter BXOR float");
    require_message(m, {"reduce_scatter", "BXOR", "float32"});
    m = value_error_of([&] { pg.reduce_scatter(f4, {f4, i4, f4}); }, "reduce_scatter dtype");
    require_message(m, {"reduce_scatter", "int32", "float32"});
    m = value_error_of([&] { pg.reduce_scatter_tensor(f4, f13); }, "reduce_scatter_tensor size");
    require_message(m, {"reduce_scatter_tensor", "[13]", "[4]"});
    require_usable(pg);

    // all_to_all / all_to_all_single
    m = value_error_of([&] { pg.all_to_all({f4, f4, f4}, {f4, f4}); }, "all_to_all 2 inputs");
    require_message(m, {"all_to_all", "2 tensors", "expected 3"});
    m = value_error_of([&] { pg.all_to_all({f4, i4, f4}, {f4, f4, f4}); }, "all_to_all dtype");
    require_message(m, {"all_to_all", "int32", "float32"});
    m = value_error_of([&] { pg.all_to_all({f4, f4, f4}, {}); }, "all_to_all no inputs");
    require_message(m, {"all_to_all"});
    m = value_error_of([&] { pg.all_to_all_single(f12, f12, {4, 4, 4}, {4, 4, 5}); }, "splits add up to 13");
    require_message(m, {"all_to_all_single", "13", "12"});
    m = value_error_of([&] { pg.all_to_all_single(f12, f12, {6, 6}, {}); }, "2 split sizes");
    require_message(m, {"all_to_all_single", "2 entries", "expected 3"});
    m = value_error_of([&] { pg.all_to_all_single(f13, f13); }, "13 rows over 3 ranks");
    require_message(m, {"all_to_all_single", "13", "3"});
    m = value_error_of([&] { pg.all_to_all_single(f12, f12, {4, 4, 4}, {6, -2, 8}); }, "negative split");
    require_message(m, {"all_to_all_single", "negative"});
    m = value_error_of([&] { pg.all_to_all_single(Tensor(i4.data(), DType::Int32, {3}), Tensor(f4.data(), DType::Float32, {3})); },
                       "all_to_all_single dtype");
    require_message(m, {"all_to_all_single", "int32", "float32"});
    require_usable(pg);

    // broadcast / all_reduce
    m = value_error_of([&] { pg.broadcast(f4, n); }, "broadcast root n");
    require_message(m, {"broadcast", "3"});
    m = value_error_of([&] { pg.all_reduce(f4, ReduceOp::BOR); }, "all_reduce BOR float");
    require_message(m, {"all_reduce", "BOR", "float32"});
    require_usable(pg);
  });
}

// Empty std::vectors have no data at all (nullptr): every operation must take
// them (sanitizer builds check that no null pointer reaches memcpy & co).
TEST(CollEmptyTensors, NullDataEverywhere) {
  with_thread_world(3, [](ProcessGroup& pg) {
    const int n = pg.size();
    std::vector<float> e;
    std::vector<Tensor> es(n, Tensor(e));
    require(Tensor(e).data() == nullptr || Tensor(e).numel() == 0, "empty view");
    pg.reduce(e, 1, ReduceOp::AVG)->wait();
    pg.all_gather(es, e)->wait();
    pg.all_gather_into_tensor(e, e)->wait();
    pg.gather(pg.rank() == 2 ? es : std::vector<Tensor>{}, e, 2)->wait();
    pg.scatter(e, pg.rank() == 0 ? es : std::vector<Tensor>{}, 0)->wait();
    pg.reduce_scatter(e, es, ReduceOp::PREMUL_SUM)->wait();
    pg.reduce_scatter_tensor(e, e, ReduceOp::MAX)->wait();
    pg.all_to_all(es, es)->wait();
    pg.all_to_all_single(e, e)->wait();
    pg.all_to_all_single(e, e, std::vector<int64_t>(n, 0), std::vector<int64_t>(n, 0))->wait();
    pg.broadcast(e, 1)->wait();
    pg.all_reduce(e)->wait();
    require_usable(pg);
  });
}

// --- Work and Future ------------------------------------------------------

TEST(CollWorkFuture, CompletedWorkReportsSuccessAndOutputs) {
  with_thread_world(3, [](ProcessGroup& pg) {
    std::vector<int32_t> v(10, pg.rank() + 1);
    auto work = pg.all_reduce(v, ReduceOp::SUM);
    require(work->wait(), "wait returned false");
    require(work->is_completed() && work->is_success() && !work->exception(), "state after success");
    require(work->op_name() == "all_reduce" && work->sequence_number() > 0, "op name / sequence number");
    require(work->result().size() == 1 && work->result()[0].data() == v.data(), "result() is not the tensor");
    require(work->wait(milliseconds(1)), "a second wait");
    for (auto x : v) require(x == 6, "all_reduce value");
    // The future of an already complete work is complete, with the tensors.
    auto fut = work->get_future();
    require(fut->completed() && !fut->has_error(), "future of a complete work");
    require(fut->value().size() == 1 && fut->value()[0].data() == v.data(), "future value");
    require(work->get_future() == fut, "get_future returns one future");
  });
}

TEST(CollWorkFuture, WaitWithTimeoutOnPendingWorkThenCompletes) {
  std::atomic<bool> go{false};
  with_thread_world(2, [&](ProcessGroup& pg) {
    std::vector<float> v(8, 1.0f);
    if (pg.rank() == 1) {
      while (!go.load()) std::this_thread::sleep_for(milliseconds(1));  // join only when rank 0 allows it
      pg.all_reduce(v)->wait();
      return;
    }
    auto work = pg.all_reduce(v);
    try {
      work->wait(milliseconds(20));
      go = true;
      throw std::runtime_error("wait(20 ms) returned while rank 1 had not joined");
    } catch (const DistBackendError& e) {
      require_message(e.what(), {"all_reduce", "Timed out"});
    }
    require(!work->is_completed() && !work->is_success() && !work->exception(), "pending work state");
    go = true;
    work->wait();
    require(work->is_completed() && work->is_success(), "completed after wait");
    require(v[0] == 2.0f, "value");
  });
}

TEST(CollWorkFuture, ThenChainsRunAfterCompletionAndSeeTheOutput) {
  std::atomic<bool> go{false};
  with_thread_world(2, [&](ProcessGroup& pg) {
    const int me = pg.rank();
    std::vector<int64_t> v(16, me + 1);
    if (me == 1) while (!go.load()) std::this_thread::sleep_for(milliseconds(1));
    auto work = pg.all_reduce(v, ReduceOp::SUM);
    auto fut = work->get_future();
    std::atomic<int> first_saw{-1}, second_saw{-1}, late_saw{-1};
    auto f2 = fut->then([&](Future& f) {
      const auto& out = f.value();
      require(out.size() == 1 && out[0].data() == v.data(), "then: value is not the output tensor");
      first_saw = static_cast<int>(out[0].data_as<int64_t>()[15]);
    });
    auto f3 = f2->then([&](Future& f) {
      require(first_saw.load() == 3, "the chained callback ran before the first");
      second_saw = static_cast<int>(f.value()[0].data_as<int64_t>()[0]);
    });
    if (me == 0) go = true;  // callbacks registered (on rank 0 before completion), now let it run
    f3->wait();
    require(first_saw == 3 && second_saw == 3, "callbacks saw " + std::to_string(first_saw) + ", " +
                                                    std::to_string(second_saw) + " instead of the sum 3");
    require(f2->completed() && !f2->has_error() && f2->value()[0].data() == v.data(), "chained future value");
    // then() on a complete future runs at once.
    auto f4 = fut->then([&](Future& f) { late_saw = static_cast<int>(f.value()[0].data_as<int64_t>()[1]); });
    require(f4->completed() && late_saw == 3, "then on a complete future did not run at once");
  });
}

TEST(CollWorkFuture, ThrowingCallbackFailsTheChainedFuture) {
  with_thread_world(2, [](ProcessGroup& pg) {
    std::vector<double> v(4, 1.0);
    auto work = pg.all_reduce(v);
    std::atomic<bool> downstream_saw_error{false};
    auto failed = work->get_future()->then([](Future&) { throw std::runtime_error("callback failed on purpose"); });
    auto after = failed->then([&](Future& f) { downstream_saw_error = f.has_error(); });
    try {
      failed->wait();
      throw std::logic_error("the future of a throwing callback completed without error");
    } catch (const std::runtime_error& e) {
      require(has(e.what(), "callback failed on purpose"), std::string("wrong error: ") + e.what());
    }
    require(failed->has_error() && failed->exception(), "has_error/exception");
    // `failed` completes before the callbacks chained on it run: wait for `after`.
    EXPECT_THROW(after->value(), std::runtime_error);
    require(downstream_saw_error.load(), "the next callback did not see the error");
    require(after->has_error(), "the error did not propagate down the chain");
    require(work->is_success() && v[0] == 2.0, "the operation itself is unaffected");
    require_usable(pg);
  });
}

TEST(CollWorkFuture, FailedOperationFailsItsFutureAndCallbacks) {
  std::atomic<bool> done{false};
  with_thread_world(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 1) {  // never joins; waits until rank 0 has seen its error
          while (!done.load()) std::this_thread::sleep_for(milliseconds(2));
          return;
        }
        std::vector<float> v(4, 1.0f);
        auto work = pg.all_reduce(v);
        std::atomic<bool> callback_saw_error{false};
        auto next = work->get_future()->then([&](Future& f) {
          callback_saw_error = f.has_error();
          f.value();  // rethrows the operation's error
        });
        try {
          work->wait();
          done = true;
          throw std::logic_error("all_reduce without rank 1 succeeded");
        } catch (const DistBackendError& e) {
          require_message(e.what(), {"all_reduce #1", "rank 1"});
        }
        done = true;
        require(work->is_completed() && !work->is_success() && work->exception(), "failed work state");
        EXPECT_THROW(next->wait(), DistError);
        require(callback_saw_error.load(), "the callback did not see the error");
      },
      milliseconds(2000));  // also bounds the world's set-up: keep it roomy for a loaded machine
}

TEST(CollWorkFuture, PointToPointGetFutureIsABackendError) {
  with_thread_world(2, [](ProcessGroup& pg) {
    std::vector<int32_t> v(3, 7);
    auto work = pg.rank() == 0 ? pg.send(v, 1, 5) : pg.recv(v, 0, 5);
    try {
      work->get_future();
      throw std::logic_error("get_future of a point-to-point work did not throw");
    } catch (const DistBackendError& e) {
      require_message(e.what(), {"get_future"});
    }
    work->wait();
    require(work->is_completed() && work->is_success(), "p2p work state");
    if (pg.rank() == 1) require(work->source_rank() == 0, "source rank");
  });
}

// --- barrier, monitored_barrier ---------------------------------------------

class CollBarriers : public ::testing::TestWithParam<int> {};

TEST_P(CollBarriers, MonitoredBarrierWhenEveryRankArrives) {
  std::atomic<int> arrived{0};
  const int n = GetParam();
  with_thread_world(n, [&](ProcessGroup& pg) {
    std::vector<int32_t> v(5, 1);
    for (int round = 1; round <= 3; ++round) {
      arrived.fetch_add(1);
      pg.monitored_barrier(milliseconds(30000), round == 2)->wait();
      require(arrived.load() >= round * n, "a rank left monitored_barrier before every rank arrived");
      pg.all_reduce(v)->wait();  // interleaved with other collectives
      pg.barrier()->wait();
    }
    for (auto x : v) require(x == n * n * n, "all_reduce between barriers");
  });
}

TEST_P(CollBarriers, AsyncBarriersBetweenCollectives) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size();
    std::vector<std::shared_ptr<Work>> works;
    std::vector<std::vector<int16_t>> bufs(4, std::vector<int16_t>(3, 1));
    for (auto& b : bufs) {
      works.push_back(pg.barrier());
      works.push_back(pg.all_reduce(b));
    }
    for (size_t k = works.size(); k-- > 0;) works[k]->wait();
    for (auto& b : bufs) require(b[0] == n, "value");
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollBarriers, ::testing::ValuesIn(world_sizes()), world_name);

}  // namespace
}  // namespace tdist::testing
