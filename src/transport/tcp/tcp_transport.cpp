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
#include "transport/tcp/tcp_silence.h"
#include "transport/wire.h"
#include "util/error_context.h"
#include "util/home_cpu.h"
#include "util/host_id.h"
#include "util/local_placement.h"
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
  // LOCAL_WORLD_SIZE as before (a bad value is an error naming it); under mpirun, the MPI launcher's count.
  if (auto lws = settings::get<"LOCAL_WORLD_SIZE">())
    local_ranks = std::max(local_ranks, static_cast<int>(*lws));
  else if (auto placed = local_placement())
    local_ranks = std::max(local_ranks, static_cast<int>(placed->size));
  local_ranks = std::max(local_ranks, ranks_on_machine());  // other hosts' ranks on these cores too
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
    : rank_(rank),
      size_(size),
      options_(std::move(options)),
      matching_(rank, size,
                MatchingNames{options_.label, [this](int peer) { return describe_peer(peer); }, options_.desync,
                              options_.describe_tag}),
      mu_(matching_.mutex()) {
  peers_.resize(size);
  notices_.resize(size);
  path_peers_ = std::make_unique<std::atomic<Peer*>[]>(static_cast<size_t>(size));
}

TcpTransport::~TcpTransport() {
  abort(std::make_exception_ptr(DistBackendError("the transport of " + options_.label + " was shut down")));
  if (progress_.joinable()) progress_.join();
  if (acceptor_.joinable()) acceptor_.join();
}

// Where this machine holds ranks of several hosts (network namespaces,
// containers), their local ranks would share home cores: place this rank
// among all of the machine's ranks instead (home_cpu.h).
void TcpTransport::place_on_this_machine() const {
  const std::string machine = machine_of(host_id());
  int index = 0, count = 1;
  bool other_hosts = false;
  for (int r = 0; r < size_; ++r) {
    const Peer* p = peers_[r].get();
    if (r == rank_ || !p || machine_of(p->host_id) != machine) continue;
    ++count;
    if (r < rank_) ++index;
    other_hosts = other_hosts || p->host_id != host_id();
  }
  if (other_hosts) place_on_machine(index, count);
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
  place_on_this_machine();
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

std::exception_ptr TcpTransport::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return matching_.aborted_locked();
}

std::exception_ptr TcpTransport::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto cause = matching_.aborted_locked()) return cause;
  return matching_.any_peer_error_locked();
}

std::exception_ptr TcpTransport::peer_failure(int peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto cause = matching_.aborted_locked()) return cause;
  if (peer >= 0 && peer < size_ && peer != rank_) return matching_.peer_error_locked(peer);
  return nullptr;
}

bool TcpTransport::peer_vanished(int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_ || !peers_[peer]) return false;
  return peers_[peer]->vanished.load(std::memory_order_acquire);
}

void TcpTransport::post(std::shared_ptr<Request> req) {
  const bool send = req->kind() == Request::Kind::Send;
  const int peer = req->link_peer();
  check_peer_arg(peer, rank_, size_, /*is_recv=*/!send);
  if (peer == rank_) {  // no connection: see Matching::deliver_to_self
    if (send) matching_.deliver_to_self(req);
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
  if (send && matching_.any_left()) {
    std::exception_ptr left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left = matching_.left_error_locked(req->comm(), peer);
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
      const int code = errno;
      auto err = std::make_exception_ptr(DistNetworkError("sending to " + describe_peer(p.rank) +
                                                          " failed: " + tcp::connection_error_text(code)));
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

void TcpTransport::post_recv(std::shared_ptr<Request> req) {
  std::shared_ptr<Unexpected> announced;  // a matched request-to-send: answer it once mu_ is released
  {
    std::lock_guard<std::mutex> lock(mu_);
    switch (matching_.match_buffered_locked(req, announced)) {
      case Matching::Served::No: matching_.post_locked(std::move(req)); break;
      case Matching::Served::Done: break;
      case Matching::Served::Announced: clear_announced_locked(req, announced); break;
    }
  }
  if (announced) send_clear_to_send(*peers_[announced->peer], announced->rendezvous_id);
}

void TcpTransport::abort(std::exception_ptr cause) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!matching_.abort_locked(cause)) return;
  }
  // Before anything closes: peers that see this rank's connections end must
  // find it registered as alive (a goodbye is a departure, not a failure).
  if (!leaving_.load(std::memory_order_acquire)) run_before_abort();
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
  matching_.fail_all_locked(cause);
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
  send_comm_frame(links, wire::MessageHeader{wire::kLeaveMagic, 0, 0, 0, comm}, {});
}

void TcpTransport::send_comm_frame(const std::vector<int>& links, const wire::MessageHeader& h, const std::string& text) {
  for (int link : links) {
    if (link == rank_ || link < 0 || link >= size_ || !peers_[link]) continue;
    Peer& p = *peers_[link];
    if (!p.connected.load(std::memory_order_acquire)) continue;  // it never talked to us: nothing to wait for
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> tx(p.tx_mu);
      if (p.tx_failed || p.notice_sent || p.tx_torn) continue;
      if (p.path) {
        // The communicator's messages are in the ring already; the socket
        // carries whole control frames only, and nearly nothing else: one write.
        wire::MessageHeader header = h;
        iovec iov[2] = {{&header, sizeof(header)}, {const_cast<char*>(text.data()), text.size()}};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = text.empty() ? 1 : 2;
        while (::sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR) {
        }
        continue;
      }
      std::shared_ptr<Request> payload;
      if (!text.empty()) {
        payload = owned_send(p.rank, 0, text.size());
        std::memcpy(payload->data(), text.data(), text.size());
      }
      p.txq.push_back(Peer::TxItem{h, std::move(payload), 0, text.size(), 0, false});  // after the messages queued before it
      if (p.txq.size() == 1) error = flush_locked(p);
      if (!error) update_output_locked(p);
    }
    if (error) ::shutdown(p.fd.get(), SHUT_RDWR);
  }
}

void TcpTransport::on_comm_left(Peer& p, uint32_t comm) {
  std::lock_guard<std::mutex> lock(mu_);
  matching_.comm_left_locked(comm, p.rank);
}

void TcpTransport::close(std::exception_ptr cause) {
  leaving_.store(true, std::memory_order_release);
  abort(std::move(cause));
}

void TcpTransport::close_comm(uint32_t comm, std::exception_ptr cause) {
  std::vector<std::shared_ptr<Unexpected>> announced;
  {
    std::lock_guard<std::mutex> lock(mu_);
    matching_.close_comm_locked(comm, cause, announced);
    discard_announced_locked(announced);
  }
  for (auto& entry : announced) send_clear_to_send(*peers_[entry->peer], entry->rendezvous_id);
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
    matching_.peer_lost_locked(p.rank, error);
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
  if (p.path) p.path->fail_pending_receives_locked(nullptr, error);
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
