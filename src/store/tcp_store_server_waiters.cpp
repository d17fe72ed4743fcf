// The TCPStore server's parked requests: waits for keys, wait_counter
// targets and queue pops, the keys they watch, and their timers.
#include "store/tcp_store_server_loop.h"

#include <algorithm>
#include <string>

#include "store/store_util.h"

namespace tdist::store_detail {

void TcpStoreServer::Loop::park(Conn& c, Request req) {
  uint64_t id = next_waiter++;
  Waiter w;
  w.conn = c.id;
  w.command = req.command;
  w.timeout_ms = std::max<int64_t>(req.arg, 0);
  if (req.command == Command::kQueuePop) {
    queue_poppers[req.keys[0]].push_back(id);
  } else if (req.command == Command::kWaitCounter) {
    w.target = static_cast<int64_t>(get_u64(req.values[0].data()));
    w.watched.push_back(req.keys[0]);
  } else {
    w.watched = missing_keys(req.keys, [&](const std::string& k) { return table.contains(k); });
    w.missing = w.watched.size();
  }
  w.keys = std::move(req.keys);
  for (const auto& k : w.watched) watchers[k].push_back(id);
  if (Millis(w.timeout_ms) < kForever) {
    w.timer = timers.emplace(Clock::now() + Millis(w.timeout_ms), id);
    w.has_timer = true;
  }
  waiters.emplace(id, std::move(w));
  c.waiter = id;
  update_interest(c);
}

void TcpStoreServer::Loop::notify(const std::string& key) {
  auto it = watchers.find(key);
  if (it == watchers.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  watchers.erase(it);
  for (uint64_t id : ids) {
    auto wit = waiters.find(id);
    if (wit == waiters.end()) continue;
    Waiter& w = wit->second;
    if (w.command == Command::kWaitCounter) {
      auto now = counter(key);
      if (now && *now >= w.target) complete(id);
      else watchers[key].push_back(id);
      continue;
    }
    if (w.missing > 0) --w.missing;
    if (w.missing > 0) continue;
    // Every key it waited for has been set; one may have been deleted since.
    auto still = missing_keys(w.keys, [&](const std::string& k) { return table.contains(k); });
    if (still.empty()) {
      complete(id);
      continue;
    }
    for (const auto& k : still) {
      watchers[k].push_back(id);
      w.watched.push_back(k);
    }
    w.missing = still.size();
  }
}

// Hands a pushed value to the longest-parked pop of the queue; false when
// none takes it (the value is then still in `value`).
bool TcpStoreServer::Loop::deliver(const std::string& queue, std::string& value) {
  for (;;) {
    auto it = queue_poppers.find(queue);
    if (it == queue_poppers.end()) return false;
    const uint64_t id = it->second.front();
    const uint64_t conn_id = waiters.at(id).conn;
    auto cit = conns.find(conn_id);
    if (cit == conns.end() || cit->second->closing) {
      remove_waiter(id);  // also from queue_poppers
      continue;
    }
    Conn& c = *cit->second;
    // A popper that died may not have been noticed yet (its hang-up still
    // waits in epoll): look, or the value would go to a closed socket.
    if (hung_up(c)) {
      drop(c, LogLevel::Debug, "disconnected while its queue_pop was parked");  // removes the waiter
      continue;
    }
    remove_waiter(id);
    c.waiter = 0;
    Response r;
    r.values.push_back(std::move(value));
    respond(c, r);
    ready.push_back(conn_id);
    if (!c.closing) return true;
    value = std::move(r.values[0]);  // the send failed at once: the next pop gets it
  }
}

void TcpStoreServer::Loop::complete(uint64_t waiter_id) {
  Waiter& w = waiters.at(waiter_id);
  Response r;
  if (w.command == Command::kGet || w.command == Command::kMultiGet) {
    // The keys arrived after the request was checked: check the answer again.
    Request asked{w.command, 0, w.keys, {}};
    if (auto why = over_limit(asked)) {
      r.status = Status::kError;
      r.values.push_back(*why);
    } else {
      r.values = values_of(w.keys);
    }
  }
  if (w.command == Command::kWaitCounter) r.num = counter(w.keys[0]).value_or(0);
  uint64_t conn_id = w.conn;
  remove_waiter(waiter_id);
  auto it = conns.find(conn_id);
  if (it == conns.end() || it->second->closing) return;
  it->second->waiter = 0;
  respond(*it->second, r);
  ready.push_back(conn_id);
}

void TcpStoreServer::Loop::expire(Clock::time_point now) {
  while (!timers.empty() && timers.begin()->first <= now) {
    uint64_t id = timers.begin()->second;
    Waiter& w = waiters.at(id);
    Response r;
    r.status = Status::kTimeout;
    if (w.command == Command::kWaitCounter) r.num = counter(w.keys[0]).value_or(0);
    else if (w.command != Command::kQueuePop) r.values = missing_keys(w.keys, [&](const std::string& k) { return table.contains(k); });
    uint64_t conn_id = w.conn;
    remove_waiter(id);
    auto it = conns.find(conn_id);
    if (it == conns.end() || it->second->closing) continue;
    it->second->waiter = 0;
    respond(*it->second, r);
    ready.push_back(conn_id);
  }
}

void TcpStoreServer::Loop::remove_waiter(uint64_t waiter_id) {
  auto wit = waiters.find(waiter_id);
  if (wit == waiters.end()) return;
  Waiter& w = wit->second;
  for (const auto& k : w.watched) {
    auto it = watchers.find(k);
    if (it == watchers.end()) continue;
    std::erase(it->second, waiter_id);
    if (it->second.empty()) watchers.erase(it);
  }
  if (w.command == Command::kQueuePop) {
    auto it = queue_poppers.find(w.keys[0]);
    if (it != queue_poppers.end()) {
      std::erase(it->second, waiter_id);
      if (it->second.empty()) queue_poppers.erase(it);
    }
  }
  if (w.has_timer) timers.erase(w.timer);
  waiters.erase(wit);
}

}  // namespace tdist::store_detail
