// The TCPStore server's requests: each is checked against the limits, then
// served from the table and the queues, or parked until it can be.
#include "store/tcp_store_server_loop.h"

#include <new>
#include <string>
#include <vector>

#include "store/store_util.h"
#include "tdist/store.h"

namespace tdist::store_detail {

void TcpStoreServer::Loop::handle(Conn& c, Request req) {
  c.since = Clock::now();
  if (!c.greeted) return greet(c, req);
  if (!c.authenticated) {
    authenticate(c, req);
    return;
  }
  if (auto why = over_limit(req)) return respond_error(c, *why);
  try {
    serve(c, std::move(req));
  } catch (const std::bad_alloc&) {
    // The event loop lives on; only this request fails.
    respond_error(c, "the store server ran out of memory serving this request");
  }
}

// The request's answer or effect would cross a limit: the error text, else nullopt.
std::optional<std::string> TcpStoreServer::Loop::over_limit(const Request& req) const {
  size_t grows = 0;
  switch (req.command) {
    case Command::kSet:
    case Command::kMultiSet:
      for (size_t i = 0; i < req.keys.size(); ++i) grows += req.keys[i].size() + req.values[i].size();
      break;
    case Command::kCompareSet:
      grows = req.keys[0].size() + req.values[1].size();
      break;
    case Command::kQueuePush:
      grows = req.keys[0].size() + req.values[0].size();
      break;
    case Command::kQueuePop: {
      auto it = queues.find(req.keys[0]);
      const size_t answer = it == queues.end() || it->second.empty() ? 0 : it->second.front().size() + 8;
      if (buffered + answer > limits.max_buffered_bytes)
        return "answers of " + std::to_string(buffered) + " bytes wait to be sent to clients; " +
               std::to_string(answer) + " more would pass the limit of " + std::to_string(limits.max_buffered_bytes) +
               " (TDIST_STORE_MAX_BUFFERED_BYTES)";
      return std::nullopt;
    }
    case Command::kAppend: {
      const KvTable::Entry* e = table.find(req.keys[0]);
      size_t after = (e ? e->value.size() : 0) + req.values[0].size();
      if (after > TCPStore::kMaxValueBytes)
        return "append would grow the value of " + quote(req.keys[0]) + " to " + std::to_string(after) +
               " bytes, above the value limit of " + std::to_string(TCPStore::kMaxValueBytes);
      grows = req.keys[0].size() + req.values[0].size();
      break;
    }
    case Command::kGet:
    case Command::kMultiGet: {
      // Computed before any answer is built: a request naming one large key
      // many times must not make the server build a huge answer.
      size_t answer = 0;
      for (const auto& k : req.keys)
        if (const KvTable::Entry* e = table.find(k)) answer += e->value.size() + 8;
      if (answer > limits.max_answer_bytes)
        return "the answer would be " + std::to_string(answer) + " bytes, above the limit of " +
               std::to_string(limits.max_answer_bytes) + " (TDIST_STORE_MAX_ANSWER_BYTES)";
      if (buffered + answer > limits.max_buffered_bytes)
        return "answers of " + std::to_string(buffered) + " bytes wait to be sent to clients; " +
               std::to_string(answer) + " more would pass the limit of " + std::to_string(limits.max_buffered_bytes) +
               " (TDIST_STORE_MAX_BUFFERED_BYTES)";
      return std::nullopt;
    }
    case Command::kListKeys: {
      // The answer is one value per key: a client takes at most
      // kMaxKeysPerRequest of them, and the answer limits hold as for get.
      const size_t count = table.size() - (table.contains(kWorkersKey) ? 1 : 0) - (table.contains(kWaitedKey) ? 1 : 0);
      if (count > TCPStore::kMaxKeysPerRequest)
        return "the store holds " + std::to_string(count) + " keys, more than one list_keys answer carries (" +
               std::to_string(TCPStore::kMaxKeysPerRequest) + ")";
      const size_t answer = table.key_bytes() + 8 * table.size();
      if (answer > limits.max_answer_bytes || buffered + answer > limits.max_buffered_bytes)
        return "the list of keys would be " + std::to_string(answer) + " bytes, above the answer limits "
               "(TDIST_STORE_MAX_ANSWER_BYTES, TDIST_STORE_MAX_BUFFERED_BYTES)";
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
  if (table.bytes() + queue_bytes + grows > limits.max_bytes)
    return "the store holds " + std::to_string(table.bytes() + queue_bytes) + " bytes; " + std::to_string(grows) +
           " more would pass its limit of " + std::to_string(limits.max_bytes) + " (TDIST_STORE_MAX_BYTES)";
  return std::nullopt;
}

void TcpStoreServer::Loop::serve(Conn& c, Request req) {
  Response r;
  switch (req.command) {
    case Command::kHello:
    case Command::kAuth:
      return drop(c, LogLevel::Warn, "a second greeting on one connection");
    case Command::kSet:
      table.set(req.keys[0], std::move(req.values[0]));
      notify(req.keys[0]);
      break;
    case Command::kAppend:
      table.append(req.keys[0], req.values[0]);
      notify(req.keys[0]);
      break;
    case Command::kAdd: {
      int64_t result = 0;
      auto status = table.add(req.keys[0], req.arg, &result);
      if (status != KvTable::AddStatus::kOk) return respond_error(c, KvTable::add_error(status, result, req.arg));
      r.num = result;
      notify(req.keys[0]);
      break;
    }
    case Command::kCompareSet: {
      std::string after;
      bool wrote = table.compare_set(req.keys[0], req.values[0], req.values[1], &after);
      r.values.push_back(std::move(after));
      if (wrote) notify(req.keys[0]);
      break;
    }
    case Command::kCheck:
      r.num = all_present(req.keys) ? 1 : 0;
      break;
    case Command::kDelete:
      r.num = table.erase(req.keys[0]) ? 1 : 0;
      break;
    case Command::kNumKeys:
      r.num = static_cast<int64_t>(table.size()) - (table.contains(kWorkersKey) ? 1 : 0);
      break;
    case Command::kListKeys:
      r.values = table.keys();
      std::erase(r.values, kWorkersKey);
      std::erase(r.values, kWaitedKey);
      break;
    case Command::kMultiSet:
      for (size_t i = 0; i < req.keys.size(); ++i) table.set(req.keys[i], std::move(req.values[i]));
      for (const auto& k : req.keys) notify(k);
      break;
    case Command::kGet:
    case Command::kMultiGet:
    case Command::kWait:
      if (!all_present(req.keys)) return park(c, std::move(req));
      if (req.command != Command::kWait) r.values = values_of(req.keys);
      break;
    case Command::kQueuePush:
      if (deliver(req.keys[0], req.values[0])) break;
      queue_bytes += req.keys[0].size() + req.values[0].size();
      queues[req.keys[0]].push_back(std::move(req.values[0]));
      wake_torch_queue_waiter(req.keys[0]);
      break;
    case Command::kQueuePop: {
      auto it = queues.find(req.keys[0]);
      if (it == queues.end()) {
        if (req.arg >= 0) return park(c, std::move(req));
        r.status = Status::kTimeout;  // empty, and the client does not wait
        break;
      }
      // A client that sent its pop and died before this was read (its
      // hang-up is next in the socket) must take nothing: the value stays.
      if (hung_up(c)) return drop(c, LogLevel::Debug, "disconnected before its queue_pop was answered");
      queue_bytes -= req.keys[0].size() + it->second.front().size();
      r.values.push_back(std::move(it->second.front()));
      it->second.pop_front();
      if (it->second.empty()) queues.erase(it);  // an empty queue is no entry
      break;
    }
    case Command::kQueueLen: {
      auto it = queues.find(req.keys[0]);
      r.num = it == queues.end() ? 0 : static_cast<int64_t>(it->second.size());
      break;
    }
    case Command::kWaitCounter: {
      if (req.values[0].size() != 8) return drop(c, LogLevel::Info, "wait_counter target is not 8 bytes");
      auto now = counter(req.keys[0]);
      if (!now || *now < static_cast<int64_t>(get_u64(req.values[0].data()))) return park(c, std::move(req));
      r.num = *now;
      break;
    }
  }
  respond(c, r);
}

bool TcpStoreServer::Loop::all_present(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (!table.contains(k)) return false;
  return true;
}

std::vector<std::string> TcpStoreServer::Loop::values_of(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(table.find(k)->value);
  return out;
}

std::optional<int64_t> TcpStoreServer::Loop::counter(const std::string& key) const {
  const KvTable::Entry* e = table.find(key);
  if (e == nullptr || !e->counter) return std::nullopt;
  return parse_counter(e->value);
}

}  // namespace tdist::store_detail
