// Thin RAII sockets with deadlines; IPv4 and IPv6 through getaddrinfo.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "util/deadline.h"

namespace tdist {

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
};

std::string errno_string(int err);

// Listens on host:port (port 0: the kernel picks one; host "" or "*": every
// interface). Throws DistNetworkError naming host and port on failure.
Fd listen_tcp(const std::string& host, uint16_t port, int backlog = 1024);
uint16_t local_port(int fd);
// "host:port" of the socket's local or remote end.
std::string local_address(int fd);
std::string peer_address(int fd);
// "host:port", or "[v6]:port".
std::string endpoint(const std::string& host, uint16_t port);
// The host part of the address the socket is bound to, or connected to, as text.
std::string local_host(int fd);
std::string peer_host(int fd);

// Connects to host:port, retrying with backoff (refused, unreachable, name not
// yet resolvable) until the deadline; then DistNetworkError naming host, port,
// time waited and the last error. `what` names who is connecting, for messages.
// `from`: a local address to send from (the interface a connection must
// leave through, where a rank has several); "" lets routing choose.
Fd connect_tcp(const std::string& host, uint16_t port, Deadline deadline, const std::string& what,
               const std::string& from = "");

// Accepts one connection, waiting up to the deadline (nullopt-like: invalid Fd on timeout).
Fd accept_tcp(int listen_fd, Deadline deadline);

void set_nonblocking(int fd, bool on);
void set_nodelay(int fd);
void set_cloexec(int fd);

// Blocking full transfers with a deadline (poll-based; works on blocking and
// non-blocking sockets). Throw DistNetworkError naming `what` on EOF, error or
// deadline; `what` should name the peer.
void send_all(int fd, const void* data, size_t n, Deadline deadline, const std::string& what);
void recv_all(int fd, void* data, size_t n, Deadline deadline, const std::string& what);

}  // namespace tdist
