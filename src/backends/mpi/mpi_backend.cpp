#include "backends/mpi/mpi_backend.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "tdist/errors.h"
#include "backends/mpi/mpi_layout.h"
#include "backends/mpi/mpi_types.h"
#include "algorithms/monitored_barrier_message.h"
#include "backends/backend_registry.h"
#include "reduce/reduction_kernels.h"
#include "tensor/split.h"
#include "trace/flight_recorder.h"
#include "util/error_context.h"

namespace tdist::mpi {

struct MpiBackend::State {
  RuntimeHold runtime;
  MPI_Comm comm = MPI_COMM_NULL;      // the group's operations
  MPI_Comm internal = MPI_COMM_NULL;  // monitored_barrier's messages, apart from every user tag
  int tag_ub = 32767;                 // MPI_TAG_UB: the largest tag the library takes
  std::string label;                  // "rank 3 in group default_pg"
  std::shared_ptr<const std::string> shared_label;
  std::mutex mu;
  std::exception_ptr failure;  // the first failure; later operations fail fast with it
  std::atomic<bool> failed{false};

  std::exception_ptr error(const std::string& op, uint64_t seq, const std::string& what) const {
    return std::make_exception_ptr(DistBackendError(label + ": " + op + " #" + std::to_string(seq) + " failed: " + what));
  }
  std::exception_ptr mpi_error(const std::string& op, uint64_t seq, const char* call, int rc) const {
    return error(op, seq, std::string(call) + " returned " + error_string(rc));
  }
  void record(const std::exception_ptr& e) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failure) failure = e;
    failed.store(true, std::memory_order_release);
  }
  [[gnu::always_inline]] std::exception_ptr failed_before(const char* op, uint64_t seq) {
    if (!failed.load(std::memory_order_acquire)) return nullptr;
    return failure_for(op, seq);
  }
  // failed_before's slow path.
  [[gnu::noinline, gnu::cold]] std::exception_ptr failure_for(const char* op, uint64_t seq) {
    std::lock_guard<std::mutex> lock(mu);
    return with_context(failure, label + ": " + op + " #" + std::to_string(seq) +
                                     " not started: the group failed earlier: ");
  }
};

namespace {

// A few hundred tests of an MPI request before yielding: a small message
// arrives within microseconds, and MPI only makes progress inside its calls.
constexpr std::chrono::microseconds kSpinFor{50};
constexpr std::chrono::milliseconds kYieldFor{2};
constexpr std::chrono::microseconds kNap{50};
constexpr int kExpired = -1;

// Stamps `mark` started now on this thread: with the counter for an entry
// that wants a precise time, else with the coarse clock (reading the counter
// costs a small blocking call a tenth of its wrapper in a VM).
void start_inline(const trace::FlightMark& mark) {
  if (mark.precise()) {
    mark.started_inline(now_ticks());
    return;
  }
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  mark.started_inline_coarse(static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec);
}

// Tests `requests` until all complete or the deadline passes (kExpired).
// `statuses` holds one per request.
int test_until(std::span<MPI_Request> requests, std::span<MPI_Status> statuses, const Deadline& deadline) {
  Clock::time_point start;
  for (unsigned round = 0;; ++round) {
    int flag = 0;
    int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, statuses.data());
    if (rc != MPI_SUCCESS) {
      if (rc == MPI_ERR_IN_STATUS)
        for (const MPI_Status& s : statuses)
          if (s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING) return s.MPI_ERROR;
      return rc;
    }
    if (flag) return MPI_SUCCESS;
    if (round % 64 != 63) continue;
    const auto now = Clock::now();
    if (round == 63) start = now;  // most calls end before: no clock read for them
    if (!deadline.is_never() && now >= deadline.at()) return kExpired;
    if (now - start < kSpinFor) continue;
    if (now - start < kYieldFor)
      sched_yield();
    else
      std::this_thread::sleep_for(kNap);
  }
}

// The rank of this process in MPI_COMM_WORLD and its size.
std::pair<int, int> world_of() {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return {rank, size};
}

// A tag for MPI_Comm_create_group that members of one group agree on and
// groups made one after another rarely share (they need not differ: each
// rank creates its groups in the same order).
int creation_tag(const std::vector<int>& ranks) {
  uint32_t h = 2166136261u;
  for (int r : ranks) h = (h ^ static_cast<uint32_t>(r)) * 16777619u;
  return static_cast<int>(h % 32768u);
}

}  // namespace

MpiBackend::MpiBackend(int rank, int size, const BackendOptions& options)
    : Backend(rank, size), options_(options), state_(std::make_shared<State>()) {
  State& s = *state_;
  const int global = options.global_ranks.empty() ? rank : options.global_ranks[rank];
  s.label = "rank " + std::to_string(global) + " in group " + (options.group_name.empty() ? "default_pg" : options.group_name);
  s.shared_label = std::make_shared<const std::string>(s.label);
  s.runtime = acquire_runtime(s.label);
  // The communicator this group is cut from: the parent group's, else the world.
  auto* parent = dynamic_cast<MpiBackend*>(options.parent.get());
  std::vector<int> parent_globals;
  if (parent) parent_globals = parent->options_.global_ranks;
  s.runtime->call([&] {
    MPI_Comm base = parent ? parent->comm() : MPI_COMM_WORLD;
    auto [world_rank, world_size] = world_of();
    std::vector<int> base_ranks(size);
    for (int i = 0; i < size; ++i) {
      const int g = options.global_ranks.empty() ? i : options.global_ranks[i];
      if (parent) {
        auto it = std::find(parent_globals.begin(), parent_globals.end(), g);
        if (it == parent_globals.end())
          throw DistBackendError(s.label + ": global rank " + std::to_string(g) + " is not in the parent group");
        base_ranks[i] = static_cast<int>(it - parent_globals.begin());
      } else {
        base_ranks[i] = g;
      }
    }
    int base_rank = 0, base_size = 0;
    MPI_Comm_rank(base, &base_rank);
    MPI_Comm_size(base, &base_size);
    if (!parent && (global != world_rank || (options.global_ranks.empty() && size != world_size) ||
                    *std::max_element(base_ranks.begin(), base_ranks.end()) >= world_size))
      throw DistValueError(s.label + ": tdist's world (rank " + std::to_string(global) + " of " +
                           std::to_string(options.global_ranks.empty() ? size : int(options.global_ranks.size())) +
                           ") is not MPI's (MPI_COMM_WORLD: rank " + std::to_string(world_rank) + " of " +
                           std::to_string(world_size) + "): the mpi backend's ranks are MPI's");
    if (base_ranks[rank] != base_rank)
      throw DistValueError(s.label + ": group rank " + std::to_string(rank) + " is rank " +
                           std::to_string(base_ranks[rank]) + " of the communicator it is made from, but this "
                           "process is its rank " + std::to_string(base_rank));
    bool whole = size == base_size;
    for (int i = 0; whole && i < size; ++i) whole = base_ranks[i] == i;
    int rc;
    if (whole) {
      rc = MPI_Comm_dup(base, &s.comm);
    } else {
      MPI_Group base_group, group;
      MPI_Comm_group(base, &base_group);
      MPI_Group_incl(base_group, size, base_ranks.data(), &group);
      rc = MPI_Comm_create_group(base, group, creation_tag(base_ranks), &s.comm);
      MPI_Group_free(&group);
      MPI_Group_free(&base_group);
    }
    if (rc != MPI_SUCCESS)
      throw DistBackendError(s.label + ": making the group's communicator failed: " + error_string(rc));
    MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN);
    rc = MPI_Comm_dup(s.comm, &s.internal);
    if (rc != MPI_SUCCESS)
      throw DistBackendError(s.label + ": making the group's communicator failed: " + error_string(rc));
    int* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    if (flag && ub) s.tag_ub = *ub;
  });
}

MpiBackend::~MpiBackend() { shutdown(); }

MPI_Comm MpiBackend::comm() const { return state_->comm; }

void MpiBackend::shutdown() {
  std::lock_guard<SleepingLock> lock(issue_mu_);
  State& s = *state_;
  if (!s.runtime) return;
  s.record(std::make_exception_ptr(DistBackendError(s.label + ": the process group was destroyed")));
  int finalized = 0;
  MPI_Finalized(&finalized);  // at exit, without destroy_process_group
  if (!finalized) s.runtime->call([&] {
    // Freeing marks the communicators for deallocation once their pending
    // operations complete (MPI_Comm_free); nothing new can start on them.
    if (s.internal != MPI_COMM_NULL) MPI_Comm_free(&s.internal);
    if (s.comm != MPI_COMM_NULL) MPI_Comm_free(&s.comm);
  });
  s.runtime.reset();  // the last hold finalises MPI, if tdist initialised it
}

template <typename Blocking, typename Start>
std::shared_ptr<Work> MpiBackend::run(const char* op, const char* mpi_name, std::span<const Tensor> result,
                                      const Operation& operation, Blocking&& blocking, Start&& start, std::function<void()> after,
                                      std::shared_ptr<void> keep) {
  std::lock_guard<SleepingLock> lock(issue_mu_);
  const uint64_t seq = ++seq_;
  State* st = state_.get();
  const bool async_op = operation.async_op;
  auto work = spare_.take(op, seq, result, !async_op, st->shared_label);
  // The flight recorder's entry (trace/flight_recorder.h): stamped here as
  // the tdist backend stamps its own, on whichever thread gets that far.
  trace::FlightMark mark = trace::claim_mark(operation);
  mark.engine(EngineKind::Mpi);
  if (auto e = st->failed_before(op, seq)) {
    mark.ended(e);
    work->finish_unshared(e);
    return work;
  }
  if (!async_op) {
    if (mark) start_inline(mark);
    int rc = MPI_SUCCESS;
    st->runtime->call([&] { rc = blocking(st->comm); });
    std::exception_ptr error;
    if (rc != MPI_SUCCESS) {
      error = st->mpi_error(op, seq, mpi_name, rc);
      st->record(error);
    } else if (after) {
      try {
        after();
      } catch (...) {
        error = with_context(std::current_exception(), st->label + ": " + op + " #" + std::to_string(seq) + ": ");
      }
    }
    mark.ended(error);
    work->finish_unshared(error);
    return work;
  }
  std::shared_ptr<State> shared = state_;
  mark.queued(now_ticks());
  st->runtime->post([shared, work, op, mpi_name, seq, start = std::function<int(MPI_Comm, MPI_Request*)>(start),
                     after = std::move(after), keep = std::move(keep), mark, recorder = mark.hold()]() mutable {
    MPI_Request request = MPI_REQUEST_NULL;
    mark.started(now_ticks());
    const int rc = start(shared->comm, &request);
    if (rc != MPI_SUCCESS) {
      auto error = shared->mpi_error(op, seq, mpi_name, rc);
      shared->record(error);
      mark.ended(error);
      work->finish(error);
      return;
    }
    shared->runtime->track(request, [shared, work, op, mpi_name, seq, after = std::move(after),
                                     keep = std::move(keep), mark, recorder](int err, const MPI_Status&) {
      if (err != MPI_SUCCESS) {
        auto error = shared->mpi_error(op, seq, mpi_name, err);
        shared->record(error);
        mark.ended(error);
        work->finish(error);
        return;
      }
      std::exception_ptr error;
      try {
        if (after) after();
      } catch (...) {
        error = std::current_exception();
      }
      mark.ended(error);
      work->finish(error);
    });
  });
  return work;
}

// How a point-to-point call names itself in errors ("send #4 of float[2] to
// rank 1 (tag 0)"): built only when one is raised, never on the hot path.
namespace {
std::string peer_name(int peer) {
  return peer == kAnySource ? std::string("any rank") : "rank " + std::to_string(peer);
}
std::string p2p_what(bool is_send, uint64_t seq, const Tensor& tensor, int peer, int tag) {
  return std::string(is_send ? "send" : "recv") + " #" + std::to_string(seq) + " of " + tensor.str() + " " +
         (is_send ? "to " : "from ") + peer_name(peer) + " (tag " + std::to_string(tag) + ")";
}

// The checks of a point-to-point call before it starts (throwing), and the
// byte count MPI is given.
int p2p_count(const MpiBackend::State& st, bool is_send, const Tensor& tensor, int peer, int tag, uint64_t seq) {
  if (tag < 0 || tag > st.tag_ub)
    throw DistBackendError(st.label + ": " + p2p_what(is_send, seq, tensor, peer, tag) +
                           ": MPI takes tags from 0 to MPI_TAG_UB (" + std::to_string(st.tag_ub) + ")");
  const size_t bytes = tensor.nbytes();
  if (bytes > static_cast<size_t>(INT_MAX))
    throw DistBackendError(st.label + ": " + p2p_what(is_send, seq, tensor, peer, tag) + ": " +
                           std::to_string(bytes) + " bytes exceed what one MPI message carries here (2^31-1)");
  return static_cast<int>(bytes);
}

// What a finished send or receive ended with: null, or the error naming it.
std::exception_ptr p2p_outcome(const MpiBackend::State& st, int rc, const MPI_Status& status, bool is_send,
                               uint64_t seq, const Tensor& tensor, int peer, int tag) {
  if (rc == MPI_SUCCESS && is_send) return nullptr;
  int got = 0;
  if (rc == MPI_SUCCESS) {
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (static_cast<size_t>(got) == tensor.nbytes()) return nullptr;
  }
  const std::string what = p2p_what(is_send, seq, tensor, peer, tag);
  if (rc != MPI_SUCCESS)
    return std::make_exception_ptr(DistBackendError(st.label + ": " + what + " failed: " +
                                                    (is_send ? "MPI_Isend" : "MPI_Irecv") + " returned " +
                                                    error_string(rc)));
  return std::make_exception_ptr(DistBackendError(st.label + ": " + what + " failed: rank " +
                                                  std::to_string(status.MPI_SOURCE) + " sent " +
                                                  std::to_string(got) + " bytes where the tensor holds " +
                                                  std::to_string(tensor.nbytes())));
}
}  // namespace

// A blocking send or receive: MPI's non-blocking one, tested on this thread
// (or the MPI thread) until done or the deadline. Throws for what is wrong
// before it starts; returns the error it ended with, or null, and the
// receive's source in *source. No Work, no string and no allocation unless
// something fails.
std::exception_ptr MpiBackend::blocking_p2p(bool is_send, const Operation& operation, uint64_t seq, int* source) {
  State* st = state_.get();
  const Tensor& tensor = operation.tensor();
  const int peer = operation.peer, tag = operation.tag;
  if (auto e = st->failed_before(is_send ? "send" : "recv", seq)) return e;
  const int count = p2p_count(*st, is_send, tensor, peer, tag, seq);
  const int mpi_peer = peer == kAnySource ? MPI_ANY_SOURCE : peer;
  // The flight recorder's entry, once the call is sure to run (until here,
  // the front ends it from what this returns or throws).
  trace::FlightMark mark = trace::claim_mark(operation);
  mark.engine(EngineKind::Mpi);
  if (mark) start_inline(mark);
  void* data = tensor.data();
  const Deadline deadline = Deadline::after(timeout_of(operation.timeout));
  int rc = MPI_SUCCESS;
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Status status{};
  st->runtime->call([&] {
    rc = is_send ? MPI_Isend(data, count, MPI_BYTE, mpi_peer, tag, st->comm, &request)
                 : MPI_Irecv(data, count, MPI_BYTE, mpi_peer, tag, st->comm, &request);
    if (rc != MPI_SUCCESS) return;
    rc = test_until({&request, 1}, {&status, 1}, deadline);
    if (rc == kExpired && !is_send) {
      // A receive can be withdrawn: the tensor is the caller's again.
      MPI_Cancel(&request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
  });
  std::exception_ptr error;
  if (rc == kExpired) {
    error = std::make_exception_ptr(DistBackendError(
        st->label + ": " + p2p_what(is_send, seq, tensor, peer, tag) + ": Timed out after " +
        format_ms(deadline.timeout()) +
        (is_send ? " (MPI cannot withdraw a send: the tensor may still be read until " + peer_name(peer) +
                       " receives it)"
                 : std::string())));
    if (is_send) st->runtime->track(request, [](int, const MPI_Status&) {});
  } else {
    error = p2p_outcome(*st, rc, status, is_send, seq, tensor, peer, tag);
    if (!error && source) *source = status.MPI_SOURCE;
  }
  mark.ended(error);
  return error;
}

void MpiBackend::blocking_send(const Operation& operation) {
  if (auto error = blocking_p2p(true, operation, next_p2p_seq(), nullptr)) std::rethrow_exception(error);
}

int MpiBackend::blocking_recv(const Operation& operation) {
  int source = -1;
  if (auto error = blocking_p2p(false, operation, next_p2p_seq(), &source)) std::rethrow_exception(error);
  return source;
}

// Point-to-point with a Work: blocking (done when it returns, its outcome
// kept in the Work), or handed to the MPI thread (async_op), which posts it
// and tracks it to completion.
std::shared_ptr<Work> MpiBackend::point_to_point(bool is_send, const Operation& operation) {
  std::shared_ptr<State> st = state_;
  const char* op = is_send ? "send" : "recv";
  const uint64_t seq = next_p2p_seq();
  if (!operation.async_op) {
    int source = -1;
    std::exception_ptr error = blocking_p2p(is_send, operation, seq, is_send ? nullptr : &source);
    auto work = std::make_shared<PendingWork>(op, seq, st->shared_label);
    if (!error && !is_send) work->set_source_rank(source);
    work->finish_unshared(error);
    return work;
  }
  const Tensor& tensor = operation.tensor();
  const int peer = operation.peer, tag = operation.tag;
  auto work = std::make_shared<PendingWork>(op, seq, st->shared_label);
  if (auto e = st->failed_before(op, seq)) {
    work->finish_unshared(e);
    return work;
  }
  const int count = p2p_count(*st, is_send, tensor, peer, tag, seq);
  const int mpi_peer = peer == kAnySource ? MPI_ANY_SOURCE : peer;
  trace::FlightMark mark = trace::claim_mark(operation);
  mark.engine(EngineKind::Mpi);
  // The caller keeps the tensor's memory until the Work completes; the copy
  // here is what an error then names.
  auto finish = [st, is_send, seq, tensor, peer, tag, mark, recorder = mark.hold()](
                    int rc, const MPI_Status& status, PendingWork& w) {
    std::exception_ptr error = p2p_outcome(*st, rc, status, is_send, seq, tensor, peer, tag);
    if (!error && !is_send) w.set_source_rank(status.MPI_SOURCE);
    mark.ended(error);
    w.finish(error);
  };
  void* data = tensor.data();
  if (mark) start_inline(mark);  // issued now, on whichever thread MPI then runs it
  st->runtime->post([st, work, finish, is_send, data, count, mpi_peer, tag] {
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = is_send ? MPI_Isend(data, count, MPI_BYTE, mpi_peer, tag, st->comm, &request)
                           : MPI_Irecv(data, count, MPI_BYTE, mpi_peer, tag, st->comm, &request);
    if (rc != MPI_SUCCESS) {
      finish(rc, MPI_Status{}, *work);
      return;
    }
    st->runtime->track(request, [work, finish](int err, const MPI_Status& status) { finish(err, status, *work); });
  });
  return work;
}

std::shared_ptr<Work> MpiBackend::send(const Operation& operation) { return point_to_point(true, operation); }

std::shared_ptr<Work> MpiBackend::recv(const Operation& operation) { return point_to_point(false, operation); }

std::shared_ptr<Work> MpiBackend::broadcast(const Operation& operation) {
  const Tensor& tensor = operation.tensor();
  void* data = tensor.data();
  const int count = element_count(tensor, "broadcast", state_->label);
  const MPI_Datatype type = datatype_of(tensor.dtype());
  const int root = operation.root;
  return run(
      "broadcast", "MPI_Bcast", {&tensor, 1}, operation,
      [=](MPI_Comm comm) { return MPI_Bcast(data, count, type, root, comm); },
      [=](MPI_Comm comm, MPI_Request* r) { return MPI_Ibcast(data, count, type, root, comm, r); });
}

namespace {
// AVG's division and PREMUL_SUM's factor, after MPI summed.
[[gnu::noinline]] std::function<void()> finalizer_of(ReduceOp op, const Tensor& t, int contributors) {
  return [op, t, contributors] { reduction::finalize(op, t, contributors); };
}
[[gnu::always_inline]] inline std::function<void()> finalizer(ReduceOp op, const Tensor& t, int contributors) {
  if (!reduction::needs_finalize(op)) return nullptr;  // SUM and most others: decided without a call
  return finalizer_of(op, t, contributors);
}
// Copies out of a staging buffer, where the parts went through one.
std::function<void()> unstager(const std::shared_ptr<Layout>& l) {
  if (!l->staged()) return nullptr;
  return [l] { l->unstage(); };
}
// The largest in-place output a blocking reduce_scatter_tensor stages through its thread's kept
// buffer; larger ones allocate per call (what a kept buffer would hold on to is then too much).
constexpr size_t kKeptStageBytes = size_t{64} << 10;
// Whether `a` is `b` shifted by `blocks` of `block_bytes` (a rank's block of a flat tensor).
bool is_block(const void* a, const Tensor& b, int blocks, size_t block_bytes) {
  return a == static_cast<const char*>(b.data()) + static_cast<size_t>(blocks) * block_bytes;
}
}  // namespace

std::shared_ptr<Work> MpiBackend::all_reduce(const Operation& operation) {
  const Tensor& tensor = operation.tensor();
  void* data = tensor.data();
  const int count = element_count(tensor, "all_reduce", state_->label);
  const MPI_Datatype type = datatype_of(tensor.dtype());
  const MPI_Op mop = op_of(operation.reduce_op, tensor.dtype());
  return run(
      "all_reduce", "MPI_Allreduce", {&tensor, 1}, operation,
      [=](MPI_Comm comm) { return MPI_Allreduce(MPI_IN_PLACE, data, count, type, mop, comm); },
      [=](MPI_Comm comm, MPI_Request* r) { return MPI_Iallreduce(MPI_IN_PLACE, data, count, type, mop, comm, r); },
      finalizer(operation.reduce_op, tensor, size()));
}

std::shared_ptr<Work> MpiBackend::reduce(const Operation& operation) {
  const Tensor& tensor = operation.tensor();
  void* data = tensor.data();
  const int count = element_count(tensor, "reduce", state_->label);
  const MPI_Datatype type = datatype_of(tensor.dtype());
  const MPI_Op mop = op_of(operation.reduce_op, tensor.dtype());
  const int root = operation.root;
  const bool am_root = rank() == root;
  // The root reduces in place; the others' tensors are only read. They still
  // pass a receive buffer of the tensor's size: the standard ignores it there,
  // and Open MPI never touches it (its pages are never faulted in), but MPICH
  // 4.0 may. MPICH 4.0 also crashes (memcpy from address -1) reducing in place
  // at a root other than 0 from about 2 KiB on 3 ranks: there the root sends
  // from a copy.
  const bool root_copies = am_root && root != 0 && state_->runtime->is_mpich() && tensor.nbytes() > 0;
  std::shared_ptr<char[]> scratch;
  if ((!am_root || root_copies) && tensor.nbytes() > 0) scratch.reset(new char[tensor.nbytes()]);
  if (root_copies) std::memcpy(scratch.get(), data, tensor.nbytes());
  const void* send = am_root ? (root_copies ? static_cast<const void*>(scratch.get()) : MPI_IN_PLACE) : data;
  void* recv = am_root ? data : scratch.get();
  return run(
      "reduce", "MPI_Reduce", {&tensor, 1}, operation,
      [=](MPI_Comm comm) { return MPI_Reduce(send, recv, count, type, mop, root, comm); },
      [=](MPI_Comm comm, MPI_Request* r) { return MPI_Ireduce(send, recv, count, type, mop, root, comm, r); },
      am_root ? finalizer(operation.reduce_op, tensor, size()) : nullptr, scratch);
}

std::shared_ptr<Work> MpiBackend::barrier(const Operation& operation) {
  return run(
      "barrier", "MPI_Barrier", {}, operation, [](MPI_Comm comm) { return MPI_Barrier(comm); },
      [](MPI_Comm comm, MPI_Request* r) { return MPI_Ibarrier(comm, r); });
}

std::shared_ptr<Work> MpiBackend::all_gather(const Operation& operation) {
  const std::vector<Tensor> outputs(operation.outputs.begin(), operation.outputs.end());
  const Tensor& input = operation.tensor();
  auto out = Layout::of(outputs, "all_gather", state_->label);
  const MPI_Datatype type = datatype_of(input.dtype());
  const void* send = input.data();
  const int send_count = element_count(input, "all_gather", state_->label);
  // This rank's own block already in place: MPI takes it from there.
  if (!out->staged() && input.data() == outputs[rank()].data()) send = MPI_IN_PLACE;
  if (out->equal_in_order())
    return run(
        "all_gather", "MPI_Allgather", outputs, operation,
        [=](MPI_Comm comm) { return MPI_Allgather(send, send_count, type, out->base(), send_count, type, comm); },
        [=](MPI_Comm comm, MPI_Request* r) {
          return MPI_Iallgather(send, send_count, type, out->base(), send_count, type, comm, r);
        },
        unstager(out), out);
  return run(
      "all_gather", "MPI_Allgatherv", outputs, operation,
      [=](MPI_Comm comm) {
        return MPI_Allgatherv(send, send_count, type, out->base(), out->counts(), out->displs(), type, comm);
      },
      [=](MPI_Comm comm, MPI_Request* r) {
        return MPI_Iallgatherv(send, send_count, type, out->base(), out->counts(), out->displs(), type, comm, r);
      },
      unstager(out), out);
}

// The flat form straight to MPI_Allgather: no list of views to make.
std::shared_ptr<Work> MpiBackend::all_gather_into_tensor(const Operation& operation) {
  const Tensor& output = operation.output();
  const Tensor& input = operation.tensor();
  const MPI_Datatype type = datatype_of(input.dtype());
  const int count = element_count(input, "all_gather_into_tensor", state_->label);
  element_count(output, "all_gather_into_tensor", state_->label);
  void* recv = output.data();
  const void* send = is_block(input.data(), output, rank(), input.nbytes()) ? MPI_IN_PLACE : input.data();
  return run(
      "all_gather_into_tensor", "MPI_Allgather", {&output, 1}, operation,
      [=](MPI_Comm comm) { return MPI_Allgather(send, count, type, recv, count, type, comm); },
      [=](MPI_Comm comm, MPI_Request* r) { return MPI_Iallgather(send, count, type, recv, count, type, comm, r); });
}

std::shared_ptr<Work> MpiBackend::gather(const Operation& operation) {
  const std::vector<Tensor> outputs(operation.outputs.begin(), operation.outputs.end());
  const Tensor& input = operation.tensor();
  const int root = operation.root;
  const bool am_root = rank() == root;
  auto out = Layout::of(am_root ? outputs : std::vector<Tensor>{}, "gather", state_->label);
  const MPI_Datatype type = datatype_of(input.dtype());
  const int count = element_count(input, "gather", state_->label);
  const void* send = input.data();
  if (am_root && !out->staged() && input.data() == outputs[root].data()) send = MPI_IN_PLACE;
  // The root's buffer, counts and places; the others pass none.
  void* recv = am_root ? out->base() : nullptr;
  const int* counts = am_root ? out->counts() : nullptr;
  const int* displs = am_root ? out->displs() : nullptr;
  return run(
      "gather", "MPI_Gatherv", outputs, operation,
      [=](MPI_Comm comm) { return MPI_Gatherv(send, count, type, recv, counts, displs, type, root, comm); },
      [=](MPI_Comm comm, MPI_Request* r) {
        return MPI_Igatherv(send, count, type, recv, counts, displs, type, root, comm, r);
      },
      unstager(out), out);
}

std::shared_ptr<Work> MpiBackend::scatter(const Operation& operation) {
  const Tensor& output = operation.output();
  const std::vector<Tensor> inputs(operation.inputs.begin(), operation.inputs.end());
  const int root = operation.root;
  const bool am_root = rank() == root;
  auto in = Layout::of(am_root ? inputs : std::vector<Tensor>{}, "scatter", state_->label);
  in->stage_in();
  const MPI_Datatype type = datatype_of(output.dtype());
  const int count = element_count(output, "scatter", state_->label);
  void* recv = output.data();
  if (am_root && !in->staged() && output.data() == inputs[root].data()) recv = MPI_IN_PLACE;
  const void* send = am_root ? in->base() : nullptr;
  const int* counts = am_root ? in->counts() : nullptr;
  const int* displs = am_root ? in->displs() : nullptr;
  return run(
      "scatter", "MPI_Scatterv", {&output, 1}, operation,
      [=](MPI_Comm comm) { return MPI_Scatterv(send, counts, displs, type, recv, count, type, root, comm); },
      [=](MPI_Comm comm, MPI_Request* r) {
        return MPI_Iscatterv(send, counts, displs, type, recv, count, type, root, comm, r);
      },
      nullptr, in);
}

std::shared_ptr<Work> MpiBackend::reduce_scatter(const Operation& operation) {
  const Tensor& output = operation.output();
  const std::vector<Tensor> inputs(operation.inputs.begin(), operation.inputs.end());
  // The inputs one after another in rank order, apart from the output (MPI
  // reads them while it writes the output): staged otherwise.
  auto in = Layout::of(inputs, "reduce_scatter", state_->label);
  if (!in->equal_in_order() || in->overlaps(output)) in->force_stage();
  in->stage_in();
  const MPI_Datatype type = datatype_of(output.dtype());
  const MPI_Op mop = op_of(operation.reduce_op, output.dtype());
  const int count = element_count(output, "reduce_scatter", state_->label);
  void* recv = output.data();
  void* send = in->base();
  return run(
      "reduce_scatter", "MPI_Reduce_scatter_block", {&output, 1}, operation,
      [=](MPI_Comm comm) { return MPI_Reduce_scatter_block(send, recv, count, type, mop, comm); },
      [=](MPI_Comm comm, MPI_Request* r) { return MPI_Ireduce_scatter_block(send, recv, count, type, mop, comm, r); },
      finalizer(operation.reduce_op, output, size()), in);
}

// The flat form straight to MPI_Reduce_scatter_block. Where the output lies
// inside the input (in place: the rank's block), MPI may not write it while
// it reads the input: the result goes to a buffer of the output's size and is
// copied into the output after (a copy of one block, not of the input).
std::shared_ptr<Work> MpiBackend::reduce_scatter_tensor(const Operation& operation) {
  const Tensor& output = operation.output();
  const Tensor& input = operation.tensor();
  const char* in_begin = static_cast<const char*>(input.data());
  const char* out_begin = static_cast<const char*>(output.data());
  const bool overlaps =
      output.nbytes() > 0 && out_begin < in_begin + input.nbytes() && in_begin < out_begin + output.nbytes();
  const MPI_Datatype type = datatype_of(output.dtype());
  const MPI_Op mop = op_of(operation.reduce_op, output.dtype());
  const int count = element_count(output, "reduce_scatter_tensor", state_->label);
  element_count(input, "reduce_scatter_tensor", state_->label);
  std::function<void()> finish = finalizer(operation.reduce_op, output, size());
  const void* send = input.data();
  if (overlaps && !operation.async_op && !finish && output.nbytes() <= kKeptStageBytes) {
    // In place (the output is a block of the input), blocking, small: the result goes through
    // this thread's kept buffer and is copied out inline, with no allocation per call.
    thread_local std::vector<std::byte> staged;
    if (staged.size() < output.nbytes()) staged.resize(kKeptStageBytes);
    struct CopyBack {
      void* to;
      const void* from;
      size_t bytes;
    } back{output.data(), staged.data(), output.nbytes()};
    void* recv = staged.data();
    return run(
        "reduce_scatter_tensor", "MPI_Reduce_scatter_block", {&output, 1}, operation,
        [=](MPI_Comm comm) { return MPI_Reduce_scatter_block(send, recv, count, type, mop, comm); },
        [=](MPI_Comm comm, MPI_Request* r) { return MPI_Ireduce_scatter_block(send, recv, count, type, mop, comm, r); },
        [b = &back] { std::memcpy(b->to, b->from, b->bytes); }, nullptr);  // runs before run() returns
  }
  std::shared_ptr<std::vector<std::byte>> result;
  void* recv = output.data();
  if (overlaps) {
    result = std::make_shared<std::vector<std::byte>>(output.nbytes());
    recv = result->data();
    finish = [result, output, then = std::move(finish)] {
      std::memcpy(output.data(), result->data(), result->size());
      if (then) then();
    };
  }
  return run(
      "reduce_scatter_tensor", "MPI_Reduce_scatter_block", {&output, 1}, operation,
      [=](MPI_Comm comm) { return MPI_Reduce_scatter_block(send, recv, count, type, mop, comm); },
      [=](MPI_Comm comm, MPI_Request* r) { return MPI_Ireduce_scatter_block(send, recv, count, type, mop, comm, r); },
      std::move(finish), result);
}

std::shared_ptr<Work> MpiBackend::all_to_all(const Operation& operation) {
  const std::vector<Tensor> outputs(operation.outputs.begin(), operation.outputs.end());
  const std::vector<Tensor> inputs(operation.inputs.begin(), operation.inputs.end());
  auto out = Layout::of(outputs, "all_to_all", state_->label);
  auto in = Layout::of(inputs, "all_to_all", state_->label);
  for (const Tensor& o : outputs)
    if (in->overlaps(o)) in->force_stage();
  in->stage_in();
  const MPI_Datatype type = datatype_of(outputs.empty() ? DType::Float32 : outputs[0].dtype());
  auto keep = std::make_shared<std::pair<std::shared_ptr<Layout>, std::shared_ptr<Layout>>>(in, out);
  void* send = in->base();
  void* recv = out->base();
  if (in->equal_in_order() && out->equal_in_order() && in->count(0) == out->count(0)) {
    const int count = in->count(0);
    return run(
        "all_to_all", "MPI_Alltoall", outputs, operation,
        [=](MPI_Comm comm) { return MPI_Alltoall(send, count, type, recv, count, type, comm); },
        [=](MPI_Comm comm, MPI_Request* r) { return MPI_Ialltoall(send, count, type, recv, count, type, comm, r); },
        unstager(out), keep);
  }
  return run(
      "all_to_all", "MPI_Alltoallv", outputs, operation,
      [=](MPI_Comm comm) {
        return MPI_Alltoallv(send, in->counts(), in->displs(), type, recv, out->counts(), out->displs(), type, comm);
      },
      [=](MPI_Comm comm, MPI_Request* r) {
        return MPI_Ialltoallv(send, in->counts(), in->displs(), type, recv, out->counts(), out->displs(), type, comm,
                              r);
      },
      unstager(out), keep);
}

// The flat form straight to MPI_Alltoall (equal splits) or MPI_Alltoallv
// (counts and displacements from the splits), unless output and input share
// bytes: then the list form stages the input.
std::shared_ptr<Work> MpiBackend::all_to_all_single(const Operation& operation) {
  const Tensor& output = operation.output();
  const Tensor& input = operation.tensor();
  const int n = size();
  const char* in_begin = static_cast<const char*>(input.data());
  const char* out_begin = static_cast<const char*>(output.data());
  if (output.nbytes() > 0 && input.nbytes() > 0 && out_begin < in_begin + input.nbytes() &&
      in_begin < out_begin + output.nbytes()) {
    return Backend::all_to_all_single(operation);  // the list form stages the input
  }
  const MPI_Datatype type = datatype_of(output.dtype());
  element_count(output, "all_to_all_single", state_->label);
  element_count(input, "all_to_all_single", state_->label);
  const void* send = input.data();
  void* recv = output.data();
  if (operation.input_split_sizes.empty() && operation.output_split_sizes.empty()) {
    const int count = static_cast<int>(input.numel() / n);
    return run(
        "all_to_all_single", "MPI_Alltoall", {&output, 1}, operation,
        [=](MPI_Comm comm) { return MPI_Alltoall(send, count, type, recv, count, type, comm); },
        [=](MPI_Comm comm, MPI_Request* r) { return MPI_Ialltoall(send, count, type, recv, count, type, comm, r); });
  }
  // send counts, send displacements, receive counts, receive displacements
  auto v = std::make_shared<std::array<std::vector<int>, 4>>();
  for (int i = 0, sent = 0, got = 0; i < n; ++i) {
    (*v)[0].push_back(static_cast<int>(part_elements(input, operation.input_split_sizes, n, i)));
    (*v)[1].push_back(sent);
    sent += (*v)[0].back();
    (*v)[2].push_back(static_cast<int>(part_elements(output, operation.output_split_sizes, n, i)));
    (*v)[3].push_back(got);
    got += (*v)[2].back();
  }
  const int *sc = (*v)[0].data(), *sd = (*v)[1].data(), *rc = (*v)[2].data(), *rd = (*v)[3].data();
  return run(
      "all_to_all_single", "MPI_Alltoallv", {&output, 1}, operation,
      [=](MPI_Comm comm) { return MPI_Alltoallv(send, sc, sd, type, recv, rc, rd, type, comm); },
      [=](MPI_Comm comm, MPI_Request* r) { return MPI_Ialltoallv(send, sc, sd, type, recv, rc, rd, type, comm, r); },
      nullptr, v);
}

// Rank 0 hears from every rank by the deadline, then releases them; a rank
// that does not arrive is named (every such rank with wait_all_ranks).
std::shared_ptr<Work> MpiBackend::monitored_barrier(const Operation& operation) {
  std::unique_lock<SleepingLock> lock(issue_mu_);
  const uint64_t seq = ++seq_;
  std::shared_ptr<State> st = state_;
  auto work = std::make_shared<PendingWork>("monitored_barrier", seq, st->shared_label);
  if (auto e = st->failed_before("monitored_barrier", seq)) {
    work->finish_unshared(e);
    return work;
  }
  const Deadline deadline = Deadline::after(timeout_of(operation.timeout));
  const int n = size();
  // Shared with requests that may outlive this call (a send to rank 0 that
  // timed out cannot be withdrawn).
  auto tokens = std::make_shared<std::vector<char>>(static_cast<size_t>(n) + 1, 1);
  std::string failure;
  st->runtime->call([&] {
    std::vector<MPI_Status> statuses(static_cast<size_t>(std::max(n, 2)));  // one per request of any call below
    if (rank() != 0) {
      std::vector<MPI_Request> requests(2, MPI_REQUEST_NULL);
      MPI_Isend(&(*tokens)[0], 1, MPI_CHAR, 0, 0, st->internal, &requests[0]);
      MPI_Irecv(&(*tokens)[1], 1, MPI_CHAR, 0, 1, st->internal, &requests[1]);
      const int rc = test_until(requests, statuses, deadline);
      if (rc == kExpired) {
        failure = "Rank " + std::to_string(options_.global_ranks.empty() ? rank() : options_.global_ranks[rank()]) +
                  " timed out in monitoredBarrier: rank 0 did not release it within " + format_ms(deadline.timeout());
        if (requests[1] != MPI_REQUEST_NULL) {
          MPI_Cancel(&requests[1]);
          MPI_Wait(&requests[1], MPI_STATUS_IGNORE);
        }
        if (requests[0] != MPI_REQUEST_NULL) st->runtime->track(requests[0], [tokens](int, const MPI_Status&) {});
      } else if (rc != MPI_SUCCESS) {
        failure = "monitored_barrier's messages failed: " + error_string(rc);
      }
      return;
    }
    std::vector<MPI_Request> arrivals(static_cast<size_t>(n), MPI_REQUEST_NULL);
    for (int r = 1; r < n; ++r) MPI_Irecv(&(*tokens)[r], 1, MPI_CHAR, r, 0, st->internal, &arrivals[r]);
    // One deadline for all (not one timeout per rank), so every late rank can be named.
    const bool no_time_left = deadline.timeout().count() <= 0;  // a timeout of 0, as in barrier.cpp
    std::vector<int> missing;
    for (int r = 1; r < n; ++r) {
      std::vector<MPI_Request> one{arrivals[r]};
      const int rc = test_until(one, statuses, deadline);
      arrivals[r] = one[0];
      if (rc != MPI_SUCCESS) {
        missing.push_back(options_.global_ranks.empty() ? r : options_.global_ranks[r]);
        if (!operation.wait_all_ranks) break;
      }
    }
    if (!missing.empty()) {
      failure = monitored_barrier_failure(missing, deadline.timeout(), operation.wait_all_ranks, no_time_left, "");
      for (MPI_Request& r : arrivals)
        if (r != MPI_REQUEST_NULL) {
          MPI_Cancel(&r);
          MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
      return;
    }
    std::vector<MPI_Request> releases(static_cast<size_t>(n - 1), MPI_REQUEST_NULL);
    for (int r = 1; r < n; ++r) MPI_Isend(&(*tokens)[0], 1, MPI_CHAR, r, 1, st->internal, &releases[r - 1]);
    test_until(releases, statuses, Deadline::never());
  });
  std::exception_ptr error;
  if (!failure.empty()) {
    error = st->error("monitored_barrier", seq, failure);
    st->record(error);
  }
  work->finish_unshared(error);
  return work;
}

void register_backend_entry() {
  BackendEntry entry{"mpi",
                     [](const std::shared_ptr<Store>&, int rank, int size, const BackendOptions& options) {
                       return std::make_shared<MpiBackend>(rank, size, options);
                     },
                     {DeviceType::CPU}};
  entry.world_from_mpi = true;
  tdist::register_backend_entry(std::move(entry));
}

}  // namespace tdist::mpi
