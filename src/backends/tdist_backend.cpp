#include "backends/tdist_backend.h"

#include "tdist/errors.h"
#include "backends/registry.h"
#include "reduce/reduce.h"
#include "transport/tcp_transport.h"
#include "util/error_context.h"

namespace tdist {

namespace {

// The Work of a point-to-point operation: completes when its transport request
// does; waiting enforces the group timeout counted from when it was issued.
class P2PWork final : public Work {
 public:
  P2PWork(std::string op, uint64_t seq, std::shared_ptr<Request> request,
          std::shared_ptr<TdistBackend::State> state, Deadline deadline, std::string context)
      : Work(std::move(op), seq), request_(std::move(request)), state_(std::move(state)),
        deadline_(deadline), context_(std::move(context)) {}

  bool is_completed() const override { return request_->done(); }
  bool is_success() const override { return request_->done() && !request_->error(); }
  std::exception_ptr exception() const override {
    if (!request_->done() || !request_->error()) return nullptr;
    return with_context(request_->error(), context_);
  }
  int source_rank() const override { return request_->done() ? request_->source() : -1; }

  bool wait(std::chrono::milliseconds timeout) override {
    Deadline user = timeout == kNoTimeout ? Deadline::never() : Deadline::after(timeout);
    if (user.at() < deadline_.at()) {
      if (!request_->wait_until(user))
        throw DistBackendError(context_ + "Work::wait timed out after " + format_ms(timeout) +
                               " (the operation is still in progress)");
    }
    try {
      state_->transport->wait(*request_, deadline_);
    } catch (...) {
      auto e = with_context(std::current_exception(), context_);
      // A timeout or a lost connection breaks the group; a size mismatch
      // discarded its message cleanly and leaves the group usable.
      if (state_->transport->aborted()) state_->record_failure(e);
      std::rethrow_exception(e);
    }
    return true;
  }

 private:
  std::shared_ptr<Request> request_;
  std::shared_ptr<TdistBackend::State> state_;
  Deadline deadline_;
  std::string context_;
};

}  // namespace

std::exception_ptr TdistBackend::State::failure_of(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu);
  if (!failure) return nullptr;
  return with_context(failure, label + ": " + what + " not started: the group failed earlier: ");
}

void TdistBackend::State::record_failure(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (failure) return;
    failure = e;
  }
  // Make the peers see it now rather than at their own deadline.
  transport->abort(e);
}

TdistBackend::TdistBackend(const std::shared_ptr<Store>& store, int rank, int size, const BackendOptions& options)
    : Backend(rank, size), options_(options), state_(std::make_shared<State>()) {
  int global = options.global_ranks.empty() ? rank : options.global_ranks[rank];
  state_->label = "rank " + std::to_string(global) + " in group " +
                  (options.group_name.empty() ? std::string("default_pg") : options.group_name);
  TcpTransportOptions topts{state_->label, options.global_ranks, options.timeout};
  state_->transport = TcpTransport::connect(*store, rank, size, topts);
}

TdistBackend::~TdistBackend() { shutdown(); }

void TdistBackend::shutdown() {
  auto err = std::make_exception_ptr(DistBackendError(state_->label + ": the process group was destroyed"));
  queue_.stop(err);
  if (state_->transport) state_->transport->abort(err);
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

std::shared_ptr<Work> TdistBackend::enqueue(OpCode code, const char* op,
                                            std::function<void(CollectiveContext&)> body) {
  std::lock_guard<std::mutex> issue(issue_mu_);
  uint64_t seq = ++seq_;
  auto work = std::make_shared<Work>(op, seq);
  std::string context = state_->label + ": " + op + " #" + std::to_string(seq) + " failed: ";
  if (auto failed = state_->failure_of(std::string(op) + " #" + std::to_string(seq))) {
    work->finish(failed);
    return work;
  }
  auto state = state_;
  Millis timeout = options_.timeout;
  queue_.push(work, [work, state, code, seq, timeout, context, body = std::move(body)] {
    if (auto failed = state->failure_of(work->op_name() + " #" + std::to_string(seq))) {
      work->finish(failed);
      return;
    }
    try {
      CollectiveContext ctx{*state->transport, collective_tag(code, seq), Deadline::after(timeout)};
      body(ctx);
      work->finish();
    } catch (...) {
      auto e = with_context(std::current_exception(), context);
      state->record_failure(e);
      work->finish(e);
    }
  });
  return work;
}

std::shared_ptr<Work> TdistBackend::send(const Tensor& tensor, int dst, int tag) {
  check_tensor(tensor, "send");
  check_rank(dst, "send", "destination");
  if (dst == rank()) throw DistValueError(state_->label + ": send: destination is this rank itself");
  uint64_t seq;
  {
    std::lock_guard<std::mutex> issue(issue_mu_);
    seq = ++p2p_seq_;
  }
  std::string context = state_->label + ": send #" + std::to_string(seq) + " of " + tensor.str() + " to " +
                        state_->transport->describe_peer(dst) + " (tag " + std::to_string(tag) + ") failed: ";
  if (auto failed = state_->failure_of("send")) std::rethrow_exception(failed);
  auto req = state_->transport->isend(dst, p2p_tag(tag), tensor.data(), tensor.nbytes());
  return std::make_shared<P2PWork>("send", seq, std::move(req), state_, Deadline::after(options_.timeout), context);
}

std::shared_ptr<Work> TdistBackend::recv(const Tensor& tensor, int src, int tag) {
  check_tensor(tensor, "recv");
  if (src != kAnySource) check_rank(src, "recv", "source");
  if (src == rank()) throw DistValueError(state_->label + ": recv: source is this rank itself");
  uint64_t seq;
  {
    std::lock_guard<std::mutex> issue(issue_mu_);
    seq = ++p2p_seq_;
  }
  std::string context = state_->label + ": recv #" + std::to_string(seq) + " of " + tensor.str() + " from " +
                        state_->transport->describe_peer(src) + " (tag " + std::to_string(tag) + ") failed: ";
  if (auto failed = state_->failure_of("recv")) std::rethrow_exception(failed);
  auto req = state_->transport->irecv(src, p2p_tag(tag), tensor.data(), tensor.nbytes());
  return std::make_shared<P2PWork>("recv", seq, std::move(req), state_, Deadline::after(options_.timeout), context);
}

std::shared_ptr<Work> TdistBackend::broadcast(const Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast");
  check_rank(root, "broadcast", "root");
  return enqueue(OpCode::Broadcast, "broadcast",
                 [tensor, root](CollectiveContext& ctx) { tdist::broadcast(ctx, tensor, root); });
}

std::shared_ptr<Work> TdistBackend::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce");
  check_reduce_op(op, tensor.dtype(), "all_reduce");
  return enqueue(OpCode::AllReduce, "all_reduce",
                 [tensor, op](CollectiveContext& ctx) { tdist::all_reduce(ctx, tensor, op); });
}

std::shared_ptr<Work> TdistBackend::barrier() {
  return enqueue(OpCode::Barrier, "barrier", [](CollectiveContext& ctx) { barrier_dissemination(ctx); });
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
