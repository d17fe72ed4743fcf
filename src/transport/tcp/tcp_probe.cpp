// TcpTransport::peers_refusing: the failure agreement's proof of death for a
// peer this rank never connected to, or whose connection said nothing useful
// (a rank of another host behind that host's shared-memory leader).
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_transport.h"
#include "util/socket.h"

namespace tdist {

namespace {

// Starts a non-blocking connect to host:port. Returns the socket (in
// progress or connected), or an invalid Fd with `*refused` telling whether
// the kernel refused at once (a peer of this host).
Fd start_connect(const std::string& host, uint16_t port, bool* refused) {
  *refused = false;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST;  // records hold addresses; never wait on a name server
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) return Fd();
  Fd fd(::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int rc = fd.valid() ? ::connect(fd.get(), found->ai_addr, found->ai_addrlen) : -1;
  const int err = errno;
  ::freeaddrinfo(found);
  if (!fd.valid() || rc == 0 || err == EINPROGRESS) return fd;
  *refused = err == ECONNREFUSED;
  return Fd();
}

}  // namespace

std::vector<int> TcpTransport::peers_refusing(const std::vector<int>& peers, Millis limit) const {
  const Directory& d = *directory_;
  std::vector<int> refusing;
  std::vector<Fd> sockets;
  std::vector<int> of;  // the peer of each socket
  for (int peer : peers) {
    if (peer < 0 || peer >= size_ || peer == rank_) continue;
    const tcp::PeerRecord& info = d.records[static_cast<size_t>(peer)];
    // The address its listener surely binds: its first interface's listener,
    // else the first address it published (the bound one, or any where it
    // binds all).
    const bool by_interface = !info.endpoints.empty();
    if (!by_interface && info.addresses.empty()) continue;
    const std::string host = by_interface ? info.endpoints.front().address : info.addresses.front();
    const uint16_t port = by_interface ? info.endpoints.front().port : info.port;
    bool refused = false;
    Fd fd = start_connect(host, port, &refused);
    if (refused) refusing.push_back(peer);
    if (!fd.valid()) continue;
    sockets.push_back(std::move(fd));
    of.push_back(peer);
  }
  std::vector<pollfd> fds;
  for (const Fd& fd : sockets) fds.push_back(pollfd{fd.get(), POLLOUT, 0});
  const Deadline deadline = Deadline::after(limit);
  size_t settled = 0;
  while (settled < fds.size() && !deadline.expired()) {
    const int rc = ::poll(fds.data(), fds.size(), deadline.poll_ms());
    if (rc < 0 && errno != EINTR) break;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == ECONNREFUSED) refusing.push_back(of[i]);
      fds[i].fd = -1;  // settled: connected (alive, or a reused port) or failed otherwise
      ++settled;
    }
  }
  // The sockets close here: a connection a live peer accepted ends before any
  // byte, which its acceptor drops without a warning.
  return refusing;
}

}  // namespace tdist
