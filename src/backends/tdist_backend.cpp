#include "backends/tdist_backend.h"

#include <algorithm>
#include <tuple>

#include "tdist/errors.h"
#include "arena/collectives.h"
#include "backends/call_hint.h"
#include "backends/registry.h"
#include "reduce/reduce.h"
#include "transport/tcp_transport.h"
#include "util/env.h"
#include "util/error_context.h"

namespace tdist {

namespace {

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
class P2PWork final : public Work {
 public:
  P2PWork(bool is_send, uint64_t seq, const Tensor& tensor, int peer, int tag, uint64_t wire_tag,
          std::shared_ptr<TdistBackend::State> state, Deadline deadline)
      : Work(is_send ? "send" : "recv", seq), is_send_(is_send), tensor_(tensor), peer_(peer), tag_(tag),
        request_(is_send ? Request::Kind::Send : Request::Kind::Recv, peer, wire_tag, tensor.data(), tensor.nbytes()),
        state_(std::move(state)), deadline_(deadline) {}

  // Hands the request to the transport; `self` is this Work.
  static void post(const std::shared_ptr<P2PWork>& self) {
    self->state_->transport->post(std::shared_ptr<Request>(self, &self->request_));
  }

  bool is_completed() const override { return request_.done(); }
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
      if (!request_.wait_until(user))
        throw DistBackendError(context() + "Work::wait timed out after " + format_ms(timeout) +
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
      std::rethrow_exception(e);
    }
    return true;
  }

 private:
  std::string context() const { return p2p_context(*state_, is_send_, sequence_number(), tensor_, peer_, tag_); }

  const bool is_send_;
  const Tensor tensor_;  // for the message only: its shape and dtype
  const int peer_;
  const int tag_;
  Request request_;
  std::shared_ptr<TdistBackend::State> state_;
  Deadline deadline_;
};

}  // namespace

std::exception_ptr TdistBackend::State::failure_of(const char* op, uint64_t seq) {
  if (!failed.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  std::string what = seq ? std::string(op) + " #" + std::to_string(seq) : std::string(op);
  return with_context(failure, label + ": " + what + " not started: the group failed earlier: ");
}

void TdistBackend::State::record_failure(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (failure) return;
    failure = e;
    failed.store(true, std::memory_order_release);
  }
  // Make the peers see it now rather than at their own deadline.
  if (arena) arena->abort(label + ": " + error_message(e));
  transport->abort(e);
}

TdistBackend::TdistBackend(const std::shared_ptr<Store>& store, int rank, int size, const BackendOptions& options)
    : Backend(rank, size), options_(options), state_(std::make_shared<State>()) {
  int global = options.global_ranks.empty() ? rank : options.global_ranks[rank];
  state_->label = "rank " + std::to_string(global) + " in group " +
                  (options.group_name.empty() ? std::string("default_pg") : options.group_name);
  state_->shared_label = std::make_shared<const std::string>(state_->label);
  TcpTransportOptions topts{state_->label, options.global_ranks, options.timeout};
  topts.desync = describe_desync;
  state_->transport = TcpTransport::connect(*store, rank, size, topts);
  std::vector<int> globals = options.global_ranks;
  if (globals.empty())
    for (int r = 0; r < size; ++r) globals.push_back(r);
  state_->arena = arena::Arena::setup(*store, *state_->transport, state_->label, globals, options.timeout);
  state_->forced = read_forced_algorithms();
  if (state_->arena) {
    for (OpCode code : {OpCode::Broadcast, OpCode::AllReduce, OpCode::Barrier, OpCode::Reduce, OpCode::AllGather,
                        OpCode::Gather, OpCode::Scatter, OpCode::ReduceScatter, OpCode::AllToAll}) {
      const std::string& forced = state_->forced[static_cast<size_t>(code)];
      in_arena_[static_cast<size_t>(code)] = forced.empty() || forced == "shm";
    }
  }
  auto debug = get_env("TDIST_DEBUG");
  debug_detail_ = debug && *debug == "DETAIL";
}

TdistBackend::~TdistBackend() { shutdown(); }

void TdistBackend::shutdown() {
  auto err = std::make_exception_ptr(DistBackendError(state_->label + ": the process group was destroyed"));
  // Abort first: an operation still running then fails at once instead of
  // holding the queue's thread (and this call) until its deadline.
  if (state_->transport) state_->transport->abort(err);
  // An arena wait notices the abort at its next check; wake it for that now.
  if (state_->arena) state_->arena->wake_all();
  queue_.stop(err);
}

void TdistBackend::check_tensor(const Tensor& t, const char* op) const {
  if (!t.is_cpu())
    throw DistValueError(state_->label + ": " + op + ": the tdist backend takes CPU tensors, got " + t.str());
  if (t.data() == nullptr && t.numel() > 0)
    throw DistValueError(state_->label + ": " + op + ": tensor has no data");
}

void TdistBackend::check_rank(int r, const char* op, const char* what) const {
  if (r < 0 || r >= size())
    throw DistValueError(state_->label + ": " + op + ": invalid " + what + " rank " + std::to_string(r) +
                         " (group size " + std::to_string(size()) + ")");
}

namespace {

// Runs one collective on whichever thread enqueue() chose and finishes its
// Work; `unshared`: the caller's thread, before the Work is returned.
template <typename Body>
void run_collective(TdistBackend::State& state, Work& work, CollectiveCall call, uint64_t seq, Millis timeout,
                    const Body& body, const std::string& signature, bool unshared) {
  auto finish = [&](std::exception_ptr e) { unshared ? work.finish_unshared(std::move(e)) : work.finish(std::move(e)); };
  if (auto failed = state.failure_of(work.op_name().c_str(), seq)) {
    finish(failed);
    return;
  }
  try {
    Deadline deadline = Deadline::after_coarse(timeout);
    if (!signature.empty()) {
      // TDIST_DEBUG=DETAIL: every rank first checks that all called the same collective with
      // the same arguments, and names the ones that did not.
      CollectiveContext check{*state.transport, collective_tag(OpCode::Fingerprint, seq), deadline};
      check_fingerprint(check, signature);
    }
    CollectiveContext ctx{*state.transport, collective_tag(call.code, seq, call.signature), deadline, &state.forced};
    body(ctx);
    finish(nullptr);
  } catch (...) {
    // The message prefix is built only on failure: nothing extra on the hot path.
    auto e = with_context(std::current_exception(),
                          state.label + ": " + work.op_name() + " #" + std::to_string(seq) + " failed: ");
    state.record_failure(e);
    finish(e);
  }
}

}  // namespace

std::shared_ptr<Work> TdistBackend::take_work(const char* op, uint64_t seq, std::span<const Tensor> result,
                                             bool blocking) {
  // use_count() == 1: only spare_ holds it, so no other thread can reach it;
  // the fence pairs with the release of the caller's last reference.
  if (blocking && spare_ && spare_.use_count() == 1) {
    std::atomic_thread_fence(std::memory_order_acquire);
    spare_->reuse(op, seq, result);
    return spare_;
  }
  auto work = std::make_shared<Work>(op, seq, state_->shared_label);
  work->set_result(std::vector<Tensor>(result.begin(), result.end()));
  // Kept only if holding on to it holds no memory: a spare keeps its result
  // until the next blocking call, and an adopted DLPack tensor the user
  // dropped meanwhile must be freed.
  if (blocking && std::none_of(result.begin(), result.end(), [](const Tensor& t) { return t.keeps_memory_alive(); }))
    spare_ = work;
  return work;
}

template <typename Body, typename... Args>
std::shared_ptr<Work> TdistBackend::enqueue(CollectiveCall code, const char* op, std::span<const Tensor> result,
                                            std::string signature, Body body, const Args&... args) {
  std::unique_lock<SpinLock> issue(issue_mu_);
  uint64_t seq = ++seq_;
  const bool blocking = BlockingCallHint::active();
  auto work = take_work(op, seq, result, blocking);
  if (auto failed = state_->failure_of(op, seq)) {
    work->finish_unshared(failed);
    return work;
  }
  // Deciding under issue_mu_ keeps issue order: no later call can overtake.
  if (blocking && queue_.claim_inline()) {
    issue.unlock();
    // The arguments are used where they are: no copies, no std::function. A
    // blocking call's latency is mostly this path.
    run_collective(*state_, *work, code, seq, options_.timeout,
                   [&](CollectiveContext& ctx) { body(ctx, args...); }, signature, /*unshared=*/true);
    queue_.release_inline();
  } else {
    queue_.push(work, [work, state = state_, code, seq, timeout = options_.timeout, signature = std::move(signature),
                       body, saved = std::make_tuple(args...)] {
      auto call = [&](CollectiveContext& ctx) { std::apply([&](const auto&... a) { body(ctx, a...); }, saved); };
      run_collective(*state, *work, code, seq, timeout, call, signature, /*unshared=*/false);
    });
  }
  return work;
}

uint64_t TdistBackend::start_point_to_point(bool is_send, const Tensor& tensor, int peer) {
  const char* op = is_send ? "send" : "recv";
  check_tensor(tensor, op);
  if (is_send || peer != kAnySource) check_rank(peer, op, is_send ? "destination" : "source");
  if (peer == rank()) throw DistValueError(state_->label + ": " + op + ": the peer is this rank itself");
  uint64_t seq = p2p_seq_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (auto failed = state_->failure_of(op)) std::rethrow_exception(failed);
  return seq;
}

std::shared_ptr<Work> TdistBackend::point_to_point(bool is_send, const Tensor& tensor, int peer, int tag) {
  const uint64_t seq = start_point_to_point(is_send, tensor, peer);
  auto work = std::make_shared<P2PWork>(is_send, seq, tensor, peer, tag, p2p_tag(tag), state_,
                                       Deadline::after_coarse(options_.timeout));
  P2PWork::post(work);
  return work;
}

// A blocking send or receive needs no Work: its request lives on this stack,
// handed to the transport through a pointer that owns nothing (no allocation,
// no reference counting). The transport lets go of a request when it
// completes it, and this returns only once it is complete (an abort, by
// whichever thread, completes every request).
int TdistBackend::blocking_point_to_point(bool is_send, const Tensor& tensor, int peer, int tag) {
  const uint64_t seq = start_point_to_point(is_send, tensor, peer);
  Request request(is_send ? Request::Kind::Send : Request::Kind::Recv, peer, p2p_tag(tag), tensor.data(),
                  tensor.nbytes());
  const Deadline deadline = Deadline::after_coarse(options_.timeout);
  Transport& transport = *state_->transport;
  transport.post(std::shared_ptr<Request>(std::shared_ptr<void>(), &request));
  try {
    transport.wait(request, deadline, /*abort_on_error=*/false);
  } catch (...) {
    if (!request.done()) request.wait_until(Deadline::never());  // the abort under way completes it
    auto e = with_context(std::current_exception(), p2p_context(*state_, is_send, seq, tensor, peer, tag));
    state_->record_failure(e);  // as P2PWork::wait
    std::rethrow_exception(e);
  }
  return request.source();
}

std::shared_ptr<Work> TdistBackend::send(const Tensor& tensor, int dst, int tag) {
  return point_to_point(true, tensor, dst, tag);
}

std::shared_ptr<Work> TdistBackend::recv(const Tensor& tensor, int src, int tag) {
  return point_to_point(false, tensor, src, tag);
}

void TdistBackend::blocking_send(const Tensor& tensor, int dst, int tag) {
  blocking_point_to_point(true, tensor, dst, tag);
}

int TdistBackend::blocking_recv(const Tensor& tensor, int src, int tag) {
  return blocking_point_to_point(false, tensor, src, tag);
}

std::shared_ptr<Work> TdistBackend::broadcast(const Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast");
  check_rank(root, "broadcast", "root");
  return enqueue(
      CollectiveCall(OpCode::Broadcast, tensor.dtype(), root), "broadcast", {&tensor, 1},
      debug_detail_ ? std::string("broadcast root=" + std::to_string(root) + " " + tensor.str()) : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const Tensor& t, int root) {
        a ? arena::broadcast(*a, ctx, t, root) : tdist::broadcast(ctx, t, root);
      },
      arena_for(OpCode::Broadcast), tensor, root);
}

std::shared_ptr<Work> TdistBackend::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce");
  check_reduce_op(op, tensor.dtype(), "all_reduce");
  return enqueue(
      CollectiveCall(OpCode::AllReduce, tensor.dtype(), op), "all_reduce", {&tensor, 1},
      debug_detail_ ? std::string("all_reduce op=" + std::string(op.name()) + " " + tensor.str()) : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const Tensor& t, ReduceOp op) {
        a ? arena::all_reduce(*a, ctx, t, op) : tdist::all_reduce(ctx, t, op);
      },
      arena_for(OpCode::AllReduce), tensor, op);
}

std::shared_ptr<Work> TdistBackend::barrier() {
  return enqueue(
      OpCode::Barrier, "barrier", {}, debug_detail_ ? std::string("barrier") : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a) { a ? arena::barrier(*a, ctx) : barrier_dissemination(ctx); },
      arena_for(OpCode::Barrier));
}

namespace {
std::string shapes(const std::vector<Tensor>& list) {
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list[i].str();
  return out + "]";
}
}  // namespace

void TdistBackend::invalid(const char* op, const std::string& what) const {
  throw DistValueError(state_->label + ": " + op + ": " + what);
}

void TdistBackend::check_list(const std::vector<Tensor>& list, DType dtype, int count, const char* op,
                              const char* what) const {
  if (count >= 0 && static_cast<int>(list.size()) != count)
    invalid(op, std::string(what) + " has " + std::to_string(list.size()) + " tensors, expected " +
                    std::to_string(count) + " (one per rank)");
  for (size_t i = 0; i < list.size(); ++i) {
    check_tensor(list[i], op);
    if (list[i].dtype() != dtype)
      invalid(op, std::string(what) + "[" + std::to_string(i) + "] is " + list[i].str() + ", expected dtype " +
                      std::string(dtype_name(dtype)));
  }
}

void TdistBackend::check_same(const Tensor& a, const Tensor& b, const char* op, const char* what) const {
  if (a.dtype() != b.dtype() || a.numel() != b.numel())
    invalid(op, std::string(what) + ": " + a.str() + " and " + b.str() + " differ in dtype or number of elements");
}

namespace {
std::vector<Tensor> blocks(const Tensor& t, int n) {
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(n));
  int64_t each = n > 0 ? t.numel() / n : 0;
  for (int i = 0; i < n; ++i) out.push_back(t.slice(i * each, each));
  return out;
}
}  // namespace

std::shared_ptr<Work> TdistBackend::reduce(const Tensor& tensor, int root, ReduceOp op) {
  check_tensor(tensor, "reduce");
  check_rank(root, "reduce", "destination");
  check_reduce_op(op, tensor.dtype(), "reduce");
  return enqueue(
      CollectiveCall(OpCode::Reduce, tensor.dtype(), op, root), "reduce", {&tensor, 1},
      debug_detail_ ? "reduce root=" + std::to_string(root) + " op=" + std::string(op.name()) + " " + tensor.str()
                    : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const Tensor& t, int root, ReduceOp op) {
        a ? arena::reduce(*a, ctx, t, root, op) : tdist::reduce(ctx, t, root, op);
      },
      arena_for(OpCode::Reduce), tensor, root, op);
}

std::shared_ptr<Work> TdistBackend::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  check_tensor(input, "all_gather");
  check_list(outputs, input.dtype(), size(), "all_gather", "output list");
  if (outputs[rank()].numel() != input.numel())
    invalid("all_gather", "output[" + std::to_string(rank()) + "] " + outputs[rank()].str() +
                              " does not match this rank's input " + input.str());
  return enqueue(
      CollectiveCall(OpCode::AllGather, input.dtype()), "all_gather", outputs,
      debug_detail_ ? std::string("all_gather outputs=" + shapes(outputs)) : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const std::vector<Tensor>& outs, const Tensor& in) {
        a ? arena::all_gather(*a, ctx, outs, in) : tdist::all_gather(ctx, outs, in);
      },
      arena_for(OpCode::AllGather), outputs, input);
}

std::shared_ptr<Work> TdistBackend::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  check_tensor(input, "all_gather_into_tensor");
  check_tensor(output, "all_gather_into_tensor");
  if (output.dtype() != input.dtype() || output.numel() != input.numel() * size())
    invalid("all_gather_into_tensor", "output " + output.str() + " must hold world size (" +
                                          std::to_string(size()) + ") x input " + input.str());
  auto outputs = blocks(output, size());
  return enqueue(
      CollectiveCall(OpCode::AllGather, input.dtype()), "all_gather_into_tensor", {&output, 1},
      debug_detail_ ? std::string("all_gather_into_tensor " + input.str()) : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const std::vector<Tensor>& outs, const Tensor& in) {
        a ? arena::all_gather(*a, ctx, outs, in) : tdist::all_gather(ctx, outs, in);
      },
      arena_for(OpCode::AllGather), outputs, input);
}

std::shared_ptr<Work> TdistBackend::gather(const std::vector<Tensor>& outputs, const Tensor& input, int root) {
  check_tensor(input, "gather");
  check_rank(root, "gather", "destination");
  if (rank() == root) {
    check_list(outputs, input.dtype(), size(), "gather", "gather_list");
    for (int i = 0; i < size(); ++i) check_same(outputs[i], input, "gather", "gather_list entry and input");
  } else if (!outputs.empty()) {
    invalid("gather", "gather_list must be empty on ranks other than the destination " + std::to_string(root) +
                          ", got " + std::to_string(outputs.size()) + " tensors");
  }
  return enqueue(
      CollectiveCall(OpCode::Gather, input.dtype(), root), "gather", outputs,
      debug_detail_ ? std::string("gather root=" + std::to_string(root) + " " + input.str()) : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const std::vector<Tensor>& outs, const Tensor& in, int root) {
        a ? arena::gather(*a, ctx, outs, in, root) : tdist::gather(ctx, outs, in, root);
      },
      arena_for(OpCode::Gather), outputs, input, root);
}

std::shared_ptr<Work> TdistBackend::scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root) {
  check_tensor(output, "scatter");
  check_rank(root, "scatter", "source");
  if (rank() == root) {
    check_list(inputs, output.dtype(), size(), "scatter", "scatter_list");
    for (int i = 0; i < size(); ++i) check_same(inputs[i], output, "scatter", "scatter_list entry and output");
  } else if (!inputs.empty()) {
    invalid("scatter", "scatter_list must be empty on ranks other than the source " + std::to_string(root) +
                           ", got " + std::to_string(inputs.size()) + " tensors");
  }
  return enqueue(
      CollectiveCall(OpCode::Scatter, output.dtype(), root), "scatter", {&output, 1},
      debug_detail_ ? std::string("scatter root=" + std::to_string(root) + " " + output.str()) : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const Tensor& out, const std::vector<Tensor>& ins, int root) {
        a ? arena::scatter(*a, ctx, out, ins, root) : tdist::scatter(ctx, out, ins, root);
      },
      arena_for(OpCode::Scatter), output, inputs, root);
}

std::shared_ptr<Work> TdistBackend::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                                   ReduceOp op) {
  check_tensor(output, "reduce_scatter");
  check_reduce_op(op, output.dtype(), "reduce_scatter");
  check_list(inputs, output.dtype(), size(), "reduce_scatter", "input list");
  if (inputs[rank()].numel() != output.numel())
    invalid("reduce_scatter", "input[" + std::to_string(rank()) + "] " + inputs[rank()].str() +
                                  " does not match the output " + output.str());
  return enqueue(
      CollectiveCall(OpCode::ReduceScatter, output.dtype(), op), "reduce_scatter", {&output, 1},
      debug_detail_ ? "reduce_scatter op=" + std::string(op.name()) + " inputs=" + shapes(inputs) : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const Tensor& out, const std::vector<Tensor>& ins, ReduceOp op) {
        a ? arena::reduce_scatter(*a, ctx, out, ins, op) : tdist::reduce_scatter(ctx, out, ins, op);
      },
      arena_for(OpCode::ReduceScatter), output, inputs, op);
}

std::shared_ptr<Work> TdistBackend::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_tensor(output, "reduce_scatter_tensor");
  check_tensor(input, "reduce_scatter_tensor");
  check_reduce_op(op, output.dtype(), "reduce_scatter_tensor");
  if (output.dtype() != input.dtype() || input.numel() != output.numel() * size())
    invalid("reduce_scatter_tensor", "input " + input.str() + " must hold world size (" + std::to_string(size()) +
                                         ") x output " + output.str());
  auto inputs = blocks(input, size());
  return enqueue(
      CollectiveCall(OpCode::ReduceScatter, output.dtype(), op), "reduce_scatter_tensor", {&output, 1},
      debug_detail_ ? "reduce_scatter_tensor op=" + std::string(op.name()) + " " + output.str() : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const Tensor& out, const std::vector<Tensor>& ins, ReduceOp op) {
        a ? arena::reduce_scatter(*a, ctx, out, ins, op) : tdist::reduce_scatter(ctx, out, ins, op);
      },
      arena_for(OpCode::ReduceScatter), output, inputs, op);
}

std::shared_ptr<Work> TdistBackend::all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  if (inputs.empty()) invalid("all_to_all", "empty input list");
  check_list(inputs, inputs[0].dtype(), size(), "all_to_all", "input list");
  check_list(outputs, inputs[0].dtype(), size(), "all_to_all", "output list");
  if (outputs[rank()].numel() != inputs[rank()].numel())
    invalid("all_to_all", "output[" + std::to_string(rank()) + "] " + outputs[rank()].str() + " and input[" +
                              std::to_string(rank()) + "] " + inputs[rank()].str() + " differ in size");
  return enqueue(
      CollectiveCall(OpCode::AllToAll, inputs.at(0).dtype()), "all_to_all", outputs,
      debug_detail_ ? "all_to_all " + std::string(dtype_name(inputs[0].dtype())) : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const std::vector<Tensor>& outs, const std::vector<Tensor>& ins) {
        a ? arena::all_to_all(*a, ctx, outs, ins) : tdist::all_to_all(ctx, outs, ins);
      },
      arena_for(OpCode::AllToAll), outputs, inputs);
}

namespace {
// Splits (in first-dimension rows) -> one view per rank.
std::vector<Tensor> split_rows(const Tensor& t, const std::vector<int64_t>& splits, int n, const char* which,
                               const std::function<void(const std::string&)>& fail) {
  int64_t rows = t.shape().empty() ? t.numel() : t.shape()[0];
  int64_t row = rows > 0 ? t.numel() / rows : 0;
  std::vector<int64_t> s = splits;
  if (s.empty()) {
    if (rows % n != 0)
      fail(std::string(which) + " " + t.str() + ": " + std::to_string(rows) + " rows do not split evenly over " +
           std::to_string(n) + " ranks; pass split sizes");
    s.assign(n, rows / n);
  }
  if (static_cast<int>(s.size()) != n)
    fail(std::string(which) + " split sizes have " + std::to_string(s.size()) + " entries, expected " +
         std::to_string(n));
  int64_t sum = 0;
  for (int64_t x : s) {
    if (x < 0) fail(std::string(which) + " split sizes contain a negative entry");
    sum += x;
  }
  if (sum != rows)
    fail(std::string(which) + " split sizes add up to " + std::to_string(sum) + " rows, the tensor " + t.str() +
         " has " + std::to_string(rows));
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t x : s) {
    out.push_back(t.slice(at * row, x * row));
    at += x;
  }
  return out;
}
}  // namespace

std::shared_ptr<Work> TdistBackend::all_to_all_single(const Tensor& output, const Tensor& input,
                                                      const std::vector<int64_t>& output_split_sizes,
                                                      const std::vector<int64_t>& input_split_sizes) {
  check_tensor(output, "all_to_all_single");
  check_tensor(input, "all_to_all_single");
  if (output.dtype() != input.dtype())
    invalid("all_to_all_single", "output " + output.str() + " and input " + input.str() + " differ in dtype");
  auto fail = [&](const std::string& what) { invalid("all_to_all_single", what); };
  auto outs = split_rows(output, output_split_sizes, size(), "output", fail);
  auto ins = split_rows(input, input_split_sizes, size(), "input", fail);
  if (outs[rank()].numel() != ins[rank()].numel())
    invalid("all_to_all_single", "this rank's own input split (" + std::to_string(ins[rank()].numel()) +
                                     " elements) and output split (" + std::to_string(outs[rank()].numel()) +
                                     " elements) differ");
  return enqueue(
      CollectiveCall(OpCode::AllToAll, output.dtype()), "all_to_all_single", {&output, 1},
      debug_detail_ ? "all_to_all_single " + std::string(dtype_name(input.dtype())) : std::string(),
      [](CollectiveContext& ctx, arena::Arena* a, const std::vector<Tensor>& outs, const std::vector<Tensor>& ins) {
        a ? arena::all_to_all(*a, ctx, outs, ins) : tdist::all_to_all(ctx, outs, ins);
      },
      arena_for(OpCode::AllToAll), outs, ins);
}

std::shared_ptr<Work> TdistBackend::monitored_barrier(std::chrono::milliseconds timeout, bool wait_all_ranks) {
  const Millis limit = timeout.count() > 0 ? timeout : options_.timeout;  // 0: the group's timeout
  return enqueue(
      OpCode::MonitoredBarrier, "monitored_barrier", {}, debug_detail_ ? std::string("monitored_barrier") : std::string(),
      [](CollectiveContext& ctx, Millis limit, bool wait_all_ranks) {
        CollectiveContext bounded{ctx.transport, ctx.tag, Deadline::after(limit)};
        tdist::monitored_barrier(bounded, wait_all_ranks);
      },
      limit, wait_all_ranks);
}

void register_tdist_backend() {
  register_backend(
      "tdist",
      [](const std::shared_ptr<Store>& store, int rank, int size, const BackendOptions& options) {
        return std::make_shared<TdistBackend>(store, rank, size, options);
      },
      {DeviceType::CPU});
}

}  // namespace tdist
