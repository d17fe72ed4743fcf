// The TCPStore server's event loop. One thread owns everything below: the
// table, the connections, the parked waits and their timers; nothing here
// blocks except epoll_wait.
#include "store/tcp_store_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "store/kv_table.h"
#include "store/store_util.h"
#include "store/tcp_store_protocol.h"
#include "tdist/errors.h"
#include "util/job_token.h"
#include "util/logging.h"
#include "util/thread_name.h"

namespace tdist::store_detail {

namespace {

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kDirectChunk = 1 << 20;   // receive large values straight into place, 1 MiB at a time
constexpr size_t kReadBudget = 4 << 20;    // bytes read from one connection per wakeup (fairness)
constexpr Millis kAcceptPause{100};        // after EMFILE and the like
constexpr size_t kMaxGreetingBytes = 4096;  // what a client may send before it has authenticated
constexpr Millis kSweepEvery{1000};         // how often handshake and idle deadlines are checked

struct Conn {
  uint64_t id = 0;
  Fd fd;
  std::string peer;
  RequestParser parser;
  std::string in;  // bytes read but not yet parsed (the connection was busy): in[in_pos, end)
  size_t in_pos = 0;
  std::string out;  // response bytes not yet sent: out[out_pos, end)
  size_t out_pos = 0;
  bool greeted = false;
  bool authenticated = false;  // greeted, and proved the job token when the server has one
  bool closing = false;
  bool closing_after_flush = false;  // refused: close once the error is sent
  auth::Nonce client_nonce{}, server_nonce{};
  size_t greeting_bytes = 0;  // bytes received before authentication
  std::string head;  // its first bytes (up to kTorchProbeBytes): is it torch's client? (classify_first_bytes)
  Clock::time_point since = Clock::now();  // of the connection, then of its last request
  uint64_t waiter = 0;  // the parked request, 0 when none
  uint32_t events = 0;  // current epoll interest
  bool writing() const { return out_pos < out.size(); }
};

struct Waiter {
  uint64_t conn = 0;
  Command command = Command::kWait;
  std::vector<std::string> keys;     // as requested
  std::vector<std::string> watched;  // keys it is registered under in `watchers`
  size_t missing = 0;                // registered keys not yet set (existence waits)
  int64_t target = 0;                // WAIT_COUNTER
  int64_t timeout_ms = 0;
  bool has_timer = false;
  std::multimap<Clock::time_point, uint64_t>::iterator timer;
};

}  // namespace

struct TcpStoreServer::Loop {
  Fd listen;
  Fd epoll;
  int wake_fd = -1;
  std::string name;  // "TCPStore server on port N", for logs
  std::optional<std::string> token;  // the job token; nullopt: an open store
  StoreLimits limits;
  size_t buffered = 0;  // answer bytes held for all clients, not yet sent
  Clock::time_point next_sweep = Clock::now() + kSweepEvery;

  KvTable table;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  std::unordered_map<uint64_t, Waiter> waiters;
  std::unordered_map<std::string, std::vector<uint64_t>> watchers;
  std::multimap<Clock::time_point, uint64_t> timers;
  // Queues (QUEUE_PUSH/POP/LEN), apart from the table, and the pops parked
  // on each empty one, oldest first. A queue with values has no parked pop.
  std::unordered_map<std::string, std::deque<std::string>> queues;
  std::unordered_map<std::string, std::deque<uint64_t>> queue_poppers;
  size_t queue_bytes = 0;  // queue names and values held, counted against limits.max_bytes
  std::vector<uint64_t> to_close;  // dropped connections, erased at the end of an iteration
  std::vector<uint64_t> ready;     // connections whose next request may already be buffered
  std::vector<char> scratch = std::vector<char>(kReadChunk);  // every read lands here first
  uint64_t next_conn = 2;
  uint64_t next_waiter = 1;
  bool listen_paused = false;
  Clock::time_point listen_resume;
  bool torch_client_seen = false;  // said once per server: a stranger must not fill the log

  void run();
  void accept_all();
  void on_event(uint64_t id, uint32_t events);
  void pump(Conn& c);
  void flush(Conn& c);
  void handle(Conn& c, Request req);
  void respond(Conn& c, const Response& r);
  void respond_error(Conn& c, std::string message);
  bool all_present(const std::vector<std::string>& keys) const;
  std::vector<std::string> values_of(const std::vector<std::string>& keys) const;
  std::optional<int64_t> counter(const std::string& key) const;
  void park(Conn& c, Request req);
  void notify(const std::string& key);
  bool deliver(const std::string& queue, std::string& value);
  void complete(uint64_t waiter_id);
  void expire(Clock::time_point now);
  void remove_waiter(uint64_t waiter_id);
  void drop(Conn& c, LogLevel level, const std::string& why);
  // Looks at the first bytes of a connection; false: it was torch's client, and is dropped.
  bool probe_first_bytes(Conn& c, const char* data, size_t n);
  bool hung_up(Conn& c);
  void greet(Conn& c, Request& req);
  void serve(Conn& c, Request req);
  bool authenticate(Conn& c, const Request& req);
  void sweep(Clock::time_point now);
  bool make_room_for_a_connection();
  std::optional<std::string> over_limit(const Request& req) const;
  void update_interest(Conn& c);
  int next_timeout_ms() const;
};

// ---------------------------------------------------------------- loop

void TcpStoreServer::Loop::run() {
  std::vector<epoll_event> events(256);
  for (;;) {
    int n = ::epoll_wait(epoll.get(), events.data(), static_cast<int>(events.size()), next_timeout_ms());
    if (n < 0) {
      if (errno == EINTR) continue;
      TDIST_LOG(LogLevel::Error, name << ": epoll_wait failed: " << errno_string(errno) << "; stopping the server");
      break;
    }
    bool stop = false;
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        stop = true;
      } else if (id == kListenId) {
        accept_all();
      } else {
        on_event(id, events[i].events);
      }
    }
    if (stop) break;
    auto now = Clock::now();
    expire(now);
    if (now >= next_sweep) sweep(now);
    if (listen_paused && now >= listen_resume) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenId;
      if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, listen.get(), &ev) == 0) listen_paused = false;
      else listen_resume = now + kAcceptPause;
    }
    while (!ready.empty()) {
      uint64_t id = ready.back();
      ready.pop_back();
      auto it = conns.find(id);
      if (it != conns.end() && !it->second->closing) pump(*it->second);
    }
    for (uint64_t id : to_close) conns.erase(id);
    to_close.clear();
  }
  // Close every connection now so that blocked clients fail at once.
  conns.clear();
  listen.reset();
}

int TcpStoreServer::Loop::next_timeout_ms() const {
  std::optional<Clock::time_point> next;
  if (!timers.empty()) next = timers.begin()->first;
  if (!conns.empty() && (!next || next_sweep < *next)) next = next_sweep;
  if (listen_paused && (!next || listen_resume < *next)) next = listen_resume;
  if (!next) return -1;
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(*next - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<long long>((left + 999) / 1000, 24LL * 3600 * 1000));
}

void TcpStoreServer::Loop::accept_all() {
  for (;;) {
    int fd = ::accept4(listen.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINVAL) {  // stop_accepting(): no longer listening
        ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, listen.get(), nullptr);
        return;
      }
      // Out of descriptors or memory: stop accepting for a moment instead of
      // spinning on a listening socket that stays readable.
      TDIST_LOG(LogLevel::Warn, name << ": accept failed: " << errno_string(errno) << "; pausing new connections for "
                                     << format_ms(kAcceptPause));
      ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, listen.get(), nullptr);
      listen_paused = true;
      listen_resume = Clock::now() + kAcceptPause;
      return;
    }
    if (conns.size() - to_close.size() >= limits.max_connections && !make_room_for_a_connection()) {
      TDIST_LOG(LogLevel::Warn, name << ": refused a connection from " << peer_address(fd) << ": "
                                     << limits.max_connections << " clients are connected (TDIST_STORE_MAX_CONNECTIONS)");
      ::close(fd);
      continue;
    }
    set_nodelay(fd);
    auto c = std::make_unique<Conn>();
    c->id = next_conn++;
    c->fd = Fd(fd);
    c->peer = peer_address(fd);
    c->events = EPOLLIN | EPOLLRDHUP;
    epoll_event ev{};
    ev.events = c->events;
    ev.data.u64 = c->id;
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      TDIST_LOG(LogLevel::Warn, name << ": cannot watch connection from " << c->peer << ": " << errno_string(errno));
      continue;
    }
    TDIST_LOG(LogLevel::Debug, name << ": client " << c->peer << " connected");
    conns.emplace(c->id, std::move(c));
  }
}

void TcpStoreServer::Loop::on_event(uint64_t id, uint32_t events) {
  auto it = conns.find(id);
  if (it == conns.end() || it->second->closing) return;
  Conn& c = *it->second;
  if (events & EPOLLERR) return drop(c, LogLevel::Debug, "socket error");
  // A client never half-closes: a hang-up while it should be waiting for
  // its answer means it is gone (its parked wait goes with it).
  if ((events & (EPOLLHUP | EPOLLRDHUP)) && (c.waiter != 0 || c.writing()))
    return drop(c, LogLevel::Debug, "disconnected while its request was pending");
  if (events & EPOLLOUT) {
    flush(c);
    if (c.closing) return;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLOUT)) pump(c);
}

void TcpStoreServer::Loop::update_interest(Conn& c) {
  if (c.closing) return;
  uint32_t want = EPOLLRDHUP;
  if (c.writing()) want |= EPOLLOUT;
  else if (c.waiter == 0) want |= EPOLLIN;
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) != 0)
    return drop(c, LogLevel::Warn, "epoll_ctl failed: " + errno_string(errno));
  c.events = want;
}

void TcpStoreServer::Loop::drop(Conn& c, LogLevel level, const std::string& why) {
  if (c.closing) return;
  TDIST_LOG(level, name << ": dropping client " << c.peer << ": " << why);
  c.closing = true;
  if (c.waiter != 0) remove_waiter(c.waiter);
  c.waiter = 0;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  c.fd.reset();
  // Buffers go now, the object at the end of the iteration (callers may hold it).
  buffered -= c.out.size() - c.out_pos;
  std::string().swap(c.in);
  std::string().swap(c.out);
  c.parser = RequestParser();
  to_close.push_back(c.id);
}

// Reads and serves requests until the connection has to wait: for the
// socket, for its answer to be sent, or for a parked request.
void TcpStoreServer::Loop::pump(Conn& c) {
  auto busy = [&] { return c.closing || c.waiter != 0 || c.writing(); };
  // Feeds bytes to the parser, serving each complete request; what is left
  // when the connection becomes busy is kept for later. False: dropped.
  auto feed = [&](const char* data, size_t n) {
    if (!c.greeted && !probe_first_bytes(c, data, n)) return false;
    size_t pos = 0;
    while (pos < n && !busy()) {
      size_t used = 0;
      auto r = c.parser.feed(data + pos, n - pos, &used);
      pos += used;
      if (r == RequestParser::Result::kError) {
        drop(c, LogLevel::Info, "malformed request: " + c.parser.error());
        return false;
      }
      if (r == RequestParser::Result::kDone) handle(c, c.parser.take());
    }
    if (pos < n && !c.closing) c.in.append(data + pos, n - pos);  // at most one read's worth
    return !c.closing;
  };
  if (c.in_pos < c.in.size() && !busy()) {
    std::string pending = std::move(c.in);
    size_t from = c.in_pos;
    c.in.clear();
    c.in_pos = 0;
    if (!feed(pending.data() + from, pending.size() - from)) return;
  }
  size_t budget = kReadBudget;
  while (!busy() && budget > 0) {
    if (!c.authenticated && c.greeting_bytes > kMaxGreetingBytes)
      return drop(c, LogLevel::Warn, "sent " + std::to_string(c.greeting_bytes) + " bytes without authenticating");
    ssize_t n;
    size_t remaining = 0;
    if (std::string* value = c.parser.value_in_progress(&remaining); value != nullptr && remaining >= kReadChunk) {
      // A large value: receive straight into it, never more than announced.
      size_t chunk = std::min({remaining, kDirectChunk, budget});
      size_t old = value->size();
      value->resize(old + chunk);
      n = ::recv(c.fd.get(), value->data() + old, chunk, MSG_DONTWAIT);
      value->resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
      if (n > 0 && !c.authenticated) c.greeting_bytes += static_cast<size_t>(n);
      if (n > 0) {
        budget -= std::min(budget, static_cast<size_t>(n));
        if (c.parser.committed(static_cast<size_t>(n)) == RequestParser::Result::kDone) handle(c, c.parser.take());
        continue;
      }
    } else {
      n = ::recv(c.fd.get(), scratch.data(), scratch.size(), MSG_DONTWAIT);
      if (n > 0 && !c.authenticated) c.greeting_bytes += static_cast<size_t>(n);
      if (n > 0) {
        budget -= std::min(budget, static_cast<size_t>(n));
        if (!feed(scratch.data(), static_cast<size_t>(n))) return;
        continue;
      }
    }
    if (n == 0) {
      if (c.parser.in_progress()) return drop(c, LogLevel::Info, "disconnected in the middle of a request");
      return drop(c, LogLevel::Debug, "disconnected");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return drop(c, LogLevel::Debug, "receive failed: " + errno_string(errno));
  }
  update_interest(c);
}

bool TcpStoreServer::Loop::probe_first_bytes(Conn& c, const char* data, size_t n) {
  if (c.head.size() >= kTorchProbeBytes) return true;  // decided before
  c.head.append(data, std::min(n, kTorchProbeBytes - c.head.size()));
  const FirstBytes what = classify_first_bytes(c.head);
  if (what == FirstBytes::kNeedMore) return true;
  if (what == FirstBytes::kOther) {
    c.head.resize(kTorchProbeBytes);  // decided: not looked at again
    return true;
  }
  // Left to the parser, it would be dropped as malformed, and torch would say
  // only "Connection reset by peer": the one who launched the job hears why here.
  if (!torch_client_seen) {
    torch_client_seen = true;
    TDIST_LOG(LogLevel::Warn,
              name << ": a torch.distributed TCPStore client connected from " << c.peer
                   << "; this store speaks tdist's protocol, not torch's: add \"import tdist.torch\" to the program "
                      "(its env:// then joins this store, for backend \"gloo\" too, or use backend \"tdist\"), "
                      "or launch it with torchrun");
  }
  drop(c, LogLevel::Debug, "a torch.distributed TCPStore client (torch's protocol)");
  return false;
}

void TcpStoreServer::Loop::flush(Conn& c) {
  while (c.writing()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_pos += static_cast<size_t>(n);
      buffered -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return drop(c, LogLevel::Debug, "send failed: " + errno_string(errno));
  }
  if (!c.writing()) {
    c.out.clear();
    c.out_pos = 0;
    if (c.out.capacity() > kReadChunk) std::string().swap(c.out);
    if (c.closing_after_flush) return drop(c, LogLevel::Debug, "refused");
  }
  update_interest(c);
}

void TcpStoreServer::Loop::respond(Conn& c, const Response& r) {
  if (c.closing) return;
  if (!c.writing()) {
    c.out.clear();
    c.out_pos = 0;
  }
  std::string bytes = encode_response(r);
  buffered += bytes.size();
  c.out += bytes;
  flush(c);
}

void TcpStoreServer::Loop::respond_error(Conn& c, std::string message) {
  Response r;
  r.status = Status::kError;
  r.values.push_back(std::move(message));
  respond(c, r);
}

// ---------------------------------------------------------------- commands

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

void TcpStoreServer::Loop::greet(Conn& c, Request& req) {
  if (req.command != Command::kHello || req.arg != kMagic || req.values[0].size() != c.client_nonce.size())
    return drop(c, LogLevel::Warn, "the first request is not a TCPStore hello of this version (not a TCPStore client?)");
  c.greeted = true;
  std::memcpy(c.client_nonce.data(), req.values[0].data(), c.client_nonce.size());
  c.server_nonce = auth::random_nonce();
  Response r;
  r.num = kVersion;
  r.values.emplace_back(auth::view(c.server_nonce));
  r.values.emplace_back(token ? "token" : "open");
  if (token) {
    auth::Digest d = auth::hmac(*token, {"tdist-store-server", auth::view(c.client_nonce), auth::view(c.server_nonce)});
    r.values.emplace_back(reinterpret_cast<const char*>(d.data()), d.size());
  } else {
    c.authenticated = true;
  }
  respond(c, r);
}

bool TcpStoreServer::Loop::authenticate(Conn& c, const Request& req) {
  auth::Digest want =
      auth::hmac(*token, {"tdist-store-client", auth::view(c.client_nonce), auth::view(c.server_nonce)});
  auth::Digest got{};
  bool ok = req.command == Command::kAuth && req.values.size() == 1 && req.values[0].size() == got.size();
  if (ok) std::memcpy(got.data(), req.values[0].data(), got.size());
  if (!ok || !auth::equal(got, want)) {
    TDIST_LOG(LogLevel::Warn, name << ": refused client " << c.peer << ": "
                                   << (req.command == Command::kAuth ? "its proof of the job token is wrong"
                                                                     : "it sent a request before authenticating"));
    c.closing_after_flush = true;
    respond_error(c, "this TCPStore requires the job token, and the client's proof of it is wrong or missing "
                     "(every process of a job needs the same TDIST_JOB_TOKEN or TDIST_JOB_TOKEN_FILE)");
    return false;
  }
  c.authenticated = true;
  respond(c, Response{});
  return true;
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
    default:
      return std::nullopt;
  }
  if (table.bytes() + queue_bytes + grows > limits.max_bytes)
    return "the store holds " + std::to_string(table.bytes() + queue_bytes) + " bytes; " + std::to_string(grows) +
           " more would pass its limit of " + std::to_string(limits.max_bytes) + " (TDIST_STORE_MAX_BYTES)";
  return std::nullopt;
}

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

// Closes connections that did not authenticate within the handshake time,
// and connections idle (no request, no parked wait) for the idle timeout.
void TcpStoreServer::Loop::sweep(Clock::time_point now) {
  next_sweep = now + kSweepEvery;
  for (auto& [id, conn] : conns) {
    Conn& c = *conn;
    if (c.closing) continue;
    if (!c.authenticated && now - c.since > limits.handshake_time) {
      // torch's client opens a second, silent connection (for watch_key): said once already.
      const bool torch_companion = torch_client_seen && c.greeting_bytes == 0;
      drop(c, torch_companion ? LogLevel::Debug : LogLevel::Warn,
           "did not authenticate within " + format_ms(limits.handshake_time));
    } else if (c.authenticated && limits.idle_timeout.count() > 0 && c.waiter == 0 && !c.writing() &&
               !c.parser.in_progress() && now - c.since > limits.idle_timeout) {
      drop(c, LogLevel::Debug, "idle for " + format_ms(limits.idle_timeout) + " (TDIST_STORE_IDLE_TIMEOUT_S)");
    }
  }
}

// At the connection cap: closes the oldest connection that has not
// authenticated, so that strangers cannot lock the job's processes out.
bool TcpStoreServer::Loop::make_room_for_a_connection() {
  Conn* oldest = nullptr;
  for (auto& [id, conn] : conns)
    if (!conn->closing && !conn->authenticated && (!oldest || conn->since < oldest->since)) oldest = conn.get();
  if (!oldest) return false;
  drop(*oldest, LogLevel::Warn,
       "unauthenticated, and " + std::to_string(limits.max_connections) + " clients are connected (TDIST_STORE_MAX_CONNECTIONS)");
  return true;
}

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

// Whether the client has hung up (or its socket failed), though the loop may
// not have read that yet: a client sends nothing while it waits for an
// answer, so an end of stream next in its socket means it is gone.
bool TcpStoreServer::Loop::hung_up(Conn& c) {
  char byte;
  ssize_t peeked = ::recv(c.fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return peeked == 0 || (peeked < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
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

// ---------------------------------------------------------------- server

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
