// The TCPStore server's event loop, for the files that implement it (not
// for the rest of the library: tcp_store_server.h is the server's face).
// One thread owns everything here: the table, the connections, the parked
// waits and their timers; nothing blocks except epoll_wait.
//   tcp_store_server_loop.cpp        the loop: epoll, accepting, sweeping
//   tcp_store_server_connection.cpp  one connection: reading, answering, dropping
//   tcp_store_server_handshake.cpp   a new client: torch's or ours, hello, job token
//   tcp_store_server_torch.cpp       torch's clients: their requests over the same table
//   tcp_store_server_commands.cpp    the requests: limits, then each command
//   tcp_store_server_waiters.cpp     parked requests: waits, queue pops, timers
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/kv_table.h"
#include "store/tcp_store_protocol.h"
#include "store/tcp_store_server.h"
#include "util/deadline.h"
#include "util/job_token.h"
#include "util/logging.h"
#include "util/socket.h"

namespace tdist::store_detail {

// epoll data of the two descriptors that are not connections; connections count from 2.
constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 64 * 1024;  // one read into the scratch; a value with more to come is read in place
constexpr Millis kSweepEvery{1000};  // how often handshake and idle deadlines are checked

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
  std::string head;  // its first bytes, until they say whose client it is (classify_first_bytes)
  bool dialect_known = false;  // decided from `head`: torch's protocol (torch) or tdist's
  bool torch = false;          // a torch.distributed client (torch_store_protocol.h)
  TorchRequestParser torch_parser;
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
  bool torch_client_seen = false;  // a torch 1.x client: said once per server, a stranger must not fill the log
  bool torch_refusal_said = false;  // a torch client refused for the token: said once per server

  // The loop (tcp_store_server_loop.cpp).
  void run();
  int next_timeout_ms() const;
  void accept_all();
  void on_event(uint64_t id, uint32_t events);
  void sweep(Clock::time_point now);
  bool make_room_for_a_connection();

  // One connection (tcp_store_server_connection.cpp).
  void pump(Conn& c);
  void flush(Conn& c);
  void respond(Conn& c, const Response& r);
  void respond_error(Conn& c, std::string message);
  void send_bytes(Conn& c, const std::string& bytes);
  void update_interest(Conn& c);
  void drop(Conn& c, LogLevel level, const std::string& why);
  bool hung_up(Conn& c);

  // A new client (tcp_store_server_handshake.cpp).
  // Looks at the first bytes of a connection (kept in c.head) until they say
  // whose client it is; sets c.dialect_known and c.torch. False: dropped.
  bool probe_first_bytes(Conn& c, const char* data, size_t n);
  bool admits_torch_client(const Conn& c) const;
  void greet(Conn& c, Request& req);
  bool authenticate(Conn& c, const Request& req);

  // The requests (tcp_store_server_commands.cpp).
  void handle(Conn& c, Request req);
  std::optional<std::string> over_limit(const Request& req) const;
  void serve(Conn& c, Request req);
  bool all_present(const std::vector<std::string>& keys) const;
  std::vector<std::string> values_of(const std::vector<std::string>& keys) const;
  std::optional<int64_t> counter(const std::string& key) const;

  // torch's clients (tcp_store_server_torch.cpp).
  // Takes bytes of a torch client and serves its requests while it is not busy; false: dropped.
  bool feed_torch(Conn& c, const char* data, size_t n);
  void serve_torch(Conn& c, TorchRequest req);
  bool present_for_torch(const std::string& key) const;  // a key, or a queue with values (torch's WAIT)
  void wake_torch_queue_waiter(const std::string& queue);

  // Parked requests (tcp_store_server_waiters.cpp).
  void park(Conn& c, Request req);
  void notify(const std::string& key);
  bool deliver(const std::string& queue, std::string& value);
  void complete(uint64_t waiter_id);
  void expire(Clock::time_point now);
  void remove_waiter(uint64_t waiter_id);
};

}  // namespace tdist::store_detail
