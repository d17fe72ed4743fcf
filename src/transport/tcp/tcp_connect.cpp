// Connections on first use. A pair of ranks connects when either first posts
// a send or receive for the other: the posting thread dials, with every
// socket of the pair, and the peer's acceptor thread answers. Both may dial at
// once; then the lower rank's connection is kept (the handshake's Superseded
// verdict) and the higher rank waits for it. A pair's state moves from None
// to Dialling (-> Awaiting, when superseded) or Accepting, then Connected or
// Failed, under conn_mu_.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "tdist/errors.h"
#include "transport/tcp/tcp_addresses.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_silence.h"
#include "transport/tcp/tcp_transport.h"
#include "util/settings.h"
#include "util/error_context.h"
#include "util/host_id.h"
#include "util/logging.h"

namespace tdist {

namespace {

using tcp_handshake::Verdict;

// Across hosts, large messages go in frames of at most this much, and at most
// this much waits unsent in the kernel (TCP_NOTSENT_LOWAT): otherwise the
// clear-to-send for the peer's own large message queues behind this rank's
// whole payload and up to the send buffer's megabytes, and the two directions
// of an exchange take turns (docs/tuning_log.md: Transport).
constexpr long long kRemoteSliceBytes = 512 * 1024;
constexpr long long kRemoteUnsentBytes = 128 * 1024;

}  // namespace

int TcpTransport::sockets_with(int peer) const {
  const Directory& d = *directory_;
  // With several interfaces, at least one connection on each.
  const int interfaces = static_cast<int>(d.records[rank_].endpoints.size());
  return std::max(interfaces, std::min(d.records[rank_].sockets, d.records[peer].sockets));
}

std::exception_ptr TcpTransport::connect_peer(int peer) {
  Peer& p = *peers_[peer];
  if (p.connected.load(std::memory_order_acquire)) return nullptr;
  const Deadline deadline = Deadline::after(options_.timeout);
  {
    std::unique_lock<std::mutex> lock(conn_mu_);
    if (p.link != Peer::Link::None || stop_.load(std::memory_order_acquire)) return await_link(p, deadline, lock);
    p.link = Peer::Link::Dialling;
  }
  std::exception_ptr dial_error;
  try {
    if (dial_peer(p, deadline)) return nullptr;
  } catch (const DistError&) {
    dial_error = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(conn_mu_);
  if (dial_error && p.link == Peer::Link::Dialling) {
    lock.unlock();
    return link_failed(p, dial_error);
  }
  // The peer's own connection is kept (this dial was superseded), or came in
  // while this dial failed (the peer may close a dial it no longer needs):
  // wait for it.
  if (p.link == Peer::Link::Dialling) p.link = Peer::Link::Awaiting;
  return await_link(p, deadline, lock);
}

std::exception_ptr TcpTransport::await_link(Peer& p, Deadline deadline, std::unique_lock<std::mutex>& lock) {
  auto settled = [&] {
    return p.link == Peer::Link::Connected || p.link == Peer::Link::Failed || stop_.load(std::memory_order_acquire);
  };
  if (!conn_cv_.wait_until(lock, deadline.at(), settled)) {
    const bool dialling = p.link == Peer::Link::Dialling;
    lock.unlock();
    auto error = std::make_exception_ptr(DistNetworkError(
        options_.label + ": no connection to " + describe_peer(p.rank) + " within " + format_ms(deadline.timeout()) +
        (dialling ? " (another thread of this rank is still dialling it)"
                  : " (it began to connect but did not finish: it may have died or stopped)")));
    return link_failed(p, error);
  }
  if (p.link == Peer::Link::Connected) return nullptr;
  if (p.link == Peer::Link::Failed) return p.link_error;
  lock.unlock();
  return aborted();
}

bool TcpTransport::dial_peer(Peer& p, Deadline deadline) {
  using namespace tcp_addresses;
  const Directory& d = *directory_;
  const int peer = p.rank;
  const tcp::PeerRecord& info = d.records[peer];
  const tcp::PeerRecord& self = d.records[rank_];
  const size_t interfaces = self.endpoints.size();  // 0 or at least 2
  const std::string& label = options_.label;
  const std::string who = describe_peer(peer);
  // The interface of a pair's connection `lane`: pairs start at different
  // ones, so that the main connections too spread over them.
  auto interface_of = [&](int lane) { return static_cast<size_t>(rank_ + peer + lane) % interfaces; };
  std::string reached;  // without listed interfaces: the address that answered, for every connection
  // Opens connection `lane` (connected, before its handshake). With several
  // interfaces it goes from this rank's interface j to the peer's listener
  // on its interface j.
  auto open = [&](int lane) {
    const std::string which = lane == 0 ? "" : " (socket " + std::to_string(lane + 1) + ")";
    if (interfaces == 0) return connect_tcp(reached, info.port, deadline, label + " dialling " + who + which);
    const size_t j = interface_of(lane);
    return connect_tcp(info.endpoints[j].address, info.endpoints[j].port, deadline,
                       label + " dialling " + who + which + " over " + self.interfaces[j], d.per_interface[j].front());
  };
  Fd fd;
  if (interfaces > 0) {
    fd = open(0);
  } else {
    std::vector<std::string> candidates = info.addresses;
    // A peer of this host that listens on loopback too is dialled there first.
    if (info.host_id == self.host_id && has_loopback(info.addresses) && candidates.front() != "127.0.0.1")
      candidates.insert(candidates.begin(), "127.0.0.1");
    std::string last_error;
    for (size_t i = 0; i < candidates.size() && !fd.valid(); ++i) {
      bool last = i + 1 == candidates.size();
      Deadline step = last ? deadline : deadline.earlier(Deadline::after(Millis(3000)));
      try {
        fd = connect_tcp(candidates[i], info.port, step, label + " dialling " + who);
        reached = candidates[i];
      } catch (const DistNetworkError& e) {
        last_error = e.what();
      }
    }
    if (!fd.valid()) throw DistNetworkError(last_error);
  }
  // A peer that stopped (it failed, or left) accepts no more connections but
  // its listener still completes them, and no one answers: the handshake
  // would wait for its whole deadline, though this rank often hears of the
  // peer's end meanwhile (its own dial came in first, then its notice).
  // interrupt_dial shuts the socket of a handshake under way then.
  auto handshake = [&](int socket, uint32_t lane, const std::string& whom) {
    {
      std::lock_guard<std::mutex> lock(dial_mu_);
      p.dialling_fd = socket;
    }
    struct Clear {
      TcpTransport& t;
      Peer& p;
      ~Clear() {
        std::lock_guard<std::mutex> lock(t.dial_mu_);
        p.dialling_fd = -1;
      }
    } clear{*this, p};
    if (stop_.load(std::memory_order_acquire) || peer_failure(peer))
      throw DistNetworkError(label + " dialling " + whom + ": the pair failed meanwhile");
    return tcp_handshake::dial(socket, {rank_, peer, size_, lane}, info.nonce, d.token, deadline, whom);
  };
  if (handshake(fd.get(), 0, who) == Verdict::Superseded) return false;
  std::vector<Fd> lanes;
  for (int lane = 1; lane < sockets_with(peer); ++lane) {
    Fd extra = open(lane);
    handshake(extra.get(), static_cast<uint32_t>(lane), who + " (socket " + std::to_string(lane + 1) + ")");
    lanes.push_back(std::move(extra));
  }
  std::string address = peer_address(fd.get());
  std::unique_ptr<DataPath> path = attach_path(peer, fd.get(), deadline);
  register_peer(p, std::move(fd), std::move(lanes), std::move(address), std::move(path));
  return true;
}

// The acceptor's thread: judges each proven handshake by the pair's state,
// collects a pair's sockets, and registers the pair once all are in. A pair
// whose other sockets do not follow within the set-up timeout fails.
void TcpTransport::accept_loop() {
  const Directory& d = *directory_;
  std::vector<int> listen_fds;
  for (const Fd& l : d.listeners) listen_fds.push_back(l.get());
  tcp_handshake::Acceptor acceptor(listen_fds, rank_, size_, d.records[rank_].nonce, d.token, options_.label,
                                   wake_fd_.get());
  struct Partial {
    Fd main;
    std::string address;
    std::vector<Fd> lanes;  // index lane - 1
    int missing = 0;
    Deadline deadline = Deadline::never();
  };
  std::map<int, Partial> partial;
  auto judge = [&](int from, uint32_t lane) {
    if (lane > 0) {
      auto it = partial.find(from);
      const bool wanted = it != partial.end() && lane < it->second.lanes.size() + 1 && !it->second.lanes[lane - 1].valid();
      return wanted ? Verdict::Accept : Verdict::AlreadyConnected;
    }
    std::lock_guard<std::mutex> lock(conn_mu_);
    Peer& p = *peers_[from];
    switch (p.link) {
      case Peer::Link::None:
      case Peer::Link::Awaiting:
        p.link = Peer::Link::Accepting;
        return Verdict::Accept;
      case Peer::Link::Dialling:
        if (from > rank_) return Verdict::Superseded;  // this rank's own dial is kept
        p.link = Peer::Link::Accepting;
        return Verdict::Accept;
      case Peer::Link::Connected:
        // This rank's own dial won while the peer's was still on its way.
        return from > rank_ ? Verdict::Superseded : Verdict::AlreadyConnected;
      default:
        return Verdict::AlreadyConnected;
    }
  };
  auto complete = [&](int from) {
    Partial got = std::move(partial[from]);
    partial.erase(from);
    Peer& p = *peers_[from];
    try {
      std::unique_ptr<DataPath> path = attach_path(from, got.main.get(), got.deadline);
      register_peer(p, std::move(got.main), std::move(got.lanes), std::move(got.address), std::move(path));
    } catch (const DistError&) {
      link_failed(p, std::current_exception());
    }
  };
  while (!stop_.load(std::memory_order_acquire)) {
    Deadline until = Deadline::never();
    for (auto& [from, part] : partial) until = until.earlier(part.deadline);
    std::optional<tcp_handshake::Accepted> a;
    try {
      a = acceptor.next(until, judge);
    } catch (const DistError& e) {
      TDIST_LOG(LogLevel::Error, options_.label << ": stops accepting connections: " << e.what());
      return;
    }
    for (auto it = partial.begin(); it != partial.end();) {
      if (!it->second.deadline.expired()) {
        ++it;
        continue;
      }
      const int from = it->first;
      it = partial.erase(it);
      link_failed(*peers_[from], std::make_exception_ptr(DistNetworkError(
                                     options_.label + ": " + describe_peer(from) + " connected but did not open its " +
                                     std::to_string(sockets_with(from)) + " sockets within " +
                                     format_ms(options_.timeout))));
    }
    if (!a) continue;
    const int from = a->rank;
    if (!a->fd.valid()) {  // accepted, but the answer did not go out
      partial.erase(from);
      link_failed(*peers_[from], std::make_exception_ptr(DistNetworkError(
                                     options_.label + ": the connection from " + describe_peer(from) +
                                     " broke during its handshake")));
      continue;
    }
    if (a->lane == 0) {
      Partial& part = partial[from];
      part.main = std::move(a->fd);
      part.address = a->address;
      part.lanes.resize(sockets_with(from) - 1);
      part.missing = static_cast<int>(part.lanes.size());
      part.deadline = Deadline::after(options_.timeout);
    } else {
      Partial& part = partial[from];
      part.lanes[a->lane - 1] = std::move(a->fd);
      --part.missing;
    }
    if (partial[from].missing == 0) complete(from);
  }
}

void TcpTransport::register_peer(Peer& p, Fd main, std::vector<Fd> lanes, std::string address,
                                 std::unique_ptr<DataPath> path) {
  // Set: every socket; unset: the sockets of peers on other hosts only (on
  // loopback they cost 1.5-2.5x from 1 MiB: docs/configuration.md).
  const auto slice_setting = settings::get<"TDIST_TCP_SLICE_BYTES">();
  const auto unsent_setting = settings::get<"TDIST_TCP_NOTSENT_LOWAT">();
  std::unique_lock<std::mutex> lock(conn_mu_);
  if (stop_.load(std::memory_order_acquire) || p.link == Peer::Link::Failed) {
    lock.unlock();
    link_failed(p, aborted() ? aborted() : p.link_error);
    return;  // the sockets close here
  }
  p.fd = std::move(main);
  p.address = std::move(address);
  p.staging.resize(kStagingBytes);
  p.path = std::move(path);
  // Both ends know which path the pair uses: the extra sockets of a peer
  // reached otherwise would never carry anything, and close on both sides unread.
  if (!p.path) {
    for (Fd& fd : lanes) {
      p.lanes.push_back(std::make_unique<Lane>());
      p.lanes.back()->fd = std::move(fd);
    }
  }
  const bool remote = p.host_id != host_id();
  const long long slice = slice_setting.value_or(remote ? kRemoteSliceBytes : 0);
  const long long unsent_bytes = unsent_setting.value_or(remote ? kRemoteUnsentBytes : 0);
  p.slice_bytes = static_cast<uint64_t>(std::max<long long>(0, slice));
  const int unsent = static_cast<int>(std::clamp<long long>(unsent_bytes, 0, 1 << 30));
  set_nonblocking(p.fd.get(), true);
  if (unsent > 0 && !p.path) setsockopt(p.fd.get(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &unsent, sizeof(unsent));
  if (remote) tcp::watch_silence(p.fd.get());
  for (size_t i = 0; i < p.lanes.size(); ++i) {
    Lane& lane = *p.lanes[i];
    if (remote) tcp::watch_silence(lane.fd.get());
    lane.event_id = static_cast<uint32_t>(size_ + p.rank * tcp::kMaxSocketsPerPeer + static_cast<int>(i));
    set_nonblocking(lane.fd.get(), true);
  }
  p.link = Peer::Link::Connected;
  p.connected.store(true, std::memory_order_release);
  // Only now may the progress threads see it.
  epoll_update(EPOLL_CTL_ADD, p.fd.get(), EPOLLIN | EPOLLRDHUP, static_cast<uint32_t>(p.rank));
  for (auto& lane : p.lanes) epoll_update(EPOLL_CTL_ADD, lane->fd.get(), EPOLLIN | EPOLLRDHUP, lane->event_id);
  if (p.path) {
    const size_t n = path_peer_count_.load(std::memory_order_relaxed);
    path_peers_[n].store(&p, std::memory_order_relaxed);
    path_peer_count_.store(n + 1, std::memory_order_release);
    // A thread asleep in epoll has not raised the new rings' sleep flag: wake it.
    uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(rescan_fd_.get(), &one, sizeof(one));
  } else {
    tcp_data_peers_.store(true, std::memory_order_release);
    if (size_ == 2) lone_socket_peer_.store(&p, std::memory_order_release);
  }
  lock.unlock();
  conn_cv_.notify_all();
}

void TcpTransport::interrupt_dial(Peer& p) {
  std::lock_guard<std::mutex> lock(dial_mu_);
  if (p.dialling_fd >= 0) ::shutdown(p.dialling_fd, SHUT_RDWR);
}

std::exception_ptr TcpTransport::link_failed(Peer& p, std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(conn_mu_);
    if (p.link == Peer::Link::Connected) return nullptr;  // failing later is the progress threads' to see
    if (p.link != Peer::Link::Failed) {
      p.link = Peer::Link::Failed;
      p.link_error = error;
    }
    error = p.link_error;
  }
  interrupt_dial(p);
  conn_cv_.notify_all();
  TDIST_LOG(LogLevel::Info, options_.label << ": no connection to " << describe_peer(p.rank) << ": "
                                           << error_message(error));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!p.failed) {
      p.failed = true;
      p.error = error;
    }
    matching_.link_lost_locked(p.rank, error);
  }
  std::lock_guard<std::mutex> tx(p.tx_mu);
  if (!p.tx_failed) {
    p.tx_failed = true;
    p.tx_error = error;
  }
  return error;
}

}  // namespace tdist
