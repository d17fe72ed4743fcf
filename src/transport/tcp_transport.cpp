#include "transport/tcp_transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

#include "tdist/backend.h"
#include "tdist/errors.h"
#include "transport/tcp_peer.h"
#include "transport/wire.h"
#include "util/error_context.h"
#include "util/host_id.h"
#include "util/logging.h"

namespace tdist {

namespace {
constexpr uint32_t kWakeId = UINT32_MAX;
// Payload reads at least this large go straight into the destination buffer.
constexpr size_t kDirectReadBytes = 16 * 1024;
}  // namespace

TcpTransport::TcpTransport(int rank, int size, TcpTransportOptions options)
    : rank_(rank), size_(size), options_(std::move(options)) {
  peers_.resize(size);
}

TcpTransport::~TcpTransport() {
  abort(std::make_exception_ptr(DistBackendError("the transport of " + options_.label + " was shut down")));
  if (progress_.joinable()) progress_.join();
}

void TcpTransport::start() {
  epoll_fd_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_.valid() || !wake_fd_.valid())
    throw DistNetworkError(options_.label + ": cannot create epoll/eventfd: " + errno_string(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = kWakeId;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
  for (auto& p : peers_) {
    if (!p) continue;
    set_nonblocking(p->fd.get(), true);
    epoll_event pev{};
    pev.events = EPOLLIN | EPOLLRDHUP;
    pev.data.u32 = static_cast<uint32_t>(p->rank);
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, p->fd.get(), &pev);
  }
  progress_ = std::thread([this] { progress_loop(); });
}

std::string TcpTransport::describe_peer(int peer) const {
  if (peer == kAnySource) return "any rank";
  std::string out = "rank ";
  bool remapped = !options_.global_ranks.empty() && options_.global_ranks.size() == static_cast<size_t>(size_);
  if (peer >= 0 && peer < size_) {
    out += std::to_string(remapped ? options_.global_ranks[peer] : peer);
    if (remapped && options_.global_ranks[peer] != peer) out += " (group rank " + std::to_string(peer) + ")";
    if (peers_[peer]) out += " at " + peers_[peer]->address;
  } else {
    out += std::to_string(peer);
  }
  return out;
}

bool TcpTransport::same_host(int peer) const {
  if (peer == rank_) return true;
  return peers_[peer] && peers_[peer]->host_id == host_id();
}

void TcpTransport::check_peer_arg(int peer, const char* what) const {
  if (peer == kAnySource && std::string_view(what) == "receive") return;
  if (peer < 0 || peer >= size_)
    throw DistValueError(std::string(what) + " with invalid peer rank " + std::to_string(peer) +
                         " (group size " + std::to_string(size_) + ")");
  if (peer == rank_)
    throw DistValueError(std::string(what) + " to/from itself (rank " + std::to_string(peer) +
                         ") is not allowed");
}

std::exception_ptr TcpTransport::size_mismatch(int peer, uint64_t tag, size_t posted, size_t arrived) const {
  return std::make_exception_ptr(DistBackendError(
      "message size mismatch with " + describe_peer(peer) + ": expected " + std::to_string(posted) +
      " bytes, the peer sent " + std::to_string(arrived) + " bytes (tag " + std::to_string(tag) +
      "); the ranks called the operation with different sizes"));
}

std::exception_ptr TcpTransport::out_of_step(int peer, uint64_t waiting_tag, uint64_t arrived_tag) const {
  if (!options_.desync) return nullptr;
  std::string why = options_.desync(waiting_tag, arrived_tag);
  if (why.empty()) return nullptr;
  return std::make_exception_ptr(DistBackendError(describe_peer(peer) + ": " + why));
}

std::exception_ptr TcpTransport::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

std::exception_ptr TcpTransport::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return aborted_;
  for (auto& p : peers_)
    if (p && p->failed) return p->error;
  return nullptr;
}

std::shared_ptr<Request> TcpTransport::isend(int peer, uint64_t tag, const void* data, size_t size) {
  check_peer_arg(peer, "send");
  auto req = std::make_shared<Request>(Request::Kind::Send, peer, tag, const_cast<void*>(data), size);
  Peer& p = *peers_[peer];
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(p.tx_mu);
    if (p.tx_failed) {
      req->complete(p.tx_error, peer);
      return req;
    }
    p.txq.push_back(Peer::TxItem{wire::MessageHeader{wire::kMessageMagic, 0, tag, size}, req, 0});
    if (p.txq.size() == 1) error = flush_locked(p);
    if (!error && !p.txq.empty() && !p.out_armed) arm_output_locked(p, true);
  }
  if (error) {
    // Let the progress thread see the broken socket and fail the peer.
    ::shutdown(p.fd.get(), SHUT_RDWR);
  }
  return req;
}

// Writes queued messages until the socket is full. Called with tx_mu held.
std::exception_ptr TcpTransport::flush_locked(Peer& p) {
  while (!p.txq.empty()) {
    auto& item = p.txq.front();
    iovec iov[2];
    int n = 0;
    constexpr size_t hsize = sizeof(wire::MessageHeader);
    if (item.sent < hsize) {
      iov[n++] = iovec{reinterpret_cast<char*>(&item.header) + item.sent, hsize - item.sent};
      if (item.request->size() > 0) iov[n++] = iovec{item.request->data(), item.request->size()};
    } else {
      size_t off = item.sent - hsize;
      iov[n++] = iovec{static_cast<char*>(item.request->data()) + off, item.request->size() - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t w = ::sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return nullptr;
      auto err = std::make_exception_ptr(DistNetworkError("sending to " + describe_peer(p.rank) +
                                                          " failed: " + errno_string(errno)));
      p.tx_failed = true;
      p.tx_error = err;
      for (auto& it : p.txq) it.request->complete(err, p.rank);
      p.txq.clear();
      return err;
    }
    item.sent += static_cast<size_t>(w);
    if (item.sent == hsize + item.request->size()) {
      item.request->complete(nullptr, p.rank);
      p.txq.pop_front();
    } else {
      return nullptr;  // partial write: the socket is full
    }
  }
  return nullptr;
}

void TcpTransport::arm_output_locked(Peer& p, bool on) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (on ? uint32_t{EPOLLOUT} : 0u);
  ev.data.u32 = static_cast<uint32_t>(p.rank);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, p.fd.get(), &ev);
  p.out_armed = on;
}

std::shared_ptr<Request> TcpTransport::irecv(int peer, uint64_t tag, void* data, size_t size) {
  check_peer_arg(peer, "receive");
  auto req = std::make_shared<Request>(Request::Kind::Recv, peer, tag, data, size);
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) {
    req->complete(aborted_, peer);
    return req;
  }
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    auto& u = **it;
    if (u.tag != tag || (peer != kAnySource && u.peer != peer)) continue;
    auto entry = *it;
    unexpected_.erase(it);
    if (entry->data.size() != size) {
      req->complete(size_mismatch(entry->peer, tag, size, entry->data.size()), entry->peer);
    } else if (entry->complete) {
      if (size > 0) std::memcpy(data, entry->data.data(), size);
      req->complete(nullptr, entry->peer);
    } else {
      entry->waiter = req;
    }
    return req;
  }
  if (peer != kAnySource && peers_[peer]->failed) {
    req->complete(peers_[peer]->error, peer);
    return req;
  }
  // A message from this peer for another operation already arrived: since a
  // peer's messages arrive in order, the one awaited here will never come.
  if (peer != kAnySource) {
    for (auto& u : unexpected_) {
      if (u->peer != peer) continue;
      if (auto err = out_of_step(peer, tag, u->tag)) {
        req->complete(err, peer);
        return req;
      }
    }
  }
  posted_.push_back(req);
  return req;
}

void TcpTransport::wait(Request& request, Deadline deadline, bool abort_on_error) {
  if (!request.wait_until(deadline)) {
    bool send = request.kind() == Request::Kind::Send;
    auto err = std::make_exception_ptr(DistBackendError(
        std::string(send ? "sending " : "receiving ") + std::to_string(request.size()) + " bytes " +
        (send ? "to " : "from ") + describe_peer(request.peer()) + " timed out after " +
        format_ms(deadline.timeout()) + " (the peer may be stalled, dead, or in a different operation)"));
    abort(err);
    std::rethrow_exception(err);
  }
  if (request.error()) {
    if (abort_on_error) abort(request.error());
    std::rethrow_exception(request.error());
  }
}

void TcpTransport::abort(std::exception_ptr cause) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    aborted_ = cause;
  }
  stop_.store(true);
  if (wake_fd_.valid()) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_fd_.get(), &one, sizeof(one));
  }
  // After the join no socket is read any more, so no user buffer is touched.
  if (progress_.joinable() && progress_.get_id() != std::this_thread::get_id()) progress_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : posted_) r->complete(cause, r->peer());
  posted_.clear();
  for (auto& u : unexpected_)
    if (u->waiter) u->waiter->complete(cause, u->peer);
  unexpected_.clear();
  for (auto& p : peers_) {
    if (!p) continue;
    if (p->rx_request) p->rx_request->complete(cause, p->rank);
    if (p->rx_unexpected && p->rx_unexpected->waiter) p->rx_unexpected->waiter->complete(cause, p->rank);
    p->rx_request.reset();
    p->rx_unexpected.reset();
    std::lock_guard<std::mutex> tx(p->tx_mu);
    // Tell the peer why, when the stream is between two messages (best effort).
    if (!p->tx_failed && p->fd.valid() && (p->txq.empty() || p->txq.front().sent == 0)) {
      std::string text = error_message(cause).substr(0, wire::kMaxAbortText);
      wire::MessageHeader h{wire::kAbortMagic, 0, 0, text.size()};
      iovec iov[2] = {{&h, sizeof(h)}, {text.data(), text.size()}};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = 2;
      [[maybe_unused]] ssize_t w = ::sendmsg(p->fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    for (auto& it : p->txq) it.request->complete(cause, p->rank);
    p->txq.clear();
    p->tx_failed = true;
    p->tx_error = cause;
    if (p->fd.valid()) ::shutdown(p->fd.get(), SHUT_RDWR);
  }
}

void TcpTransport::progress_loop() {
  epoll_event events[64];
  while (!stop_.load(std::memory_order_relaxed)) {
    int n = epoll_wait(epoll_fd_.get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      TDIST_LOG(LogLevel::Error, options_.label << ": epoll_wait failed: " << errno_string(errno));
      return;
    }
    for (int i = 0; i < n && !stop_.load(std::memory_order_relaxed); ++i) {
      uint32_t id = events[i].data.u32;
      if (id == kWakeId) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_.get(), &v, sizeof(v));
        continue;
      }
      Peer& p = *peers_[id];
      if (p.failed) continue;
      if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(p);
      if (!p.failed && (events[i].events & EPOLLOUT)) on_writable(p);
    }
  }
}

void TcpTransport::on_writable(Peer& p) {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(p.tx_mu);
    error = flush_locked(p);
    if (!error && p.txq.empty() && p.out_armed) arm_output_locked(p, false);
  }
  if (error) fail_peer(p, error);
}

void TcpTransport::on_readable(Peer& p) {
  constexpr size_t hsize = sizeof(wire::MessageHeader);
  for (;;) {
    size_t buffered = p.stage_end - p.stage_begin;
    if (!p.in_payload) {
      if (buffered >= hsize) {
        std::memcpy(&p.header, p.staging.data() + p.stage_begin, hsize);
        p.stage_begin += hsize;
        if (p.header.magic == wire::kAbortMagic && p.header.size <= wire::kMaxAbortText) {
          p.abort_text.resize(p.header.size);
          p.in_payload = true;
          p.payload_done = 0;
          p.dst = p.abort_text.data();
          continue;
        }
        if (p.header.magic != wire::kMessageMagic || p.header.size > wire::kMaxUnexpectedBytes) {
          fail_peer(p, std::make_exception_ptr(DistNetworkError(
                           "protocol error from " + describe_peer(p.rank) +
                           ": bad message header (magic " + std::to_string(p.header.magic) + ", size " +
                           std::to_string(p.header.size) + ")")));
          return;
        }
        begin_payload(p);
        if (p.failed) return;
        continue;
      }
    } else {
      size_t need = p.header.size - p.payload_done;
      if (buffered > 0 && need > 0) {
        size_t take = std::min(buffered, need);
        if (p.dst) std::memcpy(p.dst + p.payload_done, p.staging.data() + p.stage_begin, take);
        p.stage_begin += take;
        p.payload_done += take;
        need -= take;
      }
      if (need == 0) {
        finish_payload(p);
        if (p.failed) return;
        continue;
      }
      if (p.dst && need >= kDirectReadBytes) {
        if (!read_some(p, p.dst + p.payload_done, need, p.payload_done)) return;
        continue;
      }
    }
    // Refill the staging buffer.
    if (p.stage_begin == p.stage_end) p.stage_begin = p.stage_end = 0;
    if (p.stage_begin > 0 && p.staging.size() - p.stage_end < hsize) {
      std::memmove(p.staging.data(), p.staging.data() + p.stage_begin, p.stage_end - p.stage_begin);
      p.stage_end -= p.stage_begin;
      p.stage_begin = 0;
    }
    if (!read_some(p, p.staging.data() + p.stage_end, p.staging.size() - p.stage_end, p.stage_end)) return;
  }
}

// One non-blocking read of up to n bytes into dst, adding what arrived to
// `counter`. False when the socket has nothing more now, or the connection is
// gone (then the peer is failed).
bool TcpTransport::read_some(Peer& p, char* dst, size_t n, size_t& counter) {
  for (;;) {
    ssize_t r = ::recv(p.fd.get(), dst, n, MSG_DONTWAIT);
    if (r > 0) {
      counter += static_cast<size_t>(r);
      return true;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    fail_peer(p, std::make_exception_ptr(DistNetworkError(
                     "connection to " + describe_peer(p.rank) + " lost: " +
                     (r == 0 ? std::string("closed by the peer (it may have exited or crashed)")
                             : errno_string(errno)))));
    return false;
  }
}

// A header arrived: find its receive, or buffer it as unexpected.
void TcpTransport::begin_payload(Peer& p) {
  p.in_payload = true;
  p.payload_done = 0;
  p.dst = nullptr;
  const uint64_t tag = p.header.tag;
  const size_t size = p.header.size;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    auto& r = **it;
    if (r.tag() != tag || (r.peer() != kAnySource && r.peer() != p.rank)) continue;
    auto req = *it;
    posted_.erase(it);
    if (req->size() != size) {
      req->complete(size_mismatch(p.rank, tag, req->size(), size), p.rank);  // p.dst stays null: discard
    } else {
      p.rx_request = req;
      p.dst = static_cast<char*>(req->data());
    }
    return;
  }
  // Receives waiting on this peer for another operation will never be served.
  for (auto it = posted_.begin(); it != posted_.end();) {
    std::exception_ptr err = (*it)->peer() == p.rank ? out_of_step(p.rank, (*it)->tag(), tag) : nullptr;
    if (err) {
      (*it)->complete(err, p.rank);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
  auto entry = std::make_shared<Unexpected>();
  entry->peer = p.rank;
  entry->tag = tag;
  try {
    entry->data.resize(size);
  } catch (const std::bad_alloc&) {
    // Cannot buffer it: discard the payload and fail whoever expects it.
    TDIST_LOG(LogLevel::Error, options_.label << ": cannot buffer " << size << " bytes from " << describe_peer(p.rank));
    return;
  }
  p.dst = entry->data.data();
  p.rx_unexpected = entry;
  unexpected_.push_back(std::move(entry));
}

void TcpTransport::finish_payload(Peer& p) {
  p.in_payload = false;
  p.dst = nullptr;
  if (p.header.magic == wire::kAbortMagic) {
    fail_peer(p, std::make_exception_ptr(
                     DistNetworkError(describe_peer(p.rank) + " gave up and closed its connections: " + p.abort_text)));
    return;
  }
  if (auto req = std::move(p.rx_request)) {
    p.rx_request.reset();
    req->complete(nullptr, p.rank);
    return;
  }
  if (auto entry = std::move(p.rx_unexpected)) {
    p.rx_unexpected.reset();
    std::lock_guard<std::mutex> lock(mu_);
    entry->complete = true;
    if (entry->waiter) {
      if (!entry->data.empty()) std::memcpy(entry->waiter->data(), entry->data.data(), entry->data.size());
      entry->waiter->complete(nullptr, p.rank);
      entry->waiter.reset();
    }
  }
}

// The connection to p is gone: fail everything that depends on it. Progress
// thread only (it owns the receive state).
void TcpTransport::fail_peer(Peer& p, std::exception_ptr error) {
  TDIST_LOG(LogLevel::Info, options_.label << ": peer failed: " << describe_peer(p.rank));
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, p.fd.get(), nullptr);
  ::shutdown(p.fd.get(), SHUT_RDWR);
  {
    std::lock_guard<std::mutex> lock(mu_);
    p.failed = true;
    p.error = error;
    // A receive from anyone can still be served by the others (a peer that
    // finished and closed its group is normal); it fails only with the last peer.
    bool all_lost = true;
    for (auto& q : peers_)
      if (q && !q->failed) all_lost = false;
    for (auto it = posted_.begin(); it != posted_.end();) {
      if ((*it)->peer() == p.rank || ((*it)->peer() == kAnySource && all_lost)) {
        (*it)->complete(error, p.rank);
        it = posted_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = unexpected_.begin(); it != unexpected_.end();) {
      if ((*it)->peer == p.rank && !(*it)->complete) it = unexpected_.erase(it);
      else ++it;
    }
    if (p.rx_request) p.rx_request->complete(error, p.rank);
    if (p.rx_unexpected && p.rx_unexpected->waiter) p.rx_unexpected->waiter->complete(error, p.rank);
    p.rx_request.reset();
    p.rx_unexpected.reset();
    p.in_payload = false;
  }
  std::lock_guard<std::mutex> tx(p.tx_mu);
  p.tx_failed = true;
  p.tx_error = error;
  for (auto& it : p.txq) it.request->complete(error, p.rank);
  p.txq.clear();
}

}  // namespace tdist
