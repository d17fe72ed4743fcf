// The connections of one TCPStore client to its server, whichever protocol
// they speak (tdist's, tcp_store.cpp; torch's, torch_store_client.cpp): a
// request holds a connection for its whole round trip (a get may be parked on
// the server for long), so a thread that finds every connection busy opens
// another one instead of queueing behind it; a few are kept for reuse. After a
// network failure the server is presumed gone: the pool drops its connections
// and every later request fails at once with that first cause.
#pragma once

#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "store/tcp_store_protocol.h"
#include "tdist/errors.h"
#include "util/deadline.h"
#include "util/socket.h"

namespace tdist::store_detail {

class StoreConnectionPool {
 public:
  // `open` connects to the server and greets it by the deadline; `server_hint`
  // ends a network failure's message ("is the TCPStore server ... running?").
  StoreConnectionPool(std::function<Fd(Deadline)> open, std::string server_hint)
      : open_(std::move(open)), server_hint_(std::move(server_hint)) {}

  // Adds a greeted connection (the client's first) to those kept for reuse.
  void keep(Fd conn);

  // Runs `exchange(fd)` (one request and its answer) on a kept connection or
  // a new one, then keeps the connection. `name` and the request name the
  // client in errors.
  template <typename Exchange>
  Response call(const std::string& name, Command c, std::span<const std::string* const> keys, Deadline deadline,
                Exchange&& exchange) {
    Fd conn = take(name, c, keys);
    try {
      if (!conn.valid()) conn = open_(deadline);
      Response r = std::forward<Exchange>(exchange)(conn.get());
      keep(std::move(conn));
      return r;
    } catch (const DistNetworkError& e) {
      fail(name, c, keys, e);
    }
  }

 private:
  static constexpr size_t kMaxIdle = 8;

  // An idle connection, or an invalid Fd when none is; throws once broken.
  Fd take(const std::string& name, Command c, std::span<const std::string* const> keys);
  [[noreturn]] void fail(const std::string& name, Command c, std::span<const std::string* const> keys,
                         const DistNetworkError& e);

  const std::function<Fd(Deadline)> open_;
  const std::string server_hint_;
  std::mutex mu_;
  std::vector<Fd> idle_;  // connected, greeted, not in use
  std::string broken_;    // the first network failure, once one happened
};

}  // namespace tdist::store_detail
