// The TCPStore server: one event-loop thread (epoll, non-blocking sockets)
// holding the table; see tcp_store_protocol.h for what travels on the wire.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "util/socket.h"

namespace tdist::store_detail {

class TcpStoreServer {
 public:
  // Listens on every interface at `port` (0: the kernel picks one); throws
  // DistNetworkError naming the port when it cannot.
  explicit TcpStoreServer(uint16_t port);
  // Stops the loop and closes every connection (their clients then fail with
  // DistNetworkError).
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }

  // The server shared by multi_tenant TCPStores of this process on `port`
  // (a new one when none is alive, registered under its bound port).
  static std::shared_ptr<TcpStoreServer> shared(uint16_t port);

 private:
  struct Loop;
  uint16_t port_ = 0;
  Fd wake_;  // eventfd: written to stop the loop
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace tdist::store_detail
