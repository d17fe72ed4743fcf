#include "transport/tcp/tcp_transport.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <thread>

#include "tdist/errors.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/wire.h"
#include "util/error_context.h"
#include "util/host_id.h"
#include "util/settings.h"
#include "util/logging.h"
#include "util/thread_name.h"

namespace tdist {

namespace {
// A payload goes to the socket at most this much per write. One large write
// holds the socket's lock while it copies, so the peer's acknowledgements
// wait in the backlog and the window opens in bursts; smaller and larger
// chunks were slower (docs/tuning_log.md: Transport).
constexpr size_t kWriteChunkBytes = 256 * 1024;
// How long a waiting thread polls before it blocks. The spin must outlast a
// wake-up: a shorter one lets two ranks in a ping-pong fall into a pattern
// where each, having just given up spinning, must be woken for every message.
// Its first 2 us only pause (a reply on its way over shared memory comes
// within a microsecond); after that it yields between polls.
// With more ranks than cores the spin is as long but yields from its start,
// so a rank that needs the core gets it, while a rank whose peer runs on the
// other core still sees its message at once; blocking there after 2 us was
// slower. The measurements: docs/tuning_log.md, Transport.
SpinPolicy spin_policy(int local_ranks) {
  if (auto lws = settings::get<"LOCAL_WORLD_SIZE">()) local_ranks = std::max(local_ranks, static_cast<int>(*lws));
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const bool oversubscribed = static_cast<unsigned>(local_ranks) > cores;
  SpinPolicy policy{settings::get<"TDIST_SPIN_US">(),
                    oversubscribed ? std::chrono::nanoseconds(0) : std::chrono::microseconds(2)};
  return policy;
}

// Socket messages larger than this go by rendezvous (wire.h). Up to it, the
// round trip it adds costs more than the copy it saves a receiver that is not
// ready yet. Above it, a sender that runs ahead (a loop of broadcasts) makes
// the receiver buffer and copy every message, and it falls behind for good.
// 512 KiB keeps the blocks of 1 MiB collectives on 2 ranks eager
// (docs/tuning_log.md: Transport).

size_t rendezvous_threshold() {
  return static_cast<size_t>(settings::get<"TDIST_TCP_RENDEZVOUS_BYTES">());  // at least 0 (the registry)
}
}  // namespace

TcpTransport::TcpTransport(int rank, int size, TcpTransportOptions options)
    : rank_(rank), size_(size), options_(std::move(options)) {
  peers_.resize(size);
  notices_.resize(size);
  path_peers_ = std::make_unique<std::atomic<Peer*>[]>(static_cast<size_t>(size));
}

TcpTransport::~TcpTransport() {
  abort(std::make_exception_ptr(DistBackendError("the transport of " + options_.label + " was shut down")));
  if (progress_.joinable()) progress_.join();
  if (acceptor_.joinable()) acceptor_.join();
}

void TcpTransport::start() {
  epoll_fd_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  bg_epoll_fd_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_.valid() || !bg_epoll_fd_.valid() || !wake_fd_.valid())
    throw DistNetworkError(options_.label + ": cannot create epoll/eventfd: " + errno_string(errno));
  rescan_fd_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!rescan_fd_.valid())
    throw DistNetworkError(options_.label + ": cannot create an eventfd: " + errno_string(errno));
  epoll_update(EPOLL_CTL_ADD, wake_fd_.get(), EPOLLIN, kWakeEventId);
  epoll_update(EPOLL_CTL_ADD, rescan_fd_.get(), EPOLLIN, kRescanEventId);
  int local_ranks = 1;
  for (auto& p : peers_)
    if (p && p->host_id == host_id()) ++local_ranks;
  const SpinPolicy spin = spin_policy(local_ranks);
  spin_ = spin.spin;
  pause_only_ = std::min(spin.spin, spin.pause_only);
  rendezvous_bytes_ = rendezvous_threshold();
  progress_ = std::thread([this] { progress_loop(); });
  name_thread(progress_, "tdist-progress");
  if (directory_) {
    acceptor_ = std::thread([this] { accept_loop(); });
    name_thread(acceptor_, "tdist-accept");
  }
}

void TcpTransport::epoll_update(int op, int fd, uint32_t events, uint32_t id) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u32 = id;
  epoll_ctl(epoll_fd_.get(), op, fd, &ev);
  epoll_ctl(bg_epoll_fd_.get(), op, fd, &ev);
}

std::string TcpTransport::describe_peer(int peer) const {
  std::string out = name_peer(peer);
  if (peer >= 0 && peer < size_ && peers_[peer]) {
    const Peer& p = *peers_[peer];
    out += " at " + (p.connected.load(std::memory_order_acquire) ? p.address : p.advertised);
  }
  return out;
}

std::string TcpTransport::name_peer(int peer) const {
  if (peer == kAnySender) return "any rank";
  std::string out = "rank ";
  bool remapped = !options_.global_ranks.empty() && options_.global_ranks.size() == static_cast<size_t>(size_);
  if (peer >= 0 && peer < size_) {
    out += std::to_string(remapped ? options_.global_ranks[peer] : peer);
    if (remapped && options_.global_ranks[peer] != peer) out += " (group rank " + std::to_string(peer) + ")";
  } else {
    out += std::to_string(peer);
  }
  return out;
}

bool TcpTransport::same_host(int peer) const {
  if (peer == rank_) return true;
  return peers_[peer] && peers_[peer]->host_id == host_id();
}

std::string TcpTransport::host_of(int peer) const {
  if (peer == rank_) return host_id();
  return peers_.at(peer) ? peers_[peer]->host_id : std::string();
}

std::string TcpTransport::tag_text(uint64_t tag) const {
  return options_.describe_tag ? options_.describe_tag(tag) : "tag " + std::to_string(tag);
}

std::exception_ptr TcpTransport::size_mismatch(int peer, uint64_t tag, size_t posted, size_t arrived) const {
  return std::make_exception_ptr(DistBackendError(
      "message size mismatch with " + describe_peer(peer) + " in " + tag_text(tag) + ": expected " +
      std::to_string(posted) + " bytes, the peer sent " + std::to_string(arrived) +
      " bytes; the ranks called the operation with different sizes"));
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

std::exception_ptr TcpTransport::peer_failure(int peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return aborted_;
  if (peer >= 0 && peer < size_ && peers_[peer] && peers_[peer]->failed) return peers_[peer]->error;
  return nullptr;
}

void TcpTransport::post(std::shared_ptr<Request> req) {
  const bool send = req->kind() == Request::Kind::Send;
  const int peer = req->link_peer();
  check_peer_arg(peer, rank_, size_, /*is_recv=*/!send);
  if (peer == rank_) {  // no connection: see deliver_to_self
    if (send) deliver_to_self(std::move(req));
    else post_recv(std::move(req));
    return;
  }
  // A receive connects too: a peer that dies is then seen by the ranks that
  // wait for it, not only by those it sends to.
  if (peer != kAnySender) {
    if (std::exception_ptr error = connect_peer(peer)) {
      req->complete(error, peer);
      return;
    }
  }
  if (send && any_left_.load(std::memory_order_acquire)) {
    std::exception_ptr left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left = left_error_locked(req->comm(), peer);
    }
    if (left) {
      req->complete(left, peer);
      return;
    }
  }
  if (send) post_send(std::move(req));
  else post_recv(std::move(req));
}

void TcpTransport::post_send(std::shared_ptr<Request> req) {
  const int peer = req->link_peer();
  const uint64_t tag = req->tag();
  const uint32_t comm = req->comm();
  const size_t size = req->size();
  Peer& p = *peers_[peer];
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(p.tx_mu);
    if (p.tx_failed) {
      req->complete(p.tx_error, peer);
      return;
    }
    if (p.path) {
      p.path->post_locked(std::move(req));
      return;
    }
    if (uses_rendezvous(p, size)) {
      // Announce it with its head; the rest follows the peer's clear-to-send (on_clear_to_send).
      uint32_t id = p.next_rendezvous_id++;
      p.awaiting_cts.emplace(id, req);
      p.txq.push_back(Peer::TxItem{wire::MessageHeader{wire::kRtsMagic, id, tag, size, comm}, std::move(req), 0,
                                   wire::rendezvous_head(size), 0, false});
    } else {
      p.txq.push_back(
          Peer::TxItem{wire::MessageHeader{wire::kMessageMagic, 0, tag, size, comm}, std::move(req), 0, size});
    }
    if (p.txq.size() == 1) error = flush_locked(p);
    if (!error) update_output_locked(p);
  }
  if (error) {
    // Let the progress thread see the broken socket and fail the peer.
    ::shutdown(p.fd.get(), SHUT_RDWR);
  }
}

// Writes queued messages until the socket (or the peer's path) is full, on
// the main socket and on each extra one. Called with tx_mu held.
std::exception_ptr TcpTransport::flush_locked(Peer& p) {
  if (p.path) {
    p.path->flush_locked();
    return nullptr;
  }
  std::exception_ptr error = flush_queue_locked(p, nullptr);
  for (auto& lane : p.lanes)
    if (!error && !lane->txq.empty()) error = flush_queue_locked(p, lane.get());
  return error;
}

std::exception_ptr TcpTransport::flush_queue_locked(Peer& p, Lane* lane) {
  const int fd = lane ? lane->fd.get() : p.fd.get();
  std::deque<Peer::TxItem>& txq = lane ? lane->txq : p.txq;
  while (!txq.empty()) {
    auto& item = txq.front();
    iovec iov[2];
    int n = 0;
    constexpr size_t hsize = sizeof(wire::MessageHeader);
    const size_t total = item.bytes(), payload = total - hsize;
    if (item.sent < hsize) {
      iov[n++] = iovec{reinterpret_cast<char*>(&item.header) + item.sent, hsize - item.sent};
      if (payload > 0) iov[n++] = iovec{item.payload_data(), std::min(kWriteChunkBytes, payload)};
    } else {
      size_t off = item.sent - hsize;
      iov[n++] = iovec{item.payload_data() + off, std::min(kWriteChunkBytes, payload - off)};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    size_t want = 0;
    for (int i = 0; i < n; ++i) want += iov[i].iov_len;
    ssize_t w = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return nullptr;
      auto err = std::make_exception_ptr(DistNetworkError("sending to " + describe_peer(p.rank) +
                                                          " failed: " + errno_string(errno)));
      p.tx_failed = true;
      p.tx_error = err;
      fail_sends_locked(p, err);
      return err;
    }
    item.sent += static_cast<size_t>(w);
    if (item.sent == total) {
      // A request-to-send is written, but its send completes with the rest of
      // the payload, and a send in pieces with its last piece.
      if (item.completes && item.request && (!item.pieces || --item.pieces->left == 0))
        item.request->complete(nullptr, p.rank);
      txq.pop_front();
    } else if (static_cast<size_t>(w) < want) {
      return nullptr;  // partial write: the socket is full
    }
  }
  return nullptr;
}

// Wakes a peer that sleeps while its data path has something for it. Best
// effort: the frame is 32 bytes on a socket that carries nothing else but
// notices, so it is never cut; if the socket is broken the read side notices
// and fails the peer.
void TcpTransport::doorbell_locked(int peer) {
  Peer& p = *peers_[peer];
  if (p.tx_failed) return;
  wire::MessageHeader h{wire::kDoorbellMagic, 0, 0, 0};
  while (::send(p.fd.get(), &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR) {
  }
}

void TcpTransport::doorbell(int peer) {
  std::lock_guard<std::mutex> tx(peers_[peer]->tx_mu);
  doorbell_locked(peer);
}

// Asks epoll to report a socket writable exactly while something waits to be
// written to it (the main socket and each extra one). With tx_mu held.
void TcpTransport::update_output_locked(Peer& p) {
  const bool main_wants = !p.txq.empty();
  if (main_wants != p.out_armed.load(std::memory_order_relaxed)) {
    epoll_update(EPOLL_CTL_MOD, p.fd.get(), EPOLLIN | EPOLLRDHUP | (main_wants ? uint32_t{EPOLLOUT} : 0u),
                 static_cast<uint32_t>(p.rank));
    p.out_armed = main_wants;
  }
  for (auto& lane : p.lanes) {
    const bool wants = !lane->txq.empty();
    if (wants == lane->out_armed || lane->closed) continue;
    epoll_update(EPOLL_CTL_MOD, lane->fd.get(), EPOLLIN | EPOLLRDHUP | (wants ? uint32_t{EPOLLOUT} : 0u),
                 lane->event_id);
    lane->out_armed = wants;
    p.lanes_busy.fetch_add(wants ? 1 : -1, std::memory_order_relaxed);
  }
}

// A message to this rank itself goes through the matching of an arriving one
// (a posted receive, else the unexpected messages), its payload copied at
// once: the send is complete when this returns.
void TcpTransport::deliver_to_self(std::shared_ptr<Request> req) {
  wire::MessageHeader header{};
  header.tag = req->tag();
  header.size = req->size();
  header.comm = req->comm();
  MessageSlot slot;
  char* dst = begin_message(rank_, header, slot);
  if (dst && req->size() > 0) std::memcpy(dst, req->data(), req->size());
  end_message(rank_, slot);
  req->complete(nullptr, rank_);
}

void TcpTransport::post_recv(std::shared_ptr<Request> req) {
  Peer* clear_peer = nullptr;  // a matched request-to-send: answer it once mu_ is released
  uint32_t clear_id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!match_unexpected_locked(req, clear_peer, clear_id)) posted_.push_back(std::move(req));
  }
  if (clear_peer) send_clear_to_send(*clear_peer, clear_id);
}

// Serves a new receive from what already arrived, or fails it at once when it
// cannot be served. False when it must be posted. With mu_ held.
bool TcpTransport::match_unexpected_locked(const std::shared_ptr<Request>& req, Peer*& clear_peer,
                                           uint32_t& clear_id) {
  const int peer = req->link_peer();
  const uint32_t comm = req->comm();
  const uint64_t tag = req->tag();
  const size_t size = req->size();
  void* data = req->data();
  if (aborted_) {
    req->complete(aborted_, peer);
    return true;
  }
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    auto& u = **it;
    // A message from this peer for another operation arrived first: since a
    // peer's messages arrive in order, it was sent for an operation this rank
    // did not call alike, even when the one awaited here is in too.
    if (u.comm != comm) continue;
    if (u.peer == peer && u.tag != tag) {
      if (auto err = out_of_step(peer, tag, u.tag)) {
        req->complete(err, peer);
        return true;
      }
      continue;
    }
    if (u.tag != tag || (peer != kAnySender && u.peer != peer)) continue;
    auto entry = *it;
    unexpected_.erase(it);
    if (entry->rendezvous) {
      // The sender waits for our clear-to-send; on a size mismatch its data is discarded.
      bool fits = entry->size == size;
      if (!fits) req->complete(size_mismatch(entry->peer, tag, size, entry->size), entry->peer);
      clear_peer = peers_[entry->peer].get();
      clear_id = entry->rendezvous_id;
      const size_t head = wire::rendezvous_head(entry->size);
      if (entry->complete) {  // the head is here: only the rest is due
        if (fits && head > 0) std::memcpy(data, entry->data.data(), head);
        payload_pool_.give(std::move(entry->data));
        expect_rendezvous_data_locked(*clear_peer, clear_id, fits ? req : nullptr, entry->size, head);
      } else {  // it gets the head once that is in (finish_unexpected_head)
        entry->matched = true;
        if (fits) entry->waiter = req;
        expect_rendezvous_data_locked(*clear_peer, clear_id, fits ? req : nullptr, entry->size, 0);
      }
    } else if (entry->size != size) {
      req->complete(size_mismatch(entry->peer, tag, size, entry->size), entry->peer);
    } else if (entry->complete) {
      if (size > 0) std::memcpy(data, entry->data.data(), size);
      payload_pool_.give(std::move(entry->data));
      req->complete(nullptr, entry->peer);
    } else {
      entry->matched = true;
      entry->waiter = req;
    }
    return true;
  }
  if (peer != kAnySender && peer != rank_ && peers_[peer]->failed) {
    req->complete(peers_[peer]->error, peer);
    return true;
  }
  // What the peer sent before it left was matched above; nothing more comes.
  if (peer != kAnySender && peer != rank_)
    if (auto left = left_error_locked(comm, peer)) {
      req->complete(left, peer);
      return true;
    }
  return false;
}

void TcpTransport::abort(std::exception_ptr cause) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    aborted_ = cause;
  }
  stop_.store(true, std::memory_order_release);
  if (wake_fd_.valid()) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_fd_.get(), &one, sizeof(one));
  }
  {
    std::lock_guard<std::mutex> lock(park_mu_);
  }
  park_cv_.notify_all();
  // After the join, and once a driving thread has let go of rx_mu_, nothing
  // reads a socket or ring any more, so no user buffer is touched.
  if (progress_.joinable() && progress_.get_id() != std::this_thread::get_id()) progress_.join();
  // A pair that connects from now on sees stop_ and is not registered;
  // threads waiting for a pair to connect give up, dials under way too.
  std::lock_guard<std::mutex> conn(conn_mu_);
  for (auto& p : peers_)
    if (p) interrupt_dial(*p);
  conn_cv_.notify_all();
  std::lock_guard<std::mutex> rx(rx_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : posted_) r->complete(cause, r->link_peer());
  posted_.clear();
  for (auto& u : unexpected_)
    if (u->waiter) u->waiter->complete(cause, u->peer);
  unexpected_.clear();
  for (auto& p : peers_) {
    if (!p) continue;
    const bool connected = p->connected.load(std::memory_order_acquire);
    if (connected) {
      fail_incoming_locked(*p, cause);
      fail_rendezvous_receives_locked(*p, cause);
    }
    std::lock_guard<std::mutex> tx(p->tx_mu);
    // Tell the peer why (unless a give-up notice told it already).
    if (connected) {
      if (leaving_.load(std::memory_order_acquire)) send_goodbye_locked(*p);
      else send_notice_locked(*p, -1, error_message(cause));
    }
    fail_sends_locked(*p, cause);
    p->tx_failed = true;
    p->tx_error = cause;
    if (!connected) continue;
    ::shutdown(p->fd.get(), SHUT_RDWR);
    for (auto& lane : p->lanes) ::shutdown(lane->fd.get(), SHUT_RDWR);
  }
}

void TcpTransport::say_goodbye(uint32_t comm, const std::vector<int>& links) {
  wire::MessageHeader h{wire::kLeaveMagic, 0, 0, 0, comm};
  for (int link : links) {
    if (link == rank_ || link < 0 || link >= size_ || !peers_[link]) continue;
    Peer& p = *peers_[link];
    if (!p.connected.load(std::memory_order_acquire)) continue;  // it never talked to us: nothing to wait for
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> tx(p.tx_mu);
      if (p.tx_failed || p.notice_sent) continue;
      if (p.path) {
        // The communicator's messages are in the ring already; the socket
        // carries whole control frames only.
        while (::send(p.fd.get(), &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR) {
        }
        continue;
      }
      p.txq.push_back(Peer::TxItem{h, nullptr});  // after the messages queued before it
      if (p.txq.size() == 1) error = flush_locked(p);
      if (!error) update_output_locked(p);
    }
    if (error) ::shutdown(p.fd.get(), SHUT_RDWR);
  }
}

void TcpTransport::on_comm_left(Peer& p, uint32_t comm) {
  const auto error = std::make_exception_ptr(DistNetworkError(peer_left_text(describe_peer(p.rank), kLeftByDestroy)));
  std::lock_guard<std::mutex> lock(mu_);
  left_comms_.insert({comm, p.rank});
  any_left_.store(true, std::memory_order_release);
  for (auto it = posted_.begin(); it != posted_.end();) {
    if ((*it)->comm() == comm && (*it)->link_peer() == p.rank) {
      (*it)->complete(error, p.rank);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
}

std::exception_ptr TcpTransport::left_error_locked(uint32_t comm, int peer) const {
  if (!any_left_.load(std::memory_order_acquire) || !left_comms_.count({comm, peer})) return nullptr;
  return std::make_exception_ptr(DistNetworkError(peer_left_text(describe_peer(peer), kLeftByDestroy)));
}

void TcpTransport::close(std::exception_ptr cause) {
  leaving_.store(true, std::memory_order_release);
  abort(std::move(cause));
}

void TcpTransport::close_comm(uint32_t comm, std::exception_ptr cause) {
  std::lock_guard<std::mutex> lock(mu_);
  closed_comms_.insert(comm);
  for (auto it = posted_.begin(); it != posted_.end();) {
    if ((*it)->comm() == comm) {
      (*it)->complete(cause, (*it)->link_peer());
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
  // Buffered whole and unclaimed: freed. One still arriving is dropped when
  // it ends (finish_payload finds no waiter); an announcement stays, as its
  // sender waits for an answer only until its own group closes.
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    auto& u = **it;
    if (u.comm == comm && !u.rendezvous && !u.matched) {
      if (u.complete) payload_pool_.give(std::move(u.data));
      it = unexpected_.erase(it);
    } else {
      ++it;
    }
  }
}

// The connection to p is gone: fail everything that depends on it. Called
// with rx_mu_ held (the caller owns the receive state).
void TcpTransport::fail_peer(Peer& p, std::exception_ptr error) {
  TDIST_LOG(LogLevel::Info, options_.label << ": peer failed: " << describe_peer(p.rank));
  epoll_update(EPOLL_CTL_DEL, p.fd.get(), 0, 0);
  // After its notice the peer still reads: this rank may yet tell it whom it waited for.
  ::shutdown(p.fd.get(), p.notice_heard ? SHUT_RD : SHUT_RDWR);
  for (auto& lane : p.lanes) {
    if (!lane->closed) epoll_update(EPOLL_CTL_DEL, lane->fd.get(), 0, 0);
    ::shutdown(lane->fd.get(), SHUT_RDWR);
  }
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
      if ((*it)->link_peer() == p.rank || ((*it)->link_peer() == kAnySender && all_lost)) {
        (*it)->complete(error, p.rank);
        it = posted_.erase(it);
      } else {
        ++it;
      }
    }
    // What arrived whole stays for a receive, but not an announcement: the rest will not come.
    for (auto it = unexpected_.begin(); it != unexpected_.end();) {
      if ((*it)->peer == p.rank && (!(*it)->complete || (*it)->rendezvous)) it = unexpected_.erase(it);
      else ++it;
    }
    fail_incoming_locked(p, error);
    fail_rendezvous_receives_locked(p, error);
    p.in_payload = false;
  }
  std::lock_guard<std::mutex> tx(p.tx_mu);
  p.tx_failed = true;
  p.tx_error = error;
  if (!p.path && !p.txq.empty() && p.txq.front().sent > 0) p.tx_torn = true;
  fail_sends_locked(p, error);
  // A dial of this rank to p crossed p's own: it would wait for a handshake
  // that p, stopped, never answers.
  interrupt_dial(p);
}

// Fails every receive waiting for rendezvous data from p, and stops the extra
// sockets' reading into their buffers. With rx_mu_ and mu_ held.
void TcpTransport::fail_rendezvous_receives_locked(Peer& p, const std::exception_ptr& error) {
  for (auto& [id, rx] : p.rendezvous_rx)
    if (rx.request) rx.request->complete(error, p.rank);
  p.rendezvous_rx.clear();
  for (auto& lane : p.lanes) {
    lane->in_piece = false;
    lane->dst = nullptr;
  }
}

// Fails the receive of the message arriving from p (over its socket or its
// path), if any. With rx_mu_ and mu_ held.
void TcpTransport::fail_incoming_locked(Peer& p, const std::exception_ptr& error) {
  for (MessageSlot* slot : {&p.rx, p.path ? &p.path->incoming() : nullptr}) {
    if (!slot) continue;
    if (slot->request) slot->request->complete(error, p.rank);
    if (slot->buffered && slot->buffered->waiter) slot->buffered->waiter->complete(error, p.rank);
    slot->request.reset();
    slot->buffered.reset();
  }
}

// Fails every send to p not yet written, announced ones included. With p.tx_mu held.
void TcpTransport::fail_sends_locked(Peer& p, const std::exception_ptr& error) {
  // A send in pieces sits in several queues: it completes once.
  auto fail = [&](Peer::TxItem& it) {
    if (!it.request || (it.pieces && std::exchange(it.pieces->failed, true))) return;
    it.request->complete(error, p.rank);
  };
  for (auto& it : p.txq) fail(it);
  p.txq.clear();
  for (auto& lane : p.lanes) {
    for (auto& it : lane->txq) fail(it);
    lane->txq.clear();
  }
  if (p.path) p.path->fail_sends_locked(error);
  for (auto& [id, r] : p.awaiting_cts) r->complete(error, p.rank);
  p.awaiting_cts.clear();
}

}  // namespace tdist
