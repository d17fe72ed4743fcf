// The TCPStore server object: opens the listening socket, runs the event loop
// (tcp_store_server_loop.h) on its own thread, stops it; and the servers
// multi_tenant stores of this process share, by port.
#include "store/tcp_store_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "store/tcp_store_server_loop.h"
#include "tdist/errors.h"
#include "util/job_token.h"
#include "util/logging.h"
#include "util/thread_name.h"

namespace tdist::store_detail {

TcpStoreServer::TcpStoreServer(const std::string& bind_host, uint16_t port) : loop_(std::make_unique<Loop>()) {
  start(listen_tcp(bind_host, port));
}

TcpStoreServer::TcpStoreServer(Fd listen, uint16_t expected_port) : loop_(std::make_unique<Loop>()) {
  const std::string what = "master_listen_fd " + std::to_string(listen.get());
  int type = 0;
  socklen_t type_len = sizeof(type);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (!listen.valid() || ::getsockopt(listen.get(), SOL_SOCKET, SO_TYPE, &type, &type_len) != 0)
    throw DistValueError(what + " is not a socket: " + errno_string(errno));
  if (::getsockname(listen.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0 ||
      (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) || type != SOCK_STREAM)
    throw DistValueError(what + " is not a TCP socket");
  const uint16_t bound = local_port(listen.get());
  if (bound == 0) throw DistValueError(what + " is not bound to a port (bind it before passing it)");
  if (expected_port != 0 && bound != expected_port)
    throw DistValueError(what + " is bound to port " + std::to_string(bound) + ", expected to be bound to port " +
                         std::to_string(expected_port));
  // Listening already, or not yet: listen() makes it so either way.
  if (::listen(listen.get(), 1024) != 0)
    throw DistNetworkError("cannot listen on " + what + " (" + local_address(listen.get()) + "): " +
                           errno_string(errno));
  set_cloexec(listen.get());
  start(std::move(listen));
}

void TcpStoreServer::start(Fd listen) {
  loop_->token = auth::job_token();
  loop_->limits = StoreLimits::from_environment();
  loop_->listen = std::move(listen);
  set_nonblocking(loop_->listen.get(), true);
  port_ = local_port(loop_->listen.get());
  loop_->name = "TCPStore server on " + local_address(loop_->listen.get());
  if (!loop_->token) auth::warn_open_once(loop_->name);
  loop_->epoll = Fd(::epoll_create1(EPOLL_CLOEXEC));
  wake_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!loop_->epoll.valid() || !wake_.valid())
    throw DistNetworkError(loop_->name + ": cannot create epoll/eventfd: " + errno_string(errno));
  loop_->wake_fd = wake_.get();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  ::epoll_ctl(loop_->epoll.get(), EPOLL_CTL_ADD, loop_->listen.get(), &ev);
  ev.data.u64 = kWakeId;
  ::epoll_ctl(loop_->epoll.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  thread_ = std::thread([loop = loop_.get()] {
    try {
      loop->run();
    } catch (const std::exception& e) {
      // Only allocation failure can get here; the clients see their connections close.
      TDIST_LOG(LogLevel::Error, loop->name << ": event loop failed: " << e.what());
      loop->conns.clear();
      loop->listen.reset();
    }
  });
  name_thread(thread_, "tdist-store");
  TDIST_LOG(LogLevel::Debug, loop_->name << ": listening");
}

void TcpStoreServer::stop_accepting() {
  // The loop thread owns the socket; a shut-down listening socket stops
  // listening (connections are refused) and its accept fails with EINVAL.
  ::shutdown(loop_->listen.get(), SHUT_RDWR);
}

TcpStoreServer::~TcpStoreServer() {
  uint64_t one = 1;
  ssize_t rc = ::write(wake_.get(), &one, sizeof(one));
  (void)rc;
  if (thread_.joinable()) thread_.join();
  TDIST_LOG(LogLevel::Debug, loop_->name << ": stopped");
}

namespace {

// The servers of multi_tenant stores in this process, by port.
struct SharedServers {
  std::mutex mu;
  std::map<uint16_t, std::weak_ptr<TcpStoreServer>> by_port;
};
SharedServers& shared_servers() {
  static SharedServers s;
  return s;
}

}  // namespace

std::shared_ptr<TcpStoreServer> TcpStoreServer::shared(const std::string& bind_host, uint16_t port) {
  auto& reg = shared_servers();
  std::lock_guard<std::mutex> lock(reg.mu);
  std::erase_if(reg.by_port, [](const auto& kv) { return kv.second.expired(); });
  if (port != 0) {
    auto it = reg.by_port.find(port);
    if (it != reg.by_port.end())
      if (auto s = it->second.lock()) return s;
  }
  auto s = std::make_shared<TcpStoreServer>(bind_host, port);
  reg.by_port[s->port()] = s;
  return s;
}

std::shared_ptr<TcpStoreServer> TcpStoreServer::shared(Fd listen_socket, uint16_t expected_port) {
  auto s = std::make_shared<TcpStoreServer>(std::move(listen_socket), expected_port);
  auto& reg = shared_servers();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.by_port[s->port()] = s;
  return s;
}

}  // namespace tdist::store_detail
