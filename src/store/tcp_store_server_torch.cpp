// torch.distributed's clients of the TCPStore server: their requests
// (torch_store_protocol.h) are served from the same table, queues and parked
// waits as tdist's, so a torch process and a tdist process meet in one store.
// Limits are tdist's; what torch's protocol cannot answer (an error, a limit
// crossed) closes that client's connection with the reason in the log.
#include <string>

#include "store/store_util.h"
#include "store/tcp_store_server_loop.h"

namespace tdist::store_detail {

namespace {

// What a parked torch WAIT may send before it is answered: its CANCEL_WAIT.
constexpr size_t kMaxBytesWhileParked = 4096;

std::string i64_bytes(int64_t v) {
  std::string out;
  put_torch_i64(out, v);
  return out;
}

}  // namespace

bool TcpStoreServer::Loop::feed_torch(Conn& c, const char* data, size_t n) {
  if (n > 0) c.torch_parser.append(data, n);
  while (!c.closing && !c.writing()) {
    if (c.waiter != 0 && c.torch_parser.buffered() > kMaxBytesWhileParked) {
      drop(c, LogLevel::Warn, "sent " + std::to_string(c.torch_parser.buffered()) +
                                  " bytes while its wait was parked (torch's client sends only CANCEL_WAIT then)");
      return false;
    }
    TorchRequest req;
    const auto r = c.torch_parser.next(&req);
    if (r == TorchRequestParser::Result::kNeedMore) break;
    if (r == TorchRequestParser::Result::kError) {
      drop(c, LogLevel::Warn, "malformed torch.distributed request: " + c.torch_parser.error());
      return false;
    }
    c.since = Clock::now();
    serve_torch(c, std::move(req));
  }
  return !c.closing;
}

void TcpStoreServer::Loop::serve_torch(Conn& c, TorchRequest req) {
  const char* what = torch_query_name(req.query);
  if (!c.greeted) {
    // torch's client opens with VALIDATE and its magic (probe_first_bytes saw them).
    if (req.query != TorchQuery::kValidate || req.word != kTorchValidateMagic)
      return drop(c, LogLevel::Warn, std::string("a torch client's first request is ") + what + ", not VALIDATE");
    c.greeted = c.authenticated = true;
    return;
  }
  if (c.waiter != 0 && req.query != TorchQuery::kCancelWait)
    return drop(c, LogLevel::Warn, std::string("sent ") + what + " while its wait was parked");
  std::vector<std::string> keys;
  keys.reserve(req.keys.size());
  for (const auto& k : req.keys) keys.push_back(torch_key_to_table(k));
  // The limits of tdist's requests (memory held, answer sizes) apply as they are.
  auto check = [&](Command as) {
    Request asked{as, 0, std::move(keys), std::move(req.values)};  // moved there and back: values may be large
    auto why = over_limit(asked);
    keys = std::move(asked.keys);
    req.values = std::move(asked.values);
    if (why) drop(c, LogLevel::Warn, std::string(what) + ": " + *why);
    return !why;
  };
  std::string out;
  switch (req.query) {
    case TorchQuery::kValidate:
      return drop(c, LogLevel::Warn, "a second VALIDATE on one connection");
    case TorchQuery::kPing:
      put_torch_u32(out, req.word);
      break;
    case TorchQuery::kSet:
      if (!check(Command::kSet)) return;
      table.set(keys[0], std::move(req.values[0]));
      notify(keys[0]);
      return;
    case TorchQuery::kAppend:
      if (!check(Command::kAppend)) return;
      table.append(keys[0], req.values[0]);
      notify(keys[0]);
      return;
    case TorchQuery::kMultiSet:
      if (!check(Command::kMultiSet)) return;
      for (size_t i = 0; i < keys.size(); ++i) table.set(keys[i], std::move(req.values[i]));
      for (const auto& k : keys) notify(k);
      return;
    case TorchQuery::kCompareSet: {
      if (!check(Command::kCompareSet)) return;
      std::string after;
      if (table.compare_set(keys[0], req.values[0], req.values[1], &after)) notify(keys[0]);
      put_torch_string(out, after);
      break;
    }
    case TorchQuery::kGet:
    case TorchQuery::kMultiGet:
      // torch's client waits for the keys first; a key deleted since reads as "" (as torch's server answers).
      if (!check(Command::kMultiGet)) return;
      for (const auto& k : keys) {
        const KvTable::Entry* e = table.find(k);
        put_torch_string(out, e ? e->value : std::string());
      }
      break;
    case TorchQuery::kAdd: {
      int64_t result = 0;
      auto status = table.add(keys[0], req.number, &result);
      if (status != KvTable::AddStatus::kOk)
        return drop(c, LogLevel::Warn, "ADD(key " + quote(keys[0]) + "): " + KvTable::add_error(status, result, req.number));
      notify(keys[0]);
      out = i64_bytes(result);
      break;
    }
    case TorchQuery::kCheck: {
      bool all = true;
      for (const auto& k : keys) all = all && present_for_torch(k);
      out.push_back(static_cast<char>(all ? kTorchReady : kTorchNotReady));
      break;
    }
    case TorchQuery::kWait: {
      bool all = true;
      for (const auto& k : keys) all = all && present_for_torch(k);
      if (!all) return park(c, Request{Command::kWait, kForever.count(), std::move(keys), {}});  // no timeout: torch cancels
      out.push_back(static_cast<char>(kTorchStopWaiting));
      break;
    }
    case TorchQuery::kBarrier: {
      // Counts this arrival in the key (a counter, as ADD's) and waits for the count to reach the world size.
      int64_t count = 0;
      auto status = table.add(keys[0], 1, &count);
      if (status != KvTable::AddStatus::kOk)
        return drop(c, LogLevel::Warn, "BARRIER(key " + quote(keys[0]) + "): " + KvTable::add_error(status, count, 1));
      notify(keys[0]);
      if (count < req.number) {
        std::string target;
        put_u64(target, static_cast<uint64_t>(req.number));
        return park(c, Request{Command::kWaitCounter, kForever.count(), std::move(keys), {std::move(target)}});
      }
      out.push_back(static_cast<char>(kTorchStopWaiting));
      break;
    }
    case TorchQuery::kCancelWait:
      if (c.waiter != 0) remove_waiter(c.waiter);
      c.waiter = 0;
      out.push_back(static_cast<char>(kTorchWaitCanceled));
      break;
    case TorchQuery::kGetNumKeys:
      out = i64_bytes(static_cast<int64_t>(table.size()) - (table.contains(kWorkersKey) ? 1 : 0));
      break;
    case TorchQuery::kDeleteKey:
      out = i64_bytes(table.erase(keys[0]) ? 1 : 0);
      break;
    case TorchQuery::kListKeys: {
      std::vector<std::string> wire;
      size_t bytes = 0;
      for (const auto& k : table.keys()) {
        std::string w;
        if (!table_key_to_torch(k, &w)) continue;
        bytes += w.size() + 8;
        wire.push_back(std::move(w));
      }
      if (bytes > limits.max_answer_bytes)
        return drop(c, LogLevel::Warn, "LIST_KEYS: the answer would be " + std::to_string(bytes) +
                                           " bytes, above the limit of " + std::to_string(limits.max_answer_bytes) +
                                           " (TDIST_STORE_MAX_ANSWER_BYTES)");
      out = i64_bytes(static_cast<int64_t>(wire.size()));
      for (const auto& w : wire) put_torch_string(out, w);
      break;
    }
    case TorchQuery::kQueuePush: {
      if (!check(Command::kQueuePush)) return;
      if (deliver(keys[0], req.values[0])) return;  // a parked pop (tdist's client) took it
      queue_bytes += keys[0].size() + req.values[0].size();
      queues[keys[0]].push_back(std::move(req.values[0]));
      wake_torch_queue_waiter(keys[0]);
      return;
    }
    case TorchQuery::kQueuePop: {
      // Never waits (torch's client waits on the queue's name first, with WAIT).
      auto it = queues.find(keys[0]);
      if (it == queues.end()) {
        out = i64_bytes(0);
        break;
      }
      out = i64_bytes(static_cast<int64_t>(it->second.size()));
      queue_bytes -= keys[0].size() + it->second.front().size();
      put_torch_string(out, it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queues.erase(it);
      break;
    }
    case TorchQuery::kQueueLen: {
      auto it = queues.find(keys[0]);
      out = i64_bytes(it == queues.end() ? 0 : static_cast<int64_t>(it->second.size()));
      break;
    }
  }
  send_bytes(c, out);
}

bool TcpStoreServer::Loop::present_for_torch(const std::string& key) const {
  if (table.contains(key)) return true;
  auto it = queues.find(key);
  return it != queues.end() && !it->second.empty();
}

// A value came into a queue that no pop was parked on: as torch's server,
// wake one torch client waiting on the queue's name (its QUEUE_POP follows).
void TcpStoreServer::Loop::wake_torch_queue_waiter(const std::string& queue) {
  auto it = watchers.find(queue);
  if (it == watchers.end()) return;
  for (uint64_t id : it->second) {
    auto wit = waiters.find(id);
    if (wit == waiters.end() || wit->second.command != Command::kWait || wit->second.keys.size() != 1) continue;
    auto cit = conns.find(wit->second.conn);
    if (cit == conns.end() || !cit->second->torch) continue;
    return complete(id);
  }
}

}  // namespace tdist::store_detail
