#include "backends/tdist_backend.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "tdist/errors.h"
#include "algorithms/scratch.h"
#include "backends/device_path/device_p2p_work.h"
#include "backends/device_path/staging.h"
#include "backends/backend_registry.h"
#include "engines/engine_builder.h"
#include "tensor/split.h"
#include "tensor/view_list.h"
#include "trace/flight_recorder.h"
#include "reduce/reduction_kernels.h"
#include "transport/communicator.h"
#include "transport/mesh.h"
#include "util/settings.h"
#include "util/error_context.h"
#include "work/device_work.h"

namespace tdist {

namespace {

// The lists of views this thread's list and flat collectives hand their
// engines (tensor/view_list.h), two for all_to_all's outputs and inputs. A
// blocking call's body uses them where they are, an async call copies them
// into its queued item; nothing a call runs on this thread issues another
// backend call before its body is done with them. Reached through a plain
// pointer: a thread_local object with a destructor costs a guard per access.
thread_local ViewList* t_views = nullptr;
ViewList* views_of_this_thread() {
  if (t_views != nullptr) [[likely]]
    return t_views;
  thread_local std::unique_ptr<ViewList[]> lists;  // freed when the thread ends
  lists = std::make_unique<ViewList[]>(2);
  return t_views = lists.get();
}
// Scoped to a call: lends the thread's lists, then lets go of views that keep
// a caller's memory alive.
class ViewsInUse {
 public:
  ViewsInUse() : lists_(views_of_this_thread()) {}
  ViewsInUse(const ViewsInUse&) = delete;
  ViewsInUse& operator=(const ViewsInUse&) = delete;
  ~ViewsInUse() {
    lists_[0].release();
    lists_[1].release();
  }
  ViewList& operator[](int i) const { return lists_[i]; }

 private:
  ViewList* lists_;
};

// "rank 0 in group default_pg: send #3 of int32[4] to rank 1 at 127.0.0.1:4567 (tag 0) failed: "
// Built only when an error is reported: a send of a few bytes over shared
// memory takes a few hundred nanoseconds, and the text would cost more.
std::string p2p_context(const TdistBackend::State& state, bool is_send, uint64_t seq, const Tensor& tensor, int peer,
                        int tag) {
  return state.label + ": " + (is_send ? "send" : "recv") + " #" + std::to_string(seq) + " of " + tensor.str() +
         (is_send ? " to " : " from ") + state.transport->describe_peer(peer) + " (tag " + std::to_string(tag) +
         ") failed: ";
}

// The Work of a point-to-point operation: completes when its transport request
// does; waiting enforces the group timeout counted from when it was issued.
// The transport's request lives inside it (one allocation per operation): the
// transport holds it through an aliasing pointer, which keeps the Work alive
// until the request is done or the transport aborted.
class P2PWork final : public PendingWork {
 public:
  P2PWork(bool is_send, uint64_t seq, const Tensor& tensor, int peer, int tag, uint64_t wire_tag,
          std::shared_ptr<TdistBackend::State> state, Deadline deadline, trace::FlightMark mark)
      : PendingWork(is_send ? "send" : "recv", seq), is_send_(is_send), tensor_(tensor), peer_(peer), tag_(tag),
        request_(is_send ? Request::Kind::Send : Request::Kind::Recv, peer, wire_tag, tensor.data(), tensor.nbytes()),
        state_(std::move(state)), deadline_(deadline), mark_(mark), recorder_(mark.hold()) {}

  // Hands the request to the transport; `self` is this Work.
  static void post(const std::shared_ptr<P2PWork>& self) {
    self->mark_.started_inline(now_ticks());
    self->state_->transport->post(std::shared_ptr<Request>(self, &self->request_));
  }

  bool is_completed() const override {
    if (!request_.done()) return false;
    note_end();
    return true;
  }
  // The request says it, not PendingWork's state (never finished here): the
  // plugin's list of works in flight asks this after every call.
  bool completed_now() const override { return is_completed(); }
  bool is_success() const override { return request_.done() && !request_.error(); }
  std::exception_ptr exception() const override {
    if (!request_.done() || !request_.error()) return nullptr;
    return with_context(request_.error(), context());
  }
  int source_rank() const override { return request_.done() ? request_.source() : -1; }
  std::shared_ptr<Future> get_future() override {
    throw DistBackendError(context() + "get_future is not supported for point-to-point operations (as in Gloo)");
  }

  bool wait(std::chrono::milliseconds timeout) override {
    Deadline user = timeout == kNoTimeout ? Deadline::never() : Deadline::after(timeout);
    if (user.at() < deadline_.at()) {
      if (!state_->transport->wait_a_while(request_, user))
        throw DistBackendError(context() + "Work::wait: Timed out after " + format_ms(timeout) +
                               " (the operation is still in progress)");
    }
    try {
      state_->transport->wait(request_, deadline_, /*abort_on_error=*/false);
    } catch (...) {
      // Like a collective's, a failed point-to-point operation fails the
      // group and tells its peers why (MPI's default error handler, Gloo and
      // NCCL end the communicator too): a size mismatch discarded its
      // message, so the ranks no longer agree on what was exchanged.
      auto e = with_context(std::current_exception(), context());
      state_->record_failure(e);
      note_end();
      std::rethrow_exception(e);
    }
    note_end();
    return true;
  }

 private:
  // The flight recorder learns of the end when the caller does (a test or a wait).
  void note_end() const {
    if (mark_ && !end_noted_.exchange(true, std::memory_order_relaxed)) mark_.ended(exception());
  }
  std::string context() const { return p2p_context(*state_, is_send_, sequence_number(), tensor_, peer_, tag_); }

  const bool is_send_;
  const Tensor tensor_;  // for the message only: its shape and dtype
  const int peer_;
  const int tag_;
  Request request_;
  std::shared_ptr<TdistBackend::State> state_;
  Deadline deadline_;
  trace::FlightMark mark_;
  std::shared_ptr<trace::FlightRecorder> recorder_;  // mark_'s, alive as long as this work
  mutable std::atomic<bool> end_noted_{false};
};

}  // namespace

// The id of a new group's communicator, the same on every member: the
// group's rank 0 counts it in the default group's store (ids are never
// reused within a job, so a late message of a destroyed group can never
// match a later one's receive) and tells the others through the group's
// store; the last reader deletes the keys.
uint32_t TdistBackend::agree_comm_id(Store& group_store, Store& links_store, int rank, int size, Millis timeout,
                                     const std::string& key, int count) {
  const std::string read_key = key + "_read";
  if (rank == 0) {
    const int64_t last = links_store.add("comm_ids", count);
    const int64_t first = last - count + 1;
    if (first <= 0 || last > int64_t{UINT32_MAX})
      throw DistBackendError("the store's communicator counter 'comm_ids' holds " + std::to_string(last) +
                             ", outside 1..2^32-1");
    if (size > 1) group_store.set(key, std::to_string(first));
    return static_cast<uint32_t>(first);
  }
  group_store.wait({key}, timeout);
  const std::string text = group_store.get(key);
  uint32_t id = 0;
  try {
    id = static_cast<uint32_t>(std::stoul(text));
  } catch (const std::exception&) {
    throw DistBackendError("the store's key '" + key + "' holds '" + text + "', not a communicator id");
  }
  if (group_store.add(read_key, 1) == size - 1) {
    try {
      group_store.delete_key(key);
      group_store.delete_key(read_key);
    } catch (const DistError&) {
      // FileStore cannot delete: its keys stay, as torch's do.
    }
  }
  return id;
}

void TdistBackend::SharedLinks::note_failure(const std::exception_ptr& e) {
  std::lock_guard<std::mutex> lock(mu);
  if (!first_failure) first_failure = e;
}

std::exception_ptr TdistBackend::SharedLinks::cause() {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (first_failure) return first_failure;
  }
  return transport->aborted();
}

std::exception_ptr TdistBackend::State::failure_found(const char* op, uint64_t seq) {
  if (!failed.load(std::memory_order_acquire)) {
    // Another group sharing the connections failed: so does this one, with
    // its cause (a shared-memory collective would not notice by itself).
    if (!links || !links->transport->stopped()) return nullptr;
    record_failure(links->cause());
  }
  std::lock_guard<std::mutex> lock(mu);
  std::string what = seq ? std::string(op) + " #" + std::to_string(seq) : std::string(op);
  return with_context(failure, label + ": " + what + " not started: the group failed earlier: ");
}

// A group over shared connections fails alone: its communicator aborts and
// tells the members (transport/communicator.h). What failed the connections
// themselves (a lost peer, a timeout) aborted them already, in the
// transport's wait; the default group's transport is the connections, so its
// failure fails every group of the process, as torch's abort of the default
// group aborts them all.
void TdistBackend::State::record_failure(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (failure) return;
    failure = e;
    failed.store(true, std::memory_order_release);
  }
  // The cause the other groups report when the connections fail with it.
  if (links && (links->transport.get() == transport.get() || links->transport->stopped())) links->note_failure(e);
  // Make the peers see it now rather than at their own deadline, in words
  // that name this rank once (most causes already start with its label).
  std::string why = error_message(e);
  if (why.rfind(label + ":", 0) != 0) why = label + ": " + why;
  // This host's ranks first, through the shared memory (no connection
  // closes): say_alive below may wait up to its bound for a store across a
  // link that is down, and a host-mate waiting for this rank would time out
  // meanwhile, naming no cause (a step among hosts ends that much before the
  // operation's deadline so that they learn it: hierarchical_engine.cpp).
  if (engines) engines->abort_segments(why);
  // Before the peers can see this rank's connections fail: it lives
  // (failure_agreement.h). Not for a group that fails alone over connections
  // that stay up (a communicator's own abort): no rank is in question then.
  if (agreement && (!links || links->transport.get() == transport.get() || links->transport->stopped()))
    agreement->say_alive();
  if (engines) engines->abort(why);
  transport->abort(e);
}

TdistBackend::TdistBackend(const std::shared_ptr<Store>& store, int rank, int size, const BackendOptions& options)
    : Backend(rank, size), options_(options), state_(std::make_shared<State>()) {
  int global = options.global_ranks.empty() ? rank : options.global_ranks[rank];
  state_->label = "rank " + std::to_string(global) + " in group " +
                  (options.group_name.empty() ? std::string("default_pg") : options.group_name);
  device_path_ = std::make_shared<DevicePath>(state_->label);  // touches no device until used
  ipc_exchange_ = std::make_shared<IpcExchange>(store, rank, size, state_->label);
  cuda_path_ = ipc::path_setting();
  state_->shared_label = std::make_shared<const std::string>(state_->label);
  std::vector<int> globals = options.global_ranks;
  if (globals.empty())
    for (int r = 0; r < size; ++r) globals.push_back(r);
  auto* parent = dynamic_cast<TdistBackend*>(options.parent.get());
  const bool sharing = settings::get<"TDIST_SHARE_CONNECTIONS">();
  const std::shared_ptr<SharedLinks> parent_links = parent ? parent->state_->links : nullptr;
  if (sharing && parent_links && !parent_links->transport->stopped()) {
    // A group of the default group's ranks: a communicator over its connections.
    const uint32_t comm = agree_comm_id(*store, *parent_links->store, rank, size, options.timeout);
    state_->transport = std::make_shared<Communicator>(parent_links->transport, comm, globals, rank, options.group_name);
    state_->links = parent_links;
    state_->agreement = parent->state_->agreement;
    state_->evidence = parent->state_->evidence;
    state_->probe = parent->state_->probe;
    state_->mesh_ranks = globals;
  } else {
    MeshOptions topts{state_->label, options.global_ranks, options.timeout};
    topts.members_gone = options.members_gone;
    topts.desync = describe_desync;
    topts.describe_tag = describe_tag;
    std::shared_ptr<Mesh> own = connect_mesh(*store, rank, size, topts);
    std::vector<int> launch = options.launch_ranks.empty() ? globals : options.launch_ranks;
    state_->agreement =
        std::make_shared<FailureAgreement>(store, rank, size, std::move(launch), options.death_records, state_->label);
    own->set_before_abort([agreement = std::weak_ptr<FailureAgreement>(state_->agreement)] {
      if (auto a = agreement.lock()) a->say_alive();
    });
    state_->evidence = [mesh = std::weak_ptr<Mesh>(own), state = std::weak_ptr<State>(state_)](int peer,
                                                                                                 bool first_round) {
      // The socket's word counts only until this rank gave up (the first
      // round): after that every connection is closed by this side anyway.
      auto m = mesh.lock();
      if (first_round && m && m->peer_vanished(peer)) return true;
      auto st = state.lock();
      return st && st->engines && st->engines->process_gone(peer);
    };
    state_->probe = [mesh = std::weak_ptr<Mesh>(own)](const std::vector<int>& peers) {
      // Long enough for a loaded host to answer; a host that does not is no proof anyway.
      auto m = mesh.lock();
      return m ? m->peers_refusing(peers, Millis(200)) : std::vector<int>{};
    };
    for (int r = 0; r < size; ++r) state_->mesh_ranks.push_back(r);
    bool numbered_globally = true;  // group rank == global rank: the default group
    for (int r = 0; r < size; ++r) numbered_globally = numbered_globally && globals[r] == r;
    if (numbered_globally && !options.parent) {
      state_->links = std::make_shared<SharedLinks>();
      state_->links->transport = own;
      state_->links->store = store;
    }
    state_->transport = std::move(own);
  }
  const std::string name = options.group_name.empty() ? std::string("default_pg") : options.group_name;
  GroupShape shape{store, state_->transport, state_->label, name, globals, options.timeout, nullptr, nullptr};
  if (const std::shared_ptr<SharedLinks> links = state_->links) {
    // The hierarchical engine's communicators: over the shared connections,
    // with ids agreed through the default group's store.
    const Millis timeout = options.timeout;
    shape.agree_ids = [store, links, rank, size, timeout](const std::string& key, int count) {
      return agree_comm_id(*store, *links->store, rank, size, timeout, key, count);
    };
    shape.open = [links, name](uint32_t id, const std::vector<int>& members, int member) -> std::shared_ptr<Transport> {
      return std::make_shared<Communicator>(links->transport, id, members, member, name);
    };
  }
  state_->engines = EngineBuilder::build(shape);
  engines_ = state_->engines.get();
  debug_detail_ = settings::debug_level() == settings::Debug::Detail;
  async_defer_bytes_ = static_cast<size_t>(settings::get<"TDIST_ASYNC_DEFER_BYTES">());
}

TdistBackend::~TdistBackend() { shutdown(); }

void TdistBackend::shutdown() {
  auto err = std::make_exception_ptr(DistBackendError(state_->label + ": the process group was destroyed"));
  // Close first: an operation still running then fails at once instead of
  // holding the queue's thread (and this call) until its deadline. A group's
  // own transport is aborted; a communicator closes alone (what of its group
  // is under way is dropped first: a receive under way could write into a
  // buffer its owner frees).
  state_->engines->close(err);
  if (state_->transport) state_->transport->close(err);
  // Say goodbye in the shared-memory segments too (GroupEngines::leave).
  state_->engines->leave();
  queue_->stop(err);
}

void TdistBackend::abort(std::exception_ptr cause) {
  // The group's own failure path: the running collective and the peers see it now.
  state_->record_failure(std::move(cause));
  state_->engines->wake_all();
}

std::vector<int> TdistBackend::failed_ranks(Millis silence) {
  // The agreement is about the connections (the mesh this group talks over):
  // only their failure can mean that a rank died.
  Transport& mesh = state_->links ? *state_->links->transport : *state_->transport;
  state_->failure_of("failed_ranks");  // records a failure of the shared connections
  if (!mesh.aborted()) {
    // A group aborted alone (a member's abort, ranks out of step) lost nobody.
    if (state_->failed.load(std::memory_order_acquire)) return {};
    // Healthy here. Where the peers already ask, the connections failed for
    // them: they fail here too, and this rank answers with them.
    if (!state_->agreement->under_way()) return {};
    auto cause = std::make_exception_ptr(
        DistBackendError(state_->label + ": the group failed on other ranks (they asked which ranks failed)"));
    mesh.abort(cause);
    state_->record_failure(cause);
  }
  const std::vector<int> dead = state_->agreement->decide(state_->evidence, state_->probe, silence);
  std::vector<int> out;
  for (int r = 0; r < size(); ++r)
    if (std::binary_search(dead.begin(), dead.end(), state_->mesh_ranks[r])) out.push_back(r);
  return out;
}

void TdistBackend::shrink_abandoned() { state_->agreement->next_round(); }

std::vector<int> TdistBackend::ranks_proven_dead(const std::vector<int>& ranks) {
  std::vector<int> mesh_ranks;
  for (int r : ranks)
    if (r >= 0 && r < size()) mesh_ranks.push_back(state_->mesh_ranks[r]);
  const std::vector<int> dead = state_->agreement->proven_dead(mesh_ranks, state_->evidence, state_->probe);
  std::vector<int> out;
  for (int r : ranks)
    if (r >= 0 && r < size() && std::find(dead.begin(), dead.end(), state_->mesh_ranks[r]) != dead.end())
      out.push_back(r);
  return out;
}

namespace {

size_t result_bytes(std::span<const Tensor> result) {
  size_t total = 0;
  for (const Tensor& t : result) total += t.nbytes();
  return total;
}

// Starts `mark` and makes the operation's deadline with one clock read: the
// counter where the entry wants a precise time or ran from the queue, else
// the coarse clock that a deadline reads anyway (trace/flight_recorder.h).
Deadline start_clock(const trace::FlightMark& mark, Millis timeout, bool inline_start) {
  if (mark && (mark.precise() || !inline_start)) {
    const uint64_t now = now_ticks();
    inline_start ? mark.started_inline(now) : mark.started(now);
    return Deadline::after_ticks(now, timeout);
  }
  int64_t coarse_ns;
  const Deadline deadline = Deadline::after_coarse(timeout, coarse_ns);
  mark.started_inline_coarse(coarse_ns);
  return deadline;
}

// Runs one collective on whichever thread enqueue() chose and finishes its
// Work; `unshared`: the caller's thread, before the Work is returned.
template <typename Body>
void run_collective(TdistBackend::State& state, PendingWork& work, CollectiveCall call, uint64_t seq, Millis timeout,
                    const Body& body, const std::string& signature, bool unshared, const trace::FlightMark& mark,
                    const Decision& decision) {
  auto finish = [&](std::exception_ptr e) { unshared ? work.finish_unshared(std::move(e)) : work.finish(std::move(e)); };
  if (auto failed = state.failure_of(work.op_name().c_str(), seq)) {
    mark.ended(failed);
    finish(failed);
    return;
  }
  const Deadline deadline = start_clock(mark, timeout, unshared);
  try {
    if (!signature.empty()) {
      // TDIST_DEBUG=DETAIL: every rank first checks that all called the same collective with
      // the same arguments, and names the ones that did not.
      CollectiveContext check{*state.transport, collective_tag(OpCode::Fingerprint, seq), deadline};
      check_fingerprint(check, signature);
    }
    CollectiveContext ctx{*state.transport, collective_tag(call.code, seq, call.signature), deadline,
                          &state.engines->forced(), &state.engines->placement(), false, decision};
    body(ctx);
    mark.ended(nullptr, decision.algorithm_name);
    finish(nullptr);
  } catch (...) {
    // The message prefix is built only on failure: nothing extra on the hot path.
    auto e = with_context(std::current_exception(),
                          state.label + ": " + work.op_name() + " #" + std::to_string(seq) + " failed: ");
    state.record_failure(e);
    mark.ended(e);
    finish(e);
  }
}

// The decision among a collective's arguments (an EngineCall), for its
// context and the flight recorder; undecided where it has none (a call that
// decides per step, as all_reduce_coalesced).
inline Decision decision_of() { return Decision{}; }
template <typename... Rest>
Decision decision_of(const EngineCall& call, const Rest&...) {
  return call.decision;
}
template <typename T, typename... Rest>
Decision decision_of(const T&, const Rest&... rest) {
  return decision_of(rest...);
}

}  // namespace

template <typename Body, typename... Args>
std::shared_ptr<Work> TdistBackend::enqueue(CollectiveCall code, const Operation& operation,
                                            std::span<const Tensor> result, int seqs, std::string signature,
                                            Body body, const Args&... args) {
  // One device-type test per call on the CPU path (a list's first tensors
  // until one is on a device; the front checked they agree).
  if (const Tensor* on_device = staging::first_device_tensor(args...))
    return enqueue_on_device(code, operation, result, seqs, std::move(signature), body, *on_device, args...);
  const char* op = operation.name();
  const Millis timeout = timeout_of(operation.timeout);
  const bool blocking = !operation.async_op;
  // A rank blocked here may be what a peer needs for an operation this
  // process deferred in another group (work_queue.h: Deferred starts).
  if (blocking) WorkQueue::start_deferred_elsewhere(queue_.get());
  std::unique_lock<SpinLock> issue(issue_mu_);
  const uint64_t seq = seq_ + 1;
  seq_ += static_cast<uint64_t>(seqs);
  auto work = spare_.take(op, seq, result, blocking, state_->shared_label);
  trace::FlightMark mark = trace::claim_mark(operation);
  const Decision decision = decision_of(args...);
  if (mark) mark.engine(decision.engine);
  if (auto failed = state_->failure_of(op, seq)) {
    mark.ended(failed);
    work->finish_unshared(failed);
    return work;
  }
  // Deciding under issue_mu_ keeps issue order: no later call can overtake.
  if (blocking && queue_->claim_inline()) {
    issue.unlock();
    // The arguments are used where they are: no copies, no std::function. A
    // blocking call's latency is mostly this path.
    run_collective(*state_, *work, code, seq, timeout,
                   [&](CollectiveContext& ctx) { body(ctx, args...); }, signature, /*unshared=*/true, mark, decision);
    queue_->release_inline();
  } else {
    mark.queued(mark ? now_ticks() : 0);
    queue_->push(work, [work, state = state_, code, seq, timeout, signature = std::move(signature),
                       body, saved = std::make_tuple(args...), mark, recorder = mark.hold(), decision] {
      auto call = [&](CollectiveContext& ctx) { std::apply([&](const auto&... a) { body(ctx, a...); }, saved); };
      run_collective(*state, *work, code, seq, timeout, call, signature, /*unshared=*/false, mark, decision);
    }, /*any_thread=*/true, /*deferrable=*/!blocking && result_bytes(result) <= async_defer_bytes_);
  }
  return work;
}

// A device operation runs on the queue's thread even when blocking: the
// caller only orders its stream after it (DeviceWork::wait). Its tensors are
// checked here, on the caller's thread, so a wrong device is the caller's error.
template <typename Body, typename... Args>
std::shared_ptr<Work> TdistBackend::enqueue_on_device(CollectiveCall code, const Operation& operation,
                                                      std::span<const Tensor> result, int seqs,
                                                      std::string signature, Body body, const Tensor& any,
                                                      const Args&... args) {
  const char* op = operation.name();
  const Millis timeout = timeout_of(operation.timeout);
  DevicePath& path = *device_path_;
  const int device = path.device_of(any, op);
  device::Runtime& rt = path.runtime(op);
  DevicePath::Streams& streams = path.streams(device);
  // The IPC path where every rank is on this host and it serves the
  // operation; the choice depends only on what every rank sees alike (the
  // operation, its sizes, the placement, the setting).
  bool over_ipc = false;
  if (engines_->placement().hosts == 1 && size() > 1 && cuda_path_ != ipc::PathChoice::Staged) {
    const ipc::Plan plan = ipc::plan(size(), args...);
    if (plan.serves && (cuda_path_ == ipc::PathChoice::Ipc || plan.bytes >= ipc::kMinBytes)) {
      over_ipc = true;
      seqs = 1 + plan.barriers;  // one per host barrier, for its tag
    }
  }
  size_t chunks = 1;
  if constexpr (staging::kOneTensor<Args...>) {
    if (!over_ipc &&
        (code.code == OpCode::AllReduce || code.code == OpCode::Broadcast || code.code == OpCode::Reduce)) {
      chunks = staging::chunks_of(any.nbytes());
      seqs = static_cast<int>(chunks);
    }
  }
  // What the body needs from the device runtime is set up here, on the caller's thread, before
  // its stream can wait on this operation's host word: an allocation may serialize with the
  // device's streams, and the queue thread that sets the word must never wait for them.
  if (over_ipc) {
    try {
      ipc_exchange_->ensure(rt, device, Deadline::after(timeout));
    } catch (...) {
      std::rethrow_exception(with_context(std::current_exception(), state_->label + ": " + op + ": "));
    }
  } else {
    path.reserve(staging::scratch_bytes(chunks, args...));
  }
  std::unique_lock<SpinLock> issue(issue_mu_);
  const uint64_t seq = seq_ + 1;
  seq_ += static_cast<uint64_t>(seqs);
  auto work = std::make_shared<DeviceWork>(op, seq, state_->shared_label, rt, path.events(), device, streams.host_word,
                                           static_cast<uint32_t>(seq), device_path_);
  work->set_result(std::vector<Tensor>(result.begin(), result.end()));
  trace::FlightMark mark = trace::claim_mark(operation);
  const Decision decision = decision_of(args...);
  if (mark) mark.engine(decision.engine);
  if (auto failed = state_->failure_of(op, seq)) {
    mark.ended(failed);
    work->finish_unshared(failed);
    work->signal_host_word();
    return work;
  }
  // The operation comes after what the caller queued on its stream so far.
  rt.record(work->issued(), rt.current_stream(device));
  mark.queued(mark ? now_ticks() : 0);
  queue_->push(work, [work, state = state_, path = device_path_, exchange = ipc_exchange_, engines = engines_,
                     over_ipc, code, seq, timeout, decision,
                     signature = std::move(signature), body, saved = std::make_tuple(args...),
                     results = std::vector<Tensor>(result.begin(), result.end()), chunks, mark,
                     recorder = mark.hold(), signal = signal_host_word_at_end(work)] {
    auto call = [&](CollectiveContext& ctx) {
      std::apply(
          [&](const auto&... a) {
            if (over_ipc) {
              device::Runtime& rt = path->runtime("ipc");
              const int device = work->device();
              DevicePath::Streams& s = path->streams(device);
              rt.set_device(device);
              rt.stream_wait(s.in, work->issued());
              exchange->ensure(rt, device, ctx.deadline);
              ipc::Call step{rt, s, *exchange, *work, ctx, *engines->call(OpCode::Barrier, {}).engine};
              ipc::run(step, a...);
              rt.record(work->done(), s.in);
              rt.synchronize(work->done());
              return;
            }
            if constexpr (staging::kOneTensor<Args...>) {
              if (chunks > 1) {
                staging::run_staged_in_chunks(*path, *work, ctx, code.code, body, a...);
                return;
              }
            }
            staging::run_staged(*path, *work, ctx, results, body, a...);
          },
          saved);
    };
    run_collective(*state, *work, code, seq, timeout, call, signature, /*unshared=*/false, mark, decision);
  }, /*any_thread=*/false);  // its waiters wait for the device's stream, not for this to run
  return work;
}

uint64_t TdistBackend::start_point_to_point(bool is_send) {
  const char* op = is_send ? "send" : "recv";
  // The peer may wait for an operation this process deferred (as enqueue).
  WorkQueue::start_deferred_elsewhere(nullptr);
  uint64_t seq = p2p_seq_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (auto failed = state_->failure_of(op)) std::rethrow_exception(failed);
  return seq;
}

std::shared_ptr<Work> TdistBackend::device_point_to_point(const Operation& op) {
  const bool is_send = op.kind == OpKind::Send;
  const Tensor& tensor = op.tensor();
  DevicePath& path = *device_path_;
  const int device = path.device_of(tensor, op.name());
  device::Runtime& rt = path.runtime(op.name());
  DevicePath::Streams& s = path.streams(device);
  rt.set_device(device);
  // Staging waits for the caller's stream as it is now: a send reads what the
  // caller wrote before, a receive's copy-out overwrites nothing it still uses.
  device::EventHandle issued = path.events().take(device);
  rt.record(issued, rt.current_stream(device));
  rt.stream_wait(s.p2p, issued);
  path.events().give(device, issued);
  DevicePath::Lease host = path.scratch(tensor.nbytes());
  Tensor on_host(host.get(), tensor.dtype(), tensor.shape());
  if (is_send && tensor.nbytes() != 0) {
    device::EventHandle copied = path.events().take(device);
    rt.copy(host.get(), tensor.data(), tensor.nbytes(), s.p2p);
    rt.record(copied, s.p2p);
    rt.synchronize(copied);
    path.events().give(device, copied);
  }
  auto inner = point_to_point(op, on_host);
  return std::make_shared<DeviceP2PWork>(std::move(inner), std::move(host), device_path_, rt, device,
                                         is_send ? Tensor() : tensor);
}

std::shared_ptr<Work> TdistBackend::point_to_point(const Operation& op, const Tensor& tensor) {
  if (!tensor.is_cpu()) return device_point_to_point(op);
  const bool is_send = op.kind == OpKind::Send;
  const uint64_t seq = start_point_to_point(is_send);
  auto work = std::make_shared<P2PWork>(is_send, seq, tensor, op.peer, op.tag, p2p_tag(op.tag), state_,
                                       Deadline::after_coarse(timeout_of(op.timeout)), trace::claim_mark(op));
  P2PWork::post(work);
  return work;
}

// A blocking send or receive needs no Work: its request lives on this stack,
// handed to the transport through a pointer that owns nothing (no allocation,
// no reference counting). The transport lets go of a request when it
// completes it, and this returns only once it is complete (an abort, by
// whichever thread, completes every request).
int TdistBackend::blocking_point_to_point(const Operation& op) {
  const Tensor& tensor = op.tensor();
  if (!tensor.is_cpu()) {
    auto work = device_point_to_point(op);
    work->wait();
    return work->source_rank();
  }
  const bool is_send = op.kind == OpKind::Send;
  const uint64_t seq = start_point_to_point(is_send);
  const trace::FlightMark mark = trace::claim_mark(op);
  const Deadline deadline = start_clock(mark, timeout_of(op.timeout), /*inline_start=*/true);
  Request request(is_send ? Request::Kind::Send : Request::Kind::Recv, op.peer, p2p_tag(op.tag), tensor.data(),
                  tensor.nbytes());
  Transport& transport = *state_->transport;
  transport.post(std::shared_ptr<Request>(std::shared_ptr<void>(), &request));
  try {
    transport.wait(request, deadline, /*abort_on_error=*/false);
  } catch (...) {
    if (!request.done()) request.wait_until(Deadline::never());  // the abort under way completes it
    auto e = with_context(std::current_exception(), p2p_context(*state_, is_send, seq, tensor, op.peer, op.tag));
    state_->record_failure(e);  // as P2PWork::wait
    mark.ended(e);
    std::rethrow_exception(e);
  }
  mark.ended(nullptr);
  return request.source();
}

std::shared_ptr<Work> TdistBackend::send(const Operation& op) { return point_to_point(op, op.tensor()); }

std::shared_ptr<Work> TdistBackend::recv(const Operation& op) { return point_to_point(op, op.tensor()); }

void TdistBackend::blocking_send(const Operation& op) { blocking_point_to_point(op); }

int TdistBackend::blocking_recv(const Operation& op) { return blocking_point_to_point(op); }

std::shared_ptr<Work> TdistBackend::broadcast(const Operation& op) {
  const Tensor& tensor = op.tensor();
  const int root = op.root;
  return enqueue(
      CollectiveCall(OpCode::Broadcast, tensor.dtype(), root), op, op.inputs, 1,
      debug_detail_ ? std::string("broadcast root=" + std::to_string(root) + " " + tensor.str()) : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const Tensor& t, int root) { e.engine->broadcast(ctx, t, root); },
      engine_for(OpCode::Broadcast, {tensor.nbytes(), static_cast<size_t>(tensor.numel())}), tensor, root);
}

std::shared_ptr<Work> TdistBackend::all_reduce(const Operation& operation) {
  const Tensor& tensor = operation.tensor();
  const ReduceOp op = operation.reduce_op;
  return enqueue(
      CollectiveCall(OpCode::AllReduce, tensor.dtype(), op), operation, operation.inputs, 1,
      debug_detail_ ? std::string("all_reduce op=" + std::string(op.name()) + " " + tensor.str()) : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const Tensor& t, ReduceOp op) { e.engine->all_reduce(ctx, t, op); },
      engine_for(OpCode::AllReduce, {tensor.nbytes(), static_cast<size_t>(tensor.numel())}), tensor, op);
}

std::shared_ptr<Work> TdistBackend::barrier(const Operation& op) {
  return enqueue(
      OpCode::Barrier, op, {}, 1, debug_detail_ ? std::string("barrier") : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e) { e.engine->barrier(ctx); },
      engine_for(OpCode::Barrier, {}));
}

namespace {
size_t total_bytes(std::span<const Tensor> list) {
  size_t total = 0;
  for (const Tensor& t : list) total += t.nbytes();
  return total;
}

// Every block of the list has one size (the selector's equal_blocks).
bool equal_sizes(std::span<const Tensor> list) {
  for (const Tensor& t : list)
    if (t.nbytes() != list[0].nbytes()) return false;
  return true;
}

std::string shapes(std::span<const Tensor> list) {
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list[i].str();
  return out + "]";
}
}  // namespace

namespace {

// all_reduce_coalesced: tensors below kInPlaceBytes are packed, in list
// order, into buffers of at most kPackBytes, each reduced as one all_reduce
// (one latency for many small tensors, as Gloo's flattened buffer); larger
// ones are reduced where they are (copying them in and out would cost more
// than the latency it saves). The measurements: docs/algorithms.md.
constexpr size_t kInPlaceBytes = 32 * 1024;
constexpr size_t kPackBytes = 4 << 20;

// One all_reduce of a coalesced call: a tensor in place, or several packed.
struct CoalescedStep {
  std::vector<size_t> members;  // indices into the call's tensors
  size_t bytes = 0;
  bool packed = false;
};

std::vector<CoalescedStep> plan_coalesced(std::span<const Tensor> tensors) {
  std::vector<CoalescedStep> steps;
  CoalescedStep pack{.members = {}, .bytes = 0, .packed = true};
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t bytes = tensors[i].nbytes();
    if (bytes == 0) continue;  // nothing to reduce
    if (bytes >= kInPlaceBytes) {
      steps.push_back(CoalescedStep{{i}, bytes, false});
      continue;
    }
    if (pack.bytes + bytes > kPackBytes) {
      steps.push_back(std::move(pack));
      pack = CoalescedStep{.members = {}, .bytes = 0, .packed = true};
    }
    pack.members.push_back(i);
    pack.bytes += bytes;
  }
  // A pack of one tensor is that tensor reduced in place.
  if (pack.members.size() == 1) pack.packed = false;
  if (!pack.members.empty()) steps.push_back(std::move(pack));
  return steps;
}

}  // namespace

std::shared_ptr<Work> TdistBackend::all_reduce_coalesced(const Operation& operation) {
  const ReduceOp op = operation.reduce_op;
  const std::vector<Tensor> tensors(operation.inputs.begin(), operation.inputs.end());
  const DType dtype = tensors.at(0).dtype();
  std::vector<CoalescedStep> steps = plan_coalesced(tensors);
  return enqueue(
      CollectiveCall(OpCode::AllReduce, dtype, op), operation, operation.inputs,
      std::max<int>(1, static_cast<int>(steps.size())),
      debug_detail_ ? "all_reduce_coalesced op=" + std::string(op.name()) + " " + shapes(tensors) : std::string(),
      [](CollectiveContext& ctx, const GroupEngines* engines, const std::vector<Tensor>& ts, ReduceOp op, DType dtype,
         const std::vector<CoalescedStep>& steps) {
        // Step k is the collective of sequence number first + k (enqueue took them all).
        const uint64_t first = sequence_of(ctx.tag);
        const uint16_t signature = signature_of(ctx.tag);
        for (size_t k = 0; k < steps.size(); ++k) {
          const CoalescedStep& step = steps[k];
          const EngineCall call = engines->call(OpCode::AllReduce, {step.bytes, step.bytes / dtype_size(dtype)});
          CollectiveContext sub{ctx.transport, collective_tag(OpCode::AllReduce, first + k, signature), ctx.deadline,
                                ctx.forced, ctx.placement, false, call.decision};
          Engine& engine = *call.engine;
          if (!step.packed) {
            engine.all_reduce(sub, ts[step.members[0]], op);
            continue;
          }
          Scratch buffer(step.bytes);
          char* at = buffer.get();
          for (size_t i : step.members) {
            std::memcpy(at, ts[i].data(), ts[i].nbytes());
            at += ts[i].nbytes();
          }
          const int64_t count = static_cast<int64_t>(step.bytes / dtype_size(dtype));
          engine.all_reduce(sub, Tensor(buffer.get(), dtype, {count}), op);
          at = buffer.get();
          for (size_t i : step.members) {
            std::memcpy(ts[i].data(), at, ts[i].nbytes());
            at += ts[i].nbytes();
          }
        }
      },
      engines_, tensors, op, dtype, steps);
}

std::shared_ptr<Work> TdistBackend::reduce(const Operation& operation) {
  const Tensor& tensor = operation.tensor();
  const int root = operation.root;
  const ReduceOp op = operation.reduce_op;
  return enqueue(
      CollectiveCall(OpCode::Reduce, tensor.dtype(), op, root), operation, operation.inputs, 1,
      debug_detail_ ? "reduce root=" + std::to_string(root) + " op=" + std::string(op.name()) + " " + tensor.str()
                    : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const Tensor& t, int root, ReduceOp op) { e.engine->reduce(ctx, t, root, op); },
      engine_for(OpCode::Reduce, {tensor.nbytes(), static_cast<size_t>(tensor.numel())}), tensor, root, op);
}

std::shared_ptr<Work> TdistBackend::all_gather(const Operation& op) {
  const Tensor& input = op.tensor();
  const ViewsInUse views;
  const std::vector<Tensor>& outputs = views[0].copy(op.outputs);
  return enqueue(
      CollectiveCall(OpCode::AllGather, input.dtype()), op, op.outputs, 1,
      debug_detail_ ? std::string("all_gather outputs=" + shapes(outputs)) : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const std::vector<Tensor>& outs, const Tensor& in) { e.engine->all_gather(ctx, outs, in); },
      engine_for(OpCode::AllGather, {total_bytes(outputs), 0, equal_sizes(outputs)}), outputs, input);
}

std::shared_ptr<Work> TdistBackend::all_gather_into_tensor(const Operation& op) {
  const Tensor& input = op.tensor();
  const Tensor& output = op.output();
  const ViewsInUse views;
  const std::vector<Tensor>& outputs = views[0].blocks(output, size());
  return enqueue(
      CollectiveCall(OpCode::AllGather, input.dtype()), op, op.outputs, 1,
      debug_detail_ ? std::string("all_gather_into_tensor " + input.str()) : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const std::vector<Tensor>& outs, const Tensor& in) { e.engine->all_gather(ctx, outs, in); },
      engine_for(OpCode::AllGather, {output.nbytes(), 0, equal_sizes(outputs)}), outputs, input);
}

std::shared_ptr<Work> TdistBackend::gather(const Operation& op) {
  const Tensor& input = op.tensor();
  const ViewsInUse views;
  const std::vector<Tensor>& outputs = views[0].copy(op.outputs);
  const int root = op.root;
  return enqueue(
      CollectiveCall(OpCode::Gather, input.dtype(), root), op, op.outputs, 1,
      debug_detail_ ? std::string("gather root=" + std::to_string(root) + " " + input.str()) : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const std::vector<Tensor>& outs, const Tensor& in, int root) { e.engine->gather(ctx, outs, in, root); },
      engine_for(OpCode::Gather, {input.nbytes()}), outputs, input, root);
}

std::shared_ptr<Work> TdistBackend::scatter(const Operation& op) {
  const Tensor& output = op.output();
  const ViewsInUse views;
  const std::vector<Tensor>& inputs = views[0].copy(op.inputs);
  const int root = op.root;
  return enqueue(
      CollectiveCall(OpCode::Scatter, output.dtype(), root), op, op.outputs, 1,
      debug_detail_ ? std::string("scatter root=" + std::to_string(root) + " " + output.str()) : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const Tensor& out, const std::vector<Tensor>& ins, int root) { e.engine->scatter(ctx, out, ins, root); },
      engine_for(OpCode::Scatter, {output.nbytes()}), output, inputs, root);
}

std::shared_ptr<Work> TdistBackend::reduce_scatter(const Operation& operation) {
  const Tensor& output = operation.output();
  const ViewsInUse views;
  const std::vector<Tensor>& inputs = views[0].copy(operation.inputs);
  const ReduceOp op = operation.reduce_op;
  return enqueue(
      CollectiveCall(OpCode::ReduceScatter, output.dtype(), op), operation, operation.outputs, 1,
      debug_detail_ ? "reduce_scatter op=" + std::string(op.name()) + " inputs=" + shapes(inputs) : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const Tensor& out, const std::vector<Tensor>& ins, ReduceOp op) { e.engine->reduce_scatter(ctx, out, ins, op); },
      engine_for(OpCode::ReduceScatter, {total_bytes(inputs), 0, equal_sizes(inputs)}), output, inputs, op);
}

std::shared_ptr<Work> TdistBackend::reduce_scatter_tensor(const Operation& operation) {
  const Tensor& output = operation.output();
  const Tensor& input = operation.tensor();
  const ReduceOp op = operation.reduce_op;
  const ViewsInUse views;
  const std::vector<Tensor>& inputs = views[0].blocks(input, size());
  return enqueue(
      CollectiveCall(OpCode::ReduceScatter, output.dtype(), op), operation, operation.outputs, 1,
      debug_detail_ ? "reduce_scatter_tensor op=" + std::string(op.name()) + " " + output.str() : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const Tensor& out, const std::vector<Tensor>& ins, ReduceOp op) { e.engine->reduce_scatter(ctx, out, ins, op); },
      engine_for(OpCode::ReduceScatter, {input.nbytes(), 0, equal_sizes(inputs)}), output, inputs, op);
}

std::shared_ptr<Work> TdistBackend::all_to_all(const Operation& op) {
  const ViewsInUse views;
  const std::vector<Tensor>& outputs = views[0].copy(op.outputs);
  const std::vector<Tensor>& inputs = views[1].copy(op.inputs);
  return enqueue(
      CollectiveCall(OpCode::AllToAll, inputs.at(0).dtype()), op, op.outputs, 1,
      debug_detail_ ? "all_to_all " + std::string(dtype_name(inputs[0].dtype())) : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const std::vector<Tensor>& outs, const std::vector<Tensor>& ins) { e.engine->all_to_all(ctx, outs, ins); },
      engine_for(OpCode::AllToAll, {inputs.at(0).nbytes(), 0, /*equal_blocks=*/false}), outputs, inputs);
}

std::shared_ptr<Work> TdistBackend::all_to_all_single(const Operation& op) {
  const Tensor& output = op.output();
  const Tensor& input = op.tensor();
  const ViewsInUse views;
  const std::vector<Tensor>& outs = views[0].rows(output, op.output_split_sizes, size());
  const std::vector<Tensor>& ins = views[1].rows(input, op.input_split_sizes, size());
  return enqueue(
      CollectiveCall(OpCode::AllToAll, output.dtype()), op, op.outputs, 1,
      debug_detail_ ? "all_to_all_single " + std::string(dtype_name(input.dtype())) : std::string(),
      [](CollectiveContext& ctx, const EngineCall& e, const std::vector<Tensor>& outs, const std::vector<Tensor>& ins) { e.engine->all_to_all(ctx, outs, ins); },
      engine_for(OpCode::AllToAll, {ins.at(0).nbytes(), 0, /*equal_blocks=*/false,
                                    /*even_split=*/op.input_split_sizes.empty() && op.output_split_sizes.empty()}),
      outs, ins);
}

std::shared_ptr<Work> TdistBackend::monitored_barrier(const Operation& op) {
  const Millis limit = timeout_of(op.timeout);
  const bool wait_all_ranks = op.wait_all_ranks;
  // Blocking, under the group's deadline: `limit` bounds only the wait for the ranks.
  Operation blocking = op;
  blocking.timeout = kGroupTimeout;
  blocking.async_op = false;
  return enqueue(
      OpCode::MonitoredBarrier, blocking, {}, 1, debug_detail_ ? std::string("monitored_barrier") : std::string(),
      [](CollectiveContext& ctx, Millis limit, bool wait_all_ranks) {
        CollectiveContext bounded{ctx.transport, ctx.tag, Deadline::after(limit)};
        algorithms::monitored_barrier(bounded, wait_all_ranks);
      },
      limit, wait_all_ranks);
}

void register_tdist_backend() {
  register_backend(
      "tdist",
      [](const std::shared_ptr<Store>& store, int rank, int size, const BackendOptions& options) {
        return std::make_shared<TdistBackend>(store, rank, size, options);
      },
      {DeviceType::CPU, DeviceType::CUDA});
}

}  // namespace tdist
