// The TCPStore server: one event-loop thread (epoll, non-blocking sockets)
// holding the table; see tcp_store_protocol.h for what travels on the wire.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "util/deadline.h"
#include "util/socket.h"

namespace tdist::store_detail {

// What one server holds and serves at most; over a limit, the client that
// asked gets an error (or is closed, for the connection limits) and the server
// lives on. Read from TDIST_STORE_* when a server starts (README: Environment).
struct StoreLimits {
  size_t max_bytes = size_t{2} << 30;           // keys and values held
  size_t max_answer_bytes = size_t{1} << 30;    // one get/multi_get answer
  size_t max_buffered_bytes = size_t{2} << 30;  // answers not yet sent, all clients together
  size_t max_connections = 4096;                // never above half the descriptor limit
  Millis handshake_time{5000};                  // to say hello and authenticate
  Millis idle_timeout{0};                       // an authenticated client with nothing pending; 0: never
  // torch.distributed's clients cannot prove the job token: which of them a
  // store that has one serves (TDIST_STORE_TORCH_CLIENTS; without a token, all).
  enum class TorchClients { kLocal, kAll, kRefuse } torch_clients = TorchClients::kLocal;
  static StoreLimits from_environment();
};

class TcpStoreServer {
 public:
  // Listens at bind_host:port ("" or "*": every interface; port 0: the kernel
  // picks one); throws DistNetworkError naming them when it cannot. Requires
  // the job token (util/job_token.h) from its clients when this process has one.
  TcpStoreServer(const std::string& bind_host, uint16_t port);
  // Serves on a TCP socket the caller bound (and may have set listening),
  // which it takes over: closed with the server, also when this throws.
  // expected_port: 0, or the port it must be bound to (DistValueError else).
  TcpStoreServer(Fd listen_socket, uint16_t expected_port);
  // Stops the loop and closes every connection (their clients then fail with
  // DistNetworkError).
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }
  // New connections are refused from now on; connected clients are served.
  void stop_accepting();

  // The server shared by multi_tenant TCPStores of this process on `port`
  // (a new one when none is alive, registered under its bound port).
  static std::shared_ptr<TcpStoreServer> shared(const std::string& bind_host, uint16_t port);
  // A new server on the given socket (as above), registered for sharing.
  static std::shared_ptr<TcpStoreServer> shared(Fd listen_socket, uint16_t expected_port);

 private:
  struct Loop;
  void start(Fd listen);
  uint16_t port_ = 0;
  Fd wake_;  // eventfd: written to stop the loop
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace tdist::store_detail
