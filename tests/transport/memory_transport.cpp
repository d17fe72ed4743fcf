#include "transport/memory_transport.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "tdist/errors.h"

namespace tdist::testing {

class MemoryTransport final : public Transport {
 public:
  MemoryTransport(MemoryFabric& fabric, int rank) : fabric_(fabric), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return fabric_.size_; }

  void post(std::shared_ptr<Request> r) override {
    const int peer = r->peer();
    if (peer == rank_ || peer < kAnySender || peer >= size() || (peer == kAnySender && r->kind() == Request::Kind::Send))
      throw DistValueError("memory transport: rank " + std::to_string(rank_) + " cannot talk to peer " +
                           std::to_string(peer));
    std::lock_guard<std::mutex> lock(fabric_.mu_);
    if (auto cause = fabric_.aborted_[rank_]) {
      r->complete(cause, peer);
      return;
    }
    if (r->kind() == Request::Kind::Send) {
      const long k = fabric_.sent_++;
      if (k == fabric_.faults_.lose_message) {
        r->complete(std::make_exception_ptr(DistNetworkError("memory transport: message " + std::to_string(k) +
                                                             " from rank " + std::to_string(rank_) + " to rank " +
                                                             std::to_string(peer) + " was lost (injected)")),
                    peer);
        return;
      }
      MemoryFabric::Message m{rank_, peer, r->tag(), {}, std::chrono::steady_clock::now(), fabric_.rng_()};
      m.data.assign(static_cast<const char*>(r->data()), static_cast<const char*>(r->data()) + r->size());
      if (fabric_.faults_.max_delay.count() > 0)
        m.due += std::chrono::microseconds(fabric_.rng_() % (fabric_.faults_.max_delay.count() + 1));
      fabric_.in_flight_.push_back(std::move(m));
      r->complete(nullptr, peer);
    } else {
      fabric_.posted_[rank_].push_back(std::move(r));
      fabric_.match_locked(rank_);  // it may have arrived already
    }
    fabric_.deliver_locked();
    fabric_.cv_.notify_all();
  }

  void wait(Request& request, Deadline deadline, bool abort_on_error) override {
    std::unique_lock<std::mutex> lock(fabric_.mu_);
    while (!request.done()) {
      fabric_.deliver_locked();
      if (request.done()) break;
      if (deadline.expired()) {
        lock.unlock();
        auto err = std::make_exception_ptr(DistBackendError(
            "memory transport: rank " + std::to_string(rank_) + " waiting for " +
            (request.kind() == Request::Kind::Send ? "a send to" : "a receive from") + " rank " +
            std::to_string(request.peer()) + " timed out after " + format_ms(deadline.timeout())));
        abort(err);
        std::rethrow_exception(err);
      }
      // Wake for the next delay to expire, a new message, or the deadline.
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(5);
      if (!deadline.is_never()) until = std::min(until, deadline.at());
      fabric_.cv_.wait_until(lock, until);
    }
    lock.unlock();
    if (request.error()) {
      if (abort_on_error) abort(request.error());
      std::rethrow_exception(request.error());
    }
  }

  void abort(std::exception_ptr cause) override {
    std::lock_guard<std::mutex> lock(fabric_.mu_);
    if (fabric_.aborted_[rank_]) return;
    fabric_.aborted_[rank_] = cause;
    for (auto& r : fabric_.posted_[rank_]) r->complete(cause, r->peer());
    fabric_.posted_[rank_].clear();
    fabric_.cv_.notify_all();
  }
  std::exception_ptr aborted() const override {
    std::lock_guard<std::mutex> lock(fabric_.mu_);
    return fabric_.aborted_[rank_];
  }
  std::exception_ptr failure() const override { return aborted(); }
  std::exception_ptr peer_failure(int) const override { return aborted(); }
  std::string describe_peer(int peer) const override { return "rank " + std::to_string(peer) + " (in memory)"; }
  bool same_host(int peer) const override { return fabric_.same_host(rank_, peer); }
  std::string host_of(int peer) const override { return fabric_.host_of(peer); }

 private:
  MemoryFabric& fabric_;
  const int rank_;
};

MemoryFabric::MemoryFabric(int size, FabricFaults faults)
    : size_(size), faults_(faults), rng_(faults.seed), arrived_(size), posted_(size), aborted_(size) {}

std::unique_ptr<Transport> MemoryFabric::endpoint(int rank) { return std::make_unique<MemoryTransport>(*this, rank); }

long MemoryFabric::messages_sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sent_;
}

std::string MemoryFabric::host_of(int rank) const {
  return "host " + std::to_string(faults_.ranks_per_host <= 0 ? 0 : rank / faults_.ranks_per_host);
}

bool MemoryFabric::same_host(int a, int b) const {
  if (faults_.ranks_per_host <= 0) return true;
  return a / faults_.ranks_per_host == b / faults_.ranks_per_host;
}

void MemoryFabric::deliver_locked() {
  const auto now = std::chrono::steady_clock::now();
  for (;;) {
    // Deliverable: due, and no earlier message with the same sender,
    // receiver and tag still in flight (Transport's one ordering promise).
    auto pick = in_flight_.end();
    for (auto it = in_flight_.begin(); it != in_flight_.end(); ++it) {
      if (it->due > now) continue;
      bool blocked = false;
      for (auto e = in_flight_.begin(); e != it && !blocked; ++e)
        blocked = e->from == it->from && e->to == it->to && e->tag == it->tag;
      if (blocked) continue;
      if (!faults_.reorder) {
        pick = it;
        break;
      }
      if (pick == in_flight_.end() || it->key < pick->key) pick = it;
    }
    if (pick == in_flight_.end()) break;
    const int to = pick->to;
    arrived_[to].push_back(std::move(*pick));
    in_flight_.erase(pick);
    match_locked(to);
  }
  cv_.notify_all();
}

void MemoryFabric::match_locked(int rank) {
  auto& arrived = arrived_[rank];
  auto& posted = posted_[rank];
  for (auto p = posted.begin(); p != posted.end();) {
    Request& r = **p;
    auto m = std::find_if(arrived.begin(), arrived.end(), [&](const Message& msg) {
      return msg.tag == r.tag() && (r.peer() == kAnySender || r.peer() == msg.from);
    });
    if (m == arrived.end()) {
      ++p;
      continue;
    }
    if (m->data.size() != r.size()) {
      r.complete(std::make_exception_ptr(DistBackendError(
                     "memory transport: size mismatch: rank " + std::to_string(m->from) + " sent " +
                     std::to_string(m->data.size()) + " bytes, rank " + std::to_string(rank) + " expects " +
                     std::to_string(r.size()))),
                 m->from);
    } else {
      if (!m->data.empty()) std::memcpy(r.data(), m->data.data(), m->data.size());
      r.complete(nullptr, m->from);
    }
    arrived.erase(m);
    p = posted.erase(p);
  }
}

}  // namespace tdist::testing
