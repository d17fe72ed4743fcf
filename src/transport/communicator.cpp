#include "transport/communicator.h"

#include "tdist/errors.h"
#include "util/error_context.h"

namespace tdist {

Communicator::Communicator(std::shared_ptr<Mesh> shared, uint32_t comm, std::vector<int> link_ranks, int rank,
                           std::string group)
    : shared_(std::move(shared)), comm_(comm), link_ranks_(std::move(link_ranks)),
      group_rank_of_(shared_->size(), -1), rank_(rank), group_(std::move(group)) {
  for (size_t i = 0; i < link_ranks_.size(); ++i) group_rank_of_.at(link_ranks_[i]) = static_cast<int>(i);
}

Communicator::~Communicator() {
  if (!closed_.load(std::memory_order_acquire))
    close(std::make_exception_ptr(DistBackendError("the communicator was destroyed")));
}

void Communicator::post(std::shared_ptr<Request> request) {
  const bool is_recv = request->kind() == Request::Kind::Recv;
  const int peer = request->peer();
  check_peer_arg(peer, rank_, size(), is_recv);
  request->route(comm_, peer == kAnySender ? kAnySender : link_ranks_[peer], group_rank_of_.data(), &outstanding_);
  if (closed_.load(std::memory_order_seq_cst)) {
    request->complete(close_cause_, -1);
    return;
  }
  shared_->post(std::move(request));
}

void Communicator::wait(Request& request, Deadline deadline, bool abort_on_error) {
  if (!abort_on_error) return shared_->wait(request, deadline, false);
  try {
    shared_->wait(request, deadline, false);
  } catch (...) {
    if (shared_->stopped()) throw;  // a timeout, or another group's failure of the connections
    // A lost member fails the connections as the shared transport's own
    // wait does (it rethrows, after saying whom the peer waited for).
    const int peer = request.link_peer();
    bool lost = false;
    if (peer != kAnySender) lost = shared_->peer_failure(peer) != nullptr;
    else
      for (int link : link_ranks_) lost = lost || shared_->peer_failure(link) != nullptr;
    if (lost) shared_->wait(request, deadline, true);
    // This group's alone: its other requests may be under way into buffers
    // the caller's unwinding frees.
    abort(std::current_exception());
    throw;
  }
}

bool Communicator::end(const std::exception_ptr& cause, bool by_abort) {
  if (ending_.exchange(true, std::memory_order_acq_rel)) return false;
  close_cause_ = cause;
  aborted_.store(by_abort, std::memory_order_relaxed);
  closed_.store(true, std::memory_order_seq_cst);
  return true;
}

void Communicator::abort(std::exception_ptr cause) {
  if (!end(cause, true)) return;
  shared_->abort_comm(comm_, cause);
  shared_->tell_comm_aborted(comm_, link_ranks_, rank_, group_, error_message(cause));
}

void Communicator::close(std::exception_ptr cause) {
  if (!end(cause, false)) return;
  if (outstanding_.load(std::memory_order_seq_cst) != 0) {
    // A request still under way may be writing into a buffer its owner frees
    // once this returns: dropped as by an abort, but the members hear that
    // this rank left (it did not fail).
    shared_->abort_comm(comm_, cause);
    shared_->say_goodbye(comm_, link_ranks_);
  } else {
    // Members waiting for this rank in the group fail at once, naming it as gone.
    shared_->say_goodbye(comm_, link_ranks_);
    shared_->close_comm(comm_, std::move(cause));
  }
}

std::exception_ptr Communicator::aborted() const {
  if (closed_.load(std::memory_order_acquire) && aborted_.load(std::memory_order_relaxed)) return close_cause_;
  return shared_->aborted();
}

// Only members count: a rank outside the group that finished and left is no
// failure of this group.
std::exception_ptr Communicator::failure() const {
  if (auto a = aborted()) return a;
  for (int link : link_ranks_)
    if (auto e = shared_->peer_failure(link)) return e;
  return nullptr;
}

std::exception_ptr Communicator::peer_failure(int peer) const { return shared_->peer_failure(link_ranks_.at(peer)); }

std::string Communicator::describe_peer(int peer) const {
  if (peer == kAnySender) return shared_->describe_peer(kAnySender);
  if (peer < 0 || peer >= size()) return "rank " + std::to_string(peer) + " (not in the group)";
  // "rank 5 (group rank 2) at 10.0.0.2:4567": the shared transport numbers ranks as the default group does.
  const int link = link_ranks_[peer];
  const std::string name = "rank " + std::to_string(link), full = shared_->describe_peer(link);
  if (link == peer || full.rfind(name, 0) != 0) return full;
  return name + " (group rank " + std::to_string(peer) + ")" + full.substr(name.size());
}

bool Communicator::same_host(int peer) const { return shared_->same_host(link_ranks_.at(peer)); }

std::string Communicator::host_of(int peer) const { return shared_->host_of(link_ranks_.at(peer)); }

}  // namespace tdist
