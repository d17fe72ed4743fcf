// The TCPStore server's loop: waits on epoll, accepts clients, hands each
// event to its connection, expires parked waits and sweeps out connections
// that did not authenticate in time or sat idle.
#include "store/tcp_store_server_loop.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>

namespace tdist::store_detail {

namespace {

constexpr Millis kAcceptPause{100};  // after EMFILE and the like

}  // namespace

void TcpStoreServer::Loop::run() {
  std::vector<epoll_event> events(256);
  for (;;) {
    int n = ::epoll_wait(epoll.get(), events.data(), static_cast<int>(events.size()), next_timeout_ms());
    if (n < 0) {
      if (errno == EINTR) continue;
      TDIST_LOG(LogLevel::Error, name << ": epoll_wait failed: " << errno_string(errno) << "; stopping the server");
      break;
    }
    bool stop = false;
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        stop = true;
      } else if (id == kListenId) {
        accept_all();
      } else {
        on_event(id, events[i].events);
      }
    }
    if (stop) break;
    auto now = Clock::now();
    expire(now);
    if (now >= next_sweep) sweep(now);
    if (listen_paused && now >= listen_resume) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenId;
      if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, listen.get(), &ev) == 0) listen_paused = false;
      else listen_resume = now + kAcceptPause;
    }
    while (!ready.empty()) {
      uint64_t id = ready.back();
      ready.pop_back();
      auto it = conns.find(id);
      if (it != conns.end() && !it->second->closing) pump(*it->second);
    }
    for (uint64_t id : to_close) conns.erase(id);
    to_close.clear();
  }
  // Close every connection now so that blocked clients fail at once.
  conns.clear();
  listen.reset();
}

int TcpStoreServer::Loop::next_timeout_ms() const {
  std::optional<Clock::time_point> next;
  if (!timers.empty()) next = timers.begin()->first;
  if (!conns.empty() && (!next || next_sweep < *next)) next = next_sweep;
  if (listen_paused && (!next || listen_resume < *next)) next = listen_resume;
  if (!next) return -1;
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(*next - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<long long>((left + 999) / 1000, 24LL * 3600 * 1000));
}

void TcpStoreServer::Loop::accept_all() {
  for (;;) {
    int fd = ::accept4(listen.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINVAL) {  // stop_accepting(): no longer listening
        ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, listen.get(), nullptr);
        return;
      }
      // Out of descriptors or memory: stop accepting for a moment instead of
      // spinning on a listening socket that stays readable.
      TDIST_LOG(LogLevel::Warn, name << ": accept failed: " << errno_string(errno) << "; pausing new connections for "
                                     << format_ms(kAcceptPause));
      ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, listen.get(), nullptr);
      listen_paused = true;
      listen_resume = Clock::now() + kAcceptPause;
      return;
    }
    if (conns.size() - to_close.size() >= limits.max_connections && !make_room_for_a_connection()) {
      TDIST_LOG(LogLevel::Warn, name << ": refused a connection from " << peer_address(fd) << ": "
                                     << limits.max_connections << " clients are connected (TDIST_STORE_MAX_CONNECTIONS)");
      ::close(fd);
      continue;
    }
    set_nodelay(fd);
    auto c = std::make_unique<Conn>();
    c->id = next_conn++;
    c->fd = Fd(fd);
    c->peer = peer_address(fd);
    c->events = EPOLLIN | EPOLLRDHUP;
    epoll_event ev{};
    ev.events = c->events;
    ev.data.u64 = c->id;
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      TDIST_LOG(LogLevel::Warn, name << ": cannot watch connection from " << c->peer << ": " << errno_string(errno));
      continue;
    }
    TDIST_LOG(LogLevel::Debug, name << ": client " << c->peer << " connected");
    conns.emplace(c->id, std::move(c));
  }
}

void TcpStoreServer::Loop::on_event(uint64_t id, uint32_t events) {
  auto it = conns.find(id);
  if (it == conns.end() || it->second->closing) return;
  Conn& c = *it->second;
  if (events & EPOLLERR) return drop(c, LogLevel::Debug, "socket error");
  // A client never half-closes: a hang-up while it should be waiting for
  // its answer means it is gone (its parked wait goes with it).
  if ((events & (EPOLLHUP | EPOLLRDHUP)) && (c.waiter != 0 || c.writing()))
    return drop(c, LogLevel::Debug, "disconnected while its request was pending");
  if (events & EPOLLOUT) {
    flush(c);
    if (c.closing) return;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLOUT)) pump(c);
}


// Closes connections that did not authenticate within the handshake time,
// and connections idle (no request, no parked wait) for the idle timeout.
void TcpStoreServer::Loop::sweep(Clock::time_point now) {
  next_sweep = now + kSweepEvery;
  for (auto& [id, conn] : conns) {
    Conn& c = *conn;
    if (c.closing) continue;
    if (!c.authenticated && now - c.since > limits.handshake_time) {
      // torch's client opens a second, silent connection (for watch_key): said once already.
      const bool torch_companion = torch_client_seen && c.greeting_bytes == 0;
      drop(c, torch_companion ? LogLevel::Debug : LogLevel::Warn,
           "did not authenticate within " + format_ms(limits.handshake_time));
    } else if (c.authenticated && limits.idle_timeout.count() > 0 && c.waiter == 0 && !c.writing() &&
               !c.parser.in_progress() && now - c.since > limits.idle_timeout) {
      drop(c, LogLevel::Debug, "idle for " + format_ms(limits.idle_timeout) + " (TDIST_STORE_IDLE_TIMEOUT_S)");
    }
  }
}

// At the connection cap: closes the oldest connection that has not
// authenticated, so that strangers cannot lock the job's processes out.
bool TcpStoreServer::Loop::make_room_for_a_connection() {
  Conn* oldest = nullptr;
  for (auto& [id, conn] : conns)
    if (!conn->closing && !conn->authenticated && (!oldest || conn->since < oldest->since)) oldest = conn.get();
  if (!oldest) return false;
  drop(*oldest, LogLevel::Warn,
       "unauthenticated, and " + std::to_string(limits.max_connections) + " clients are connected (TDIST_STORE_MAX_CONNECTIONS)");
  return true;
}

}  // namespace tdist::store_detail
