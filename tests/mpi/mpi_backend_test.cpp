// The mpi backend under mpirun (ctest starts this binary with mpirun -n 1..5):
// the collective matrix the tdist backend runs (common/collective_matrix.h,
// common/reduce_check.h) on the world, on subgroups and on a DeviceMesh, every
// dtype and op against a locally computed result, point-to-point, async
// overlap, the object collectives, and the errors. main() initialises the
// default group with init_process_group("mpi"), so tdist initialises MPI and
// finalises it in destroy_process_group at the end.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <thread>

#include "backends/world.h"
#include "common/collective_matrix.h"
#include "common/reduce_check.h"
#include "tdist/device_mesh.h"
#include "tdist/tdist.h"
#include "tdist/trace.h"

namespace tdist::testing {
namespace {

using namespace std::chrono_literals;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

void run_checks(const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    FAIL() << "rank " << get_rank() << ": " << e.what();
  }
}

TEST(MpiBackend, WorldIsMpis) {
  EXPECT_EQ(get_backend(), "mpi");
  EXPECT_TRUE(is_mpi_available());
  EXPECT_TRUE(is_gloo_available());
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(get_rank(), rank);
  EXPECT_EQ(get_world_size(), size);
  if (env_int("OMPI_COMM_WORLD_SIZE") > 0) {
    EXPECT_EQ(get_world_size(), env_int("OMPI_COMM_WORLD_SIZE"));
  }
  int level = -1;
  MPI_Query_thread(&level);
  EXPECT_GE(level, MPI_THREAD_SERIALIZED);
}

TEST(MpiBackend, CollectiveMatrixOnTheWorld) {
  run_checks([] {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}})
      matrix::check_collectives(group_world(), count, "the world");
    matrix::check_large(group_world(), size_t{2} << 20, "the world");
  });
}

TEST(MpiBackend, EveryDtypeAndOpMatchesTheLocalReduction) {
  run_checks([] {
    ProcessGroup& pg = *group_world();
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dtype)) continue;
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) check_all_reduce(pg, op, dtype, count);
      }
    for (DType dtype : all_dtypes())
      if (reduce_op_supported(ReduceOp::SUM, dtype)) check_all_reduce(pg, ReduceOp::SUM, dtype, 70001);
  });
}

// reduce and reduce_scatter_tensor of every dtype and op: blocks of the same
// local reduction.
TEST(MpiBackend, ReduceAndReduceScatterEveryDtypeAndOp) {
  run_checks([] {
    const int n = get_world_size(), me = get_rank();
    const size_t count = 13;
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dtype)) continue;
        const std::string what = std::string(op.name()) + " " + std::string(dtype_name(dtype));
        Buffer want = expected(op, dtype, count * n, n);
        Buffer in(dtype, count * n, [&](size_t i) { return input_value(op, me, i); });
        Buffer out(dtype, count);
        reduce_scatter_tensor(out.tensor(), in.tensor(), op)->wait();
        for (size_t i = 0; i < count; ++i)
          matrix::require(out.value(i) == want.value(me * count + i),
                          "reduce_scatter_tensor " + what + ": element " + std::to_string(i) + " is " + out.at(i));
        // In place (the output is this rank's block of the input), blocking and async: the other
        // blocks stay as they were.
        for (bool async_op : {false, true}) {
          Buffer both(dtype, count * n, [&](size_t i) { return input_value(op, me, i); });
          const Tensor block(static_cast<char*>(both.data()) + me * count * dtype_size(dtype), dtype,
                             {static_cast<int64_t>(count)});
          reduce_scatter_tensor(block, both.tensor(), op, nullptr, async_op)->wait();
          const Buffer before(dtype, count * n, [&](size_t i) { return input_value(op, me, i); });
          for (size_t i = 0; i < count * n; ++i) {
            const bool mine_block = i / count == static_cast<size_t>(me);
            matrix::require(both.value(i) == (mine_block ? want.value(i) : before.value(i)),
                            "in-place reduce_scatter_tensor " + what + (async_op ? " (async)" : "") +
                                ": element " + std::to_string(i) + " is " + both.at(i));
          }
        }
        const int root = n - 1;
        Buffer mine(dtype, count * n, [&](size_t i) { return input_value(op, me, i); });
        const Buffer before(dtype, count * n, [&](size_t i) { return input_value(op, me, i); });
        reduce(mine.tensor(), root, op)->wait();
        const Buffer& should = me == root ? want : before;
        const long diff = mine.first_difference(should);
        matrix::require(diff < 0, "reduce " + what + " to " + std::to_string(root) + ": element " +
                                      std::to_string(diff) + " is " + (diff >= 0 ? mine.at(diff) : ""));
      }
  });
}

TEST(MpiBackend, SubgroupsAndNonMembers) {
  run_checks([] {
    const int n = get_world_size(), me = get_rank();
    std::vector<int> evens, odds;
    for (int r = 0; r < n; ++r) (r % 2 ? odds : evens).push_back(r);
    Group even = new_group(evens), odd = odds.empty() ? nullptr : new_group(odds);
    Group mine = me % 2 ? odd : even;
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}})
      matrix::check_collectives(mine, count, me % 2 ? "the odd ranks" : "the even ranks");
    // Operations on a group this rank is not in do nothing.
    Group other = me % 2 ? even : odd;
    if (other) {
      std::vector<float> x(4, 5.0f);
      all_reduce(Tensor(x.data(), x.size()), ReduceOp::SUM, other)->wait();
      matrix::require(x[0] == 5.0f, "an all_reduce on a group this rank is not in changed its tensor");
    }
    // Ranks of the reversed world: a subgroup whose order is not MPI's.
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    Group everyone = new_group(all);
    matrix::check_collectives(everyone, 5, "a new group of every rank");
    barrier()->wait();
  });
}

TEST(MpiBackend, DeviceMeshDimensions) {
  const int n = get_world_size();
  if (n % 2 != 0 || n < 4) GTEST_SKIP() << "a 2 x (n/2) mesh needs an even world of 4 or more";
  run_checks([n] {
    auto mesh = init_device_mesh("cpu", {2, n / 2}, {"host", "local"});
    matrix::check_collectives(mesh->get_group("host"), 7, "the mesh's host dimension");
    matrix::check_collectives(mesh->get_group("local"), 7, "the mesh's local dimension");
  });
}

TEST(MpiBackend, PointToPointWithTagsAndAnySource) {
  run_checks([] {
    const int n = get_world_size(), me = get_rank();
    if (n < 2) return;
    // A ring with two tags, received in the opposite order of sending.
    std::vector<int32_t> a(5, me), b(7, me * 10), ra(5, -1), rb(7, -1);
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    auto s1 = isend(Tensor(a.data(), a.size()), next, nullptr, 1);
    auto s2 = isend(Tensor(b.data(), b.size()), next, nullptr, 2);
    recv(Tensor(rb.data(), rb.size()), prev, nullptr, 2);
    recv(Tensor(ra.data(), ra.size()), prev, nullptr, 1);
    s1->wait();
    s2->wait();
    matrix::require(ra[4] == prev && rb[6] == prev * 10, "a tagged ring exchange got the wrong data");
    // Rank 0 receives from any source (on a tag of its own) and learns who sent.
    std::vector<int32_t> one(1, me);
    if (me == 0) {
      std::vector<bool> seen(n, false);
      for (int k = 1; k < n; ++k) {
        std::vector<int32_t> got(1, -1);
        const int src = recv(Tensor(got.data(), 1), kAnyPeer, nullptr, 3);
        matrix::require(src == got[0] && !seen[src], "recv from any source named rank " + std::to_string(src) +
                                                         " for a message of rank " + std::to_string(got[0]));
        seen[src] = true;
      }
    } else {
      send(Tensor(one.data(), 1), 0, nullptr, 3);
    }
    // batch_isend_irecv: a send and a receive with each neighbour.
    std::vector<int64_t> to_next(3, me), to_prev(3, -me), from_prev(3, 0), from_next(3, 0);
    auto works = batch_isend_irecv({P2POp(P2POp::ISEND, Tensor(to_next.data(), 3), next),
                                    P2POp(P2POp::ISEND, Tensor(to_prev.data(), 3), prev),
                                    P2POp(P2POp::IRECV, Tensor(from_prev.data(), 3), prev),
                                    P2POp(P2POp::IRECV, Tensor(from_next.data(), 3), next)});
    for (auto& w : works) w->wait();
    matrix::require(from_prev[2] == prev && from_next[2] == -next, "batch_isend_irecv got the wrong data");
  });
}

// As torch allows, and as the tdist backend does: a rank sends to itself, and
// an all-to-all of batch_isend_irecv includes the rank itself.
TEST(MpiBackend, ARankSendsToAndReceivesFromItself) {
  run_checks([] {
    const int n = get_world_size(), me = get_rank();
    std::vector<int32_t> out(1001, me + 7), in(1001, -1);
    auto s = isend(Tensor(out.data(), out.size()), me, nullptr, 4);
    const int src = recv(Tensor(in.data(), in.size()), me, nullptr, 4);
    s->wait();
    matrix::require(src == me && in[1000] == me + 7, "a message to itself came back wrong");
    std::vector<int64_t> to(n), from(n, -1);
    std::vector<P2POp> ops;
    for (int d = 0; d < n; ++d) {
      to[d] = me * 100 + d;
      ops.emplace_back(P2POp::ISEND, Tensor(&to[d], 1), d, nullptr, 6);
      ops.emplace_back(P2POp::IRECV, Tensor(&from[d], 1), d, nullptr, 6);
    }
    for (auto& w : batch_isend_irecv(ops)) w->wait();
    for (int r = 0; r < n; ++r)
      matrix::require(from[r] == r * 100 + me, "batch_isend_irecv over every rank: rank " + std::to_string(r) +
                                                   "'s element is " + std::to_string(from[r]));
  });
}

TEST(MpiBackend, AsyncOperationsOverlapAndComplete) {
  run_checks([] {
    const int n = get_world_size();
    std::vector<std::vector<float>> data(8, std::vector<float>(10000, 1.0f));
    std::vector<std::shared_ptr<Work>> works;
    for (auto& d : data) works.push_back(all_reduce(Tensor(d.data(), d.size()), ReduceOp::SUM, nullptr, true));
    std::vector<int32_t> b(100, get_rank() == 0 ? 42 : 0);
    works.push_back(broadcast(Tensor(b.data(), b.size()), 0, nullptr, true));
    works.push_back(barrier(nullptr, true));
    for (auto& w : works) w->wait();
    for (auto& d : data) matrix::require(d[9999] == static_cast<float>(n), "an async all_reduce's result is wrong");
    matrix::require(b[99] == 42, "an async broadcast's result is wrong");
    // AVG finishes after MPI's sum, on the MPI thread.
    std::vector<double> avg(3, static_cast<double>(get_rank()));
    all_reduce(Tensor(avg.data(), 3), ReduceOp::AVG, nullptr, true)->wait();
    matrix::require(avg[0] == (n - 1) / 2.0, "an async AVG all_reduce gave " + std::to_string(avg[0]));
  });
}

// The flight recorder is the front's: the mpi backend's operations are in it
// too, stamped by the backend on whichever thread runs them.
TEST(MpiBackend, TheFlightRecorderAndObserversSeeItsOperations) {
  run_checks([] {
    std::vector<OpEvent> seen;
    std::mutex mu;
    const int handle = add_op_observer([&](const OpEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(e);
    });
    std::vector<float> x(3, 1.0f);
    all_reduce(Tensor(x.data(), 3), ReduceOp::MAX);
    broadcast(Tensor(x.data(), 3), 0);
    all_reduce(Tensor(x.data(), 3), ReduceOp::SUM, nullptr, /*async_op=*/true)->wait();  // on the MPI thread
    remove_op_observer(handle);
    std::lock_guard<std::mutex> lock(mu);
    matrix::require(seen.size() == 3, "observers saw " + std::to_string(seen.size()) + " operations, not 3");
    matrix::require(seen[2].op == "all_reduce" && seen[2].seq == seen[1].seq + 1 && seen[2].started_us > 0,
                    "the async all_reduce was not seen starting and ending");
    matrix::require(seen[0].op == "all_reduce" && seen[1].op == "broadcast" && seen[1].seq == seen[0].seq + 1,
                    "observers saw " + seen[0].op + " #" + std::to_string(seen[0].seq) + " then " + seen[1].op +
                        " #" + std::to_string(seen[1].seq));
    for (const OpEvent& e : seen) {
      matrix::require(e.engine == "mpi" && e.state == "completed" && e.dtype == "float32" &&
                          e.shapes == std::vector<std::vector<int64_t>>{{3}} && e.bytes == 12,
                      e.op + ": engine '" + e.engine + "', state " + e.state + ", dtype " + e.dtype);
      matrix::require(e.queued_us > 0 && e.queued_us <= e.ended_us, e.op + ": times out of order");
    }
    matrix::require(seen[0].reduce_op == "max" && seen[1].root == 0, "the arguments are not recorded");
    matrix::require(flight_recorder_json().find("\"backend\": \"mpi\"") != std::string::npos,
                    "the dump does not name the mpi backend");
  });
}

TEST(MpiBackend, UnevenListsGoThroughStaging) {
  run_checks([] {
    const int n = get_world_size(), me = get_rank();
    // all_gather of sizes that differ by rank, into separate vectors.
    std::vector<std::vector<int32_t>> outs(n);
    std::vector<Tensor> out_tensors;
    for (int r = 0; r < n; ++r) {
      outs[r].assign(r + 1, -1);
      out_tensors.push_back(Tensor(outs[r].data(), outs[r].size()));
    }
    std::vector<int32_t> in(me + 1, me * 3);
    all_gather(out_tensors, Tensor(in.data(), in.size()))->wait();
    for (int r = 0; r < n; ++r)
      matrix::require(outs[r].back() == r * 3, "uneven all_gather: rank " + std::to_string(r) + "'s part is wrong");
    // all_to_all of lists: rank s sends s + d + 1 elements to rank d.
    std::vector<std::vector<int32_t>> send(n), recv_(n);
    std::vector<Tensor> ins, outs2;
    for (int d = 0; d < n; ++d) {
      send[d].assign(me + d + 1, me * 100 + d);
      recv_[d].assign(d + me + 1, -1);
      ins.push_back(Tensor(send[d].data(), send[d].size()));
      outs2.push_back(Tensor(recv_[d].data(), recv_[d].size()));
    }
    all_to_all(outs2, ins)->wait();
    for (int s = 0; s < n; ++s)
      matrix::require(recv_[s].front() == s * 100 + me && recv_[s].back() == s * 100 + me,
                      "uneven all_to_all: the part from rank " + std::to_string(s) + " is wrong");
  });
}

TEST(MpiBackend, ObjectCollectivesAndMonitoredBarrier) {
  run_checks([] {
    const int n = get_world_size(), me = get_rank();
    std::vector<std::string> objects(2);
    if (me == 0) objects = {"first", std::string(3000, 'x')};
    broadcast_object_list(objects, 0);
    matrix::require(objects[0] == "first" && objects[1].size() == 3000, "broadcast_object_list lost its objects");
    std::vector<std::string> all;
    all_gather_object(all, "rank" + std::to_string(me));
    matrix::require(static_cast<int>(all.size()) == n && all[n - 1] == "rank" + std::to_string(n - 1),
                    "all_gather_object gave the wrong list");
    monitored_barrier(nullptr, 30s, true);
  });
}

TEST(MpiBackend, ARecvThatTimesOutNamesItselfAndLeavesTheGroupUsable) {
  run_checks([] {
    const int n = get_world_size(), me = get_rank();
    if (n < 2) return;
    std::vector<float> x(4, 0.0f);
    if (me == 0) {
      try {
        ProcessGroup& pg = *group_world();
        pg.recv(Tensor(x.data(), 4), 1, RecvOptions{.tag = 77, .timeout = 200ms, .async_op = false})->wait();
        matrix::require(false, "a recv that nobody answers returned");
      } catch (const DistBackendError& e) {
        const std::string what = e.what();
        matrix::require(what.find("recv") != std::string::npos && what.find("Timed out") != std::string::npos &&
                            what.find("rank 1") != std::string::npos && what.find("tag 77") != std::string::npos,
                        "the timeout's message does not say what timed out: " + what);
      }
    }
    // Work.wait(timeout) on an async receive returns with a timeout error, and the receive goes on.
    std::vector<int32_t> v(1, -1);
    if (me == 0) {
      auto w = irecv(Tensor(v.data(), 1), 1, nullptr, 5);
      bool timed_out = false;
      try {
        w->wait(50ms);
      } catch (const DistBackendError&) {
        timed_out = true;
      }
      matrix::require(timed_out, "Work.wait(50 ms) on a receive nobody had sent to returned");
      barrier()->wait();
      w->wait();
      matrix::require(v[0] == 9, "the receive that wait(timeout) left pending got " + std::to_string(v[0]));
    } else {
      barrier()->wait();
      if (me == 1) {
        v[0] = 9;
        send(Tensor(v.data(), 1), 0, nullptr, 5);
      }
    }
    std::vector<float> y(3, 1.0f);
    all_reduce(Tensor(y.data(), 3))->wait();
    matrix::require(y[0] == static_cast<float>(n), "the group's all_reduce after a timeout is wrong");
  });
}

// The blocking send and recv (no Work: Backend::blocking_send/recv) build their
// messages only on failure; these are the failures they name.
TEST(MpiBackend, BlockingPointToPointErrorsNameTheCall) {
  run_checks([] {
    const int n = get_world_size(), me = get_rank();
    if (n < 2) return;
    // A message shorter than the receiving tensor.
    std::vector<float> sent(2, 3.0f), got(4, -1.0f);
    if (me == 1) send(Tensor(sent.data(), 2), 0, nullptr, 8);
    if (me == 0) {
      std::string what;
      try {
        recv(Tensor(got.data(), 4), 1, nullptr, 8);
      } catch (const DistBackendError& e) {
        what = e.what();
      }
      for (const char* part : {"recv #", "from rank 1 (tag 8)", "rank 1 sent 8 bytes where the tensor holds 16"})
        matrix::require(what.find(part) != std::string::npos,
                        std::string("a short message's error lacks \"") + part + "\": " + what);
      matrix::require(got[0] == 3.0f && got[1] == 3.0f && got[2] == -1.0f,
                      "the short message's bytes did not land as sent");
    }
    // A tag beyond what MPI takes, refused before anything is sent.
    int* tag_ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
    if (found && *tag_ub < INT_MAX) {
      std::string what;
      try {
        send(Tensor(sent.data(), 2), (me + 1) % n, nullptr, *tag_ub + 1);
      } catch (const DistBackendError& e) {
        what = e.what();
      }
      matrix::require(what.find("send #") != std::string::npos && what.find("MPI_TAG_UB") != std::string::npos,
                      "a tag beyond MPI_TAG_UB was not refused by name: " + what);
    }
    // The group goes on.
    std::vector<int32_t> y(3, 1);
    all_reduce(Tensor(y.data(), 3))->wait();
    matrix::require(y[2] == n, "the group's all_reduce after failed point-to-point calls is wrong");
  });
}

}  // namespace
}  // namespace tdist::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Ranks that MPI does not have are refused, naming both.
  try {
    tdist::init_process_group({.backend = "mpi", .world_size = 1000});
    std::fprintf(stderr, "init_process_group(mpi) took world_size 1000\n");
    return 1;
  } catch (const tdist::DistValueError& e) {
    if (std::string(e.what()).find("MPI_COMM_WORLD says") == std::string::npos) {
      std::fprintf(stderr, "the world size error does not name MPI's: %s\n", e.what());
      return 1;
    }
  }
  tdist::init_process_group({.backend = "mpi"});
  int rc = RUN_ALL_TESTS();
  tdist::destroy_process_group();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    std::fprintf(stderr, "destroy_process_group did not finalise the MPI that tdist initialised\n");
    rc = 1;
  }
  return rc;
}
