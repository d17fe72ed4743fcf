#include "transport/communicator.h"

#include "tdist/errors.h"

namespace tdist {

Communicator::Communicator(std::shared_ptr<Mesh> shared, uint32_t comm, std::vector<int> link_ranks,
                           int rank)
    : shared_(std::move(shared)), comm_(comm), link_ranks_(std::move(link_ranks)),
      group_rank_of_(shared_->size(), -1), rank_(rank) {
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
  shared_->wait(request, deadline, abort_on_error);
}

void Communicator::abort(std::exception_ptr cause) { shared_->abort(std::move(cause)); }

void Communicator::close(std::exception_ptr cause) {
  if (closed_.load(std::memory_order_acquire)) return;
  close_cause_ = cause;
  closed_.store(true, std::memory_order_seq_cst);
  // A request still under way may be writing into a buffer its owner frees
  // once this returns: only an abort of the shared transport stops it.
  if (outstanding_.load(std::memory_order_seq_cst) != 0) {
    shared_->abort(std::move(cause));
  } else {
    // Members waiting for this rank in the group fail at once, naming it as gone.
    shared_->say_goodbye(comm_, link_ranks_);
    shared_->close_comm(comm_, std::move(cause));
  }
}

std::exception_ptr Communicator::aborted() const { return shared_->aborted(); }

// Only members count: a rank outside the group that finished and left is no
// failure of this group.
std::exception_ptr Communicator::failure() const {
  if (auto a = shared_->aborted()) return a;
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
