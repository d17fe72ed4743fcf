#include "util/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "tdist/errors.h"

namespace tdist {

void Fd::reset() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

std::string errno_string(int err) { return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"; }

std::string endpoint(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

namespace {

struct AddrInfo {
  addrinfo* head = nullptr;
  ~AddrInfo() {
    if (head) freeaddrinfo(head);
  }
};

int resolve(const std::string& host, uint16_t port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const char* node = (host.empty() || host == "*") ? nullptr : host.c_str();
  std::string service = std::to_string(port);
  return getaddrinfo(node, service.c_str(), &hints, &out.head);
}

// Binds `fd` to local address `from` (any port) for a connection of
// `family`; false with `error` set when it cannot.
bool bind_source(int fd, const std::string& from, int family, std::string& error) {
  AddrInfo local;
  if (int rc = resolve(from, 0, true, local); rc != 0) {
    error = "cannot resolve the local address " + from + ": " + gai_strerror(rc);
    return false;
  }
  error = "cannot send from " + from + ": it has no address of the destination's family";
  for (addrinfo* l = local.head; l != nullptr; l = l->ai_next) {
    if (l->ai_family != family) continue;
    if (::bind(fd, l->ai_addr, l->ai_addrlen) == 0) return true;
    error = "cannot send from " + from + ": " + errno_string(errno);
  }
  return false;
}

std::string sockaddr_text(const sockaddr_storage& ss, bool with_port) {
  char buf[INET6_ADDRSTRLEN] = {0};
  uint16_t port = 0;
  bool v6 = ss.ss_family == AF_INET6;
  if (v6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
  } else {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
  }
  if (!with_port) return buf;
  return endpoint(buf, port);
}

void wait_fd(int fd, short events, Deadline deadline, const std::string& what, const char* doing) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.poll_ms());
    if (rc > 0) return;
    if (rc == 0)
      throw DistNetworkError(std::string("timed out after ") + format_ms(deadline.timeout()) + " " + doing + " " + what);
    if (errno != EINTR) throw DistNetworkError(std::string("poll failed ") + doing + " " + what + ": " + errno_string(errno));
  }
}

}  // namespace

void set_nonblocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void set_cloexec(int fd) { fcntl(fd, F_SETFD, fcntl(fd, F_GETFD, 0) | FD_CLOEXEC); }

Fd listen_tcp(const std::string& host, uint16_t port, int backlog) {
  AddrInfo ai;
  int rc = resolve(host, port, true, ai);
  if (rc != 0)
    throw DistNetworkError("cannot resolve " + endpoint(host, port) + " to listen on: " + gai_strerror(rc));
  std::string last = "no address";
  for (addrinfo* a = ai.head; a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last = errno_string(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ai_family == AF_INET6) {
      int zero = 0;  // accept IPv4 too on a wildcard IPv6 socket
      setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
      last = errno_string(errno);
      continue;
    }
    return fd;
  }
  throw DistNetworkError("cannot listen on " + endpoint(host, port) + ": " + last);
}

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

std::string local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_text(ss, true);
}

std::string local_host(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return sockaddr_text(ss, false);
}

std::string peer_host(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return sockaddr_text(ss, false);
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_text(ss, true);
}

Fd connect_tcp(const std::string& host, uint16_t port, Deadline deadline, const std::string& what,
               const std::string& from) {
  auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(10);
  std::string last = "no attempt";
  for (;;) {
    AddrInfo ai;
    int rc = resolve(host, port, false, ai);
    if (rc != 0) {
      last = std::string("cannot resolve host: ") + gai_strerror(rc);
    } else {
      for (addrinfo* a = ai.head; a != nullptr; a = a->ai_next) {
        Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
        if (!fd.valid()) {
          last = errno_string(errno);
          continue;
        }
        if (!from.empty() && !bind_source(fd.get(), from, a->ai_family, last)) continue;
        set_nonblocking(fd.get(), true);
        int r = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
          pollfd p{fd.get(), POLLOUT, 0};
          Deadline step = deadline.earlier(Deadline::after(std::chrono::milliseconds(2000)));
          int pr = ::poll(&p, 1, step.poll_ms());
          int err = 0;
          socklen_t len = sizeof(err);
          if (pr > 0) getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
          r = (pr > 0 && err == 0) ? 0 : -1;
          errno = pr > 0 ? err : ETIMEDOUT;
        }
        if (r == 0) {
          set_nonblocking(fd.get(), false);
          set_nodelay(fd.get());
          return fd;
        }
        last = errno_string(errno);
      }
    }
    if (deadline.expired() || deadline.remaining() < std::chrono::milliseconds(1)) break;
    std::this_thread::sleep_for(std::min<Millis>(backoff, deadline.remaining()));
    backoff = std::min<Millis>(backoff * 2, std::chrono::milliseconds(1000));
  }
  auto waited = std::chrono::duration_cast<Millis>(Clock::now() - start);
  throw DistNetworkError(what + ": could not connect to " + endpoint(host, port) + " within " +
                         format_ms(deadline.timeout()) + " (waited " + format_ms(waited) + "); last error: " + last);
}

Fd accept_tcp(int listen_fd, Deadline deadline) {
  for (;;) {
    pollfd p{listen_fd, POLLIN, 0};
    int rc = ::poll(&p, 1, deadline.poll_ms());
    if (rc == 0) return Fd();
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw DistNetworkError("poll on listening socket " + local_address(listen_fd) + " failed: " + errno_string(errno));
    }
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      return Fd(fd);
    }
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
    throw DistNetworkError("accept on " + local_address(listen_fd) + " failed: " + errno_string(errno));
  }
}

void send_all(int fd, const void* data, size_t n, Deadline deadline, const std::string& what) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_fd(fd, POLLOUT, deadline, what, "sending to");
      continue;
    }
    throw DistNetworkError("send to " + what + " failed: " + errno_string(errno));
  }
}

void recv_all(int fd, void* data, size_t n, Deadline deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) throw DistNetworkError("connection closed by " + what);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_fd(fd, POLLIN, deadline, what, "receiving from");
      continue;
    }
    throw DistNetworkError("receive from " + what + " failed: " + errno_string(errno));
  }
}

}  // namespace tdist
