#include "store/store_connection_pool.h"

#include "store/store_client.h"

namespace tdist::store_detail {

void StoreConnectionPool::keep(Fd conn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdle && broken_.empty()) idle_.push_back(std::move(conn));
}

Fd StoreConnectionPool::take(const std::string& name, Command c, std::span<const std::string* const> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.empty())
    throw DistNetworkError(name + ": " + describe_request(c, keys) + ": the connection to the server failed earlier (" +
                           broken_ + ")");
  if (idle_.empty()) return Fd();
  Fd conn = std::move(idle_.back());
  idle_.pop_back();
  return conn;
}

void StoreConnectionPool::fail(const std::string& name, Command c, std::span<const std::string* const> keys,
                               const DistNetworkError& e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = e.what();
    idle_.clear();
  }
  throw DistNetworkError(name + ": " + describe_request(c, keys) + ": " + e.what() + " (" + server_hint_ + ")");
}

}  // namespace tdist::store_detail
