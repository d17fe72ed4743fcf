// TCPStore: a client of the TCPStore server (tcp_store_server.h), plus the
// server itself when is_master. Thread-safe: one request at a time per
// connection, and a connection per concurrently waiting thread.
#include <algorithm>
#include <span>

#include "store/store_client.h"
#include "store/store_connection_pool.h"
#include "store/store_util.h"
#include "store/tcp_store_protocol.h"
#include "store/tcp_store_server.h"
#include "tdist/errors.h"
#include "tdist/store.h"
#include "util/bind_address.h"
#include "util/job_token.h"
#include "util/logging.h"
#include "util/socket.h"

namespace tdist {

using namespace store_detail;

namespace {

// The client waits this much longer than the server for a parked request:
// the server answers TIMEOUT first unless it is gone or unreachable.
Millis reply_margin(Millis timeout) { return std::clamp(timeout / 10, Millis(1000), Millis(30000)); }

int64_t timeout_arg(Millis timeout) {
  return std::clamp<int64_t>(timeout.count(), 0, kForever.count());
}

}  // namespace

std::string store_detail::describe_request(Command c, std::span<const std::string* const> keys) {
  std::string out = command_name(c);
  if (c == Command::kWaitCounter) return "wait_for_workers";
  if (c == Command::kHello || c == Command::kNumKeys || c == Command::kListKeys) return out;
  if (keys.size() == 1 && c != Command::kCheck && c != Command::kWait && c != Command::kMultiGet &&
      c != Command::kMultiSet)
    return out + "(key " + quote(*keys[0]) + ")";
  std::vector<std::string> list;
  for (size_t i = 0; i < keys.size() && i < 9; ++i) list.push_back(*keys[i]);
  std::string shown = quote_list(list);
  if (keys.size() > 9) shown.insert(shown.size() - 1, " ... (" + std::to_string(keys.size()) + " keys)");
  return out + "(keys " + shown + ")";
}

namespace {

std::string describe(Command c, std::span<const std::string* const> keys) { return describe_request(c, keys); }

// Thread-safe: its connections are a StoreConnectionPool.
class Client final : public StoreClient {
 public:
  Client(const std::string& host, uint16_t port, Millis timeout)
      : host_(host),
        port_(port),
        name_("TCPStore(" + endpoint(host, port) + ")"),
        peer_("TCPStore server " + endpoint(host, port)),
        token_(auth::job_token()),
        value_limit_("the limit of " + std::to_string(TCPStore::kMaxValueBytes)),
        pool_([this](Deadline deadline) { return open(deadline); },
              "is the TCPStore server, the master's process, still running?") {
    Fd first = open(deadline_after(timeout));
    // A host name is resolved once: every later connection goes to the
    // address the first one reached, since another lookup (DNS round robin,
    // a changed hosts file) could answer with another machine.
    address_ = peer_host(first.get());
    if (!address_.empty() && address_ != host_) {
      name_ = "TCPStore(" + endpoint(host_, port_) + " at " + endpoint(address_, port_) + ")";
      peer_ = "TCPStore server " + endpoint(host_, port_) + " at " + endpoint(address_, port_);
    }
    pool_.keep(std::move(first));
  }

  const std::string& name() const override { return name_; }

  Response call(Command c, std::span<const std::string* const> keys, std::span<const std::string* const> values,
                int64_t arg, Deadline deadline) override {
    check_request_size(name_, c, keys, values, TCPStore::kMaxValueBytes, value_limit_);
    return pool_.call(name_, c, keys, deadline, [&](int fd) {
      send_request(fd, c, keys, values, arg, deadline);
      return read_response(fd, deadline);
    });
  }

 private:
  // Connects and greets; with a job token, the server proves it knows it and
  // so does this client (see tcp_store_protocol.h). A refusal is a
  // DistStoreError: the server is there, the client may not use it.
  Fd open(Deadline deadline) {
    Fd fd = connect_tcp(address_.empty() ? host_ : address_, port_, deadline, name_ + " client");
    const auth::Nonce mine = auth::random_nonce();
    const std::string nonce(auth::view(mine));
    const std::string* nonce_value = &nonce;
    send_request(fd.get(), Command::kHello, {}, {&nonce_value, 1}, kMagic, deadline);
    Response r = read_response(fd.get(), deadline);
    if (r.status != Status::kOk || r.num != kVersion || r.values.size() < 2 || r.values[0].size() != mine.size())
      throw DistNetworkError(name_ + ": the server at " + endpoint(host_, port_) +
                             " answered the hello with an unexpected protocol version " + std::to_string(r.num) +
                             " (this client speaks " + std::to_string(kVersion) + ")");
    const bool wants_token = r.values[1] == "token";
    const char* hint = "every process of a job needs the same TDIST_JOB_TOKEN or TDIST_JOB_TOKEN_FILE";
    if (wants_token && !token_)
      throw DistStoreError(name_ + ": the server requires the job token and this process has none (" + hint + ")");
    if (!wants_token && token_)
      throw DistStoreError(name_ + ": the server runs without a job token and this process has one (" + hint + ")");
    if (!token_) return fd;
    const std::string& server_nonce = r.values[0];
    auth::Digest server_proof = auth::hmac(*token_, {"tdist-store-server", nonce, server_nonce});
    if (r.values.size() < 3 || r.values[2].size() != server_proof.size() ||
        !auth::equal(server_proof, *reinterpret_cast<const auth::Digest*>(r.values[2].data())))
      throw DistStoreError(name_ + ": the server holds a different job token than this process (" + hint + ")");
    auth::Digest proof = auth::hmac(*token_, {"tdist-store-client", nonce, server_nonce});
    const std::string proof_text(reinterpret_cast<const char*>(proof.data()), proof.size());
    const std::string* proof_value = &proof_text;
    send_request(fd.get(), Command::kAuth, {}, {&proof_value, 1}, 0, deadline);
    Response a = read_response(fd.get(), deadline);
    if (a.status != Status::kOk)
      throw DistStoreError(name_ + ": the server refused this client: " +
                           (a.values.empty() ? std::string("no reason given") : a.values[0]));
    return fd;
  }

  void send_request(int fd, Command c, std::span<const std::string* const> keys,
                    std::span<const std::string* const> values, int64_t arg, Deadline deadline) {
    constexpr size_t kCoalesce = 64 * 1024;
    std::string buf;
    encode_request_head(buf, c, keys.size(), values.size(), arg);
    for (const std::string* k : keys) encode_key(buf, *k);
    for (const std::string* v : values) {
      put_u64(buf, v->size());
      if (v->size() < kCoalesce) {
        buf += *v;
        continue;
      }
      send_all(fd, buf.data(), buf.size(), deadline, peer_);
      buf.clear();
      send_all(fd, v->data(), v->size(), deadline, peer_);
    }
    if (!buf.empty()) send_all(fd, buf.data(), buf.size(), deadline, peer_);
  }

  Response read_response(int fd, Deadline deadline) {
    char head[kResponseHeaderBytes];
    recv_all(fd, head, sizeof(head), deadline, peer_);
    Response r;
    uint8_t status = static_cast<uint8_t>(head[0]);
    r.num = static_cast<int64_t>(get_u64(head + 1));
    uint32_t n = get_u32(head + 9);
    if (status > static_cast<uint8_t>(Status::kError) || n > TCPStore::kMaxKeysPerRequest)
      throw DistNetworkError("malformed response from " + peer_ + " (status " + std::to_string(status) + ", " +
                             std::to_string(n) + " values)");
    r.status = static_cast<Status>(status);
    r.values.resize(n);
    for (auto& v : r.values) {
      char len[8];
      recv_all(fd, len, sizeof(len), deadline, peer_);
      uint64_t size = get_u64(len);
      if (size > TCPStore::kMaxValueBytes)
        throw DistNetworkError("malformed response from " + peer_ + " (a value of " + std::to_string(size) +
                               " bytes)");
      v.resize(size);
      recv_all(fd, v.data(), size, deadline, peer_);
    }
    return r;
  }

  std::string host_;
  std::string address_;  // what host_ resolved to, set once by the constructor's first connection
  uint16_t port_;
  std::string name_;
  std::string peer_;
  const std::optional<std::string> token_;  // the job token, read once
  const std::string value_limit_;
  StoreConnectionPool pool_;
};

std::vector<const std::string*> pointers(const std::vector<std::string>& v) {
  std::vector<const std::string*> out;
  out.reserve(v.size());
  for (const auto& s : v) out.push_back(&s);
  return out;
}

}  // namespace

struct TCPStore::State {
  std::shared_ptr<TcpStoreServer> server;
  std::unique_ptr<StoreClient> client;
  StoreProtocol protocol = StoreProtocol::kTdist;  // what the client speaks; a clone speaks it too

  // A request that does not wait on the server: the store timeout bounds it.
  Response call(Command c, std::span<const std::string* const> keys, std::span<const std::string* const> values,
                int64_t arg, Millis timeout) {
    Response r = client->call(c, keys, values, arg, deadline_after(timeout));
    if (r.status == Status::kError)
      throw DistStoreError(client->name() + ": " + describe(c, keys) + ": " +
                           (r.values.empty() ? std::string("server error") : r.values[0]));
    return r;
  }
  // A request the server parks until its keys exist, for at most `timeout`.
  Response wait_call(Command c, std::span<const std::string* const> keys, std::span<const std::string* const> values,
                     Millis timeout) {
    Deadline deadline = timeout >= kForever ? Deadline::never() : deadline_after(timeout + reply_margin(timeout));
    Response r = client->call(c, keys, values, timeout_arg(timeout), deadline);
    if (r.status == Status::kError)
      throw DistStoreError(client->name() + ": " + describe(c, keys) + ": " +
                           (r.values.empty() ? std::string("server error") : r.values[0]));
    if (r.status == Status::kTimeout) {
      if (c == Command::kGet)
        throw DistStoreError(client->name() + ": get(key " + quote(*keys[0]) + ") timed out after " +
                             format_ms(timeout) + ": the key was not set");
      throw DistStoreError(client->name() + ": " + describe(c, keys) + " timed out after " + format_ms(timeout) +
                           "; missing keys: " + quote_list(r.values));
    }
    return r;
  }
};

TCPStore::TCPStore(std::string host, uint16_t port, TCPStoreOptions options)
    : Store(options.timeout), host_(std::move(host)), port_(port), state_(std::make_unique<State>()) {
  if (options.world_size && *options.world_size < 1)
    throw DistValueError("TCPStore(" + endpoint(host_, port_) + "): world_size must be at least 1, got " +
                         std::to_string(*options.world_size));
  if (options.is_master && options.protocol == StoreProtocol::kTorch)
    throw DistValueError("TCPStore(" + endpoint(host_, port_) + "): protocol torch is for a client of torch's server; "
                         "a master serves both protocols with the default");
  if (options.master_listen_fd && !options.is_master)
    throw DistValueError("TCPStore(" + endpoint(host_, port_) + "): master_listen_fd is for the master (is_master)");
  if (options.is_master) {
    try {
      if (options.master_listen_fd) {
        Fd listen(*options.master_listen_fd);
        state_->server = options.multi_tenant ? TcpStoreServer::shared(std::move(listen), port_)
                                              : std::make_shared<TcpStoreServer>(std::move(listen), port_);
      } else {
        const std::string bind = bind_address_for(host_);
        state_->server = options.multi_tenant ? TcpStoreServer::shared(bind, port_)
                                              : std::make_shared<TcpStoreServer>(bind, port_);
      }
    } catch (const DistValueError& e) {
      throw DistValueError("TCPStore(" + endpoint(host_, port_) + "): " + e.what());
    } catch (const DistNetworkError& e) {
      throw DistNetworkError("TCPStore(" + endpoint(host_, port_) + "): cannot start the server: " + e.what());
    }
    port_ = state_->server->port();
  }
  auto start = Clock::now();
  state_->protocol = options.protocol;
  if (options.protocol == StoreProtocol::kTorch) {
    state_->client = connect_torch_store(host_, port_, options.timeout);
  } else {
    state_->client = std::make_unique<Client>(host_, port_, options.timeout);
  }
  // Count this store user, for the master's wait_for_workers (torch's clients count in torch's "init/").
  const std::string* key = &kWorkersKey;
  state_->call(Command::kAdd, {&key, 1}, {}, 1, options.timeout);
  if (options.world_size && options.wait_for_workers) {
    const std::string* waited = &kWaitedKey;
    const std::string empty;
    const std::string* value = &empty;
    state_->call(Command::kSet, {&waited, 1}, {&value, 1}, 0, options.timeout);
  }
  if (options.is_master && options.wait_for_workers && options.world_size) {
    auto left = options.timeout - std::chrono::duration_cast<Millis>(Clock::now() - start);
    std::string target;
    put_u64(target, static_cast<uint64_t>(*options.world_size));
    const std::string* value = &target;
    Millis t = std::max(left, Millis(0));
    Response r = state_->client->call(Command::kWaitCounter, {&key, 1}, {&value, 1}, timeout_arg(t),
                                      t >= kForever ? Deadline::never() : deadline_after(t + reply_margin(t)));
    if (r.status != Status::kOk)
      throw DistStoreError(state_->client->name() + ": wait_for_workers: only " + std::to_string(r.num) + " of " +
                           std::to_string(*options.world_size) + " store users (world_size) connected within " +
                           format_ms(options.timeout));
  }
}

TCPStore::TCPStore(std::string host, uint16_t port, std::optional<int> world_size, bool is_master,
                   std::chrono::milliseconds timeout, bool wait_for_workers, bool multi_tenant,
                   std::optional<int> master_listen_fd)
    : TCPStore(std::move(host), port,
               TCPStoreOptions{.world_size = world_size,
                               .is_master = is_master,
                               .timeout = timeout,
                               .wait_for_workers = wait_for_workers,
                               .multi_tenant = multi_tenant,
                               .master_listen_fd = master_listen_fd}) {}

void TCPStore::stop_accepting() {
  if (state_->server) state_->server->stop_accepting();
}

void TCPStore::stop_server() { state_->server.reset(); }

TCPStore::~TCPStore() {
  state_->client.reset();  // our connection first, then (if the last user) the server
  state_->server.reset();
}

void TCPStore::set(const std::string& key, const std::string& value) {
  const std::string* k = &key;
  const std::string* v = &value;
  state_->call(Command::kSet, {&k, 1}, {&v, 1}, 0, timeout());
}

std::string TCPStore::get(const std::string& key) {
  const std::string* k = &key;
  Response r = state_->wait_call(Command::kGet, {&k, 1}, {}, timeout());
  if (r.values.size() != 1) throw DistNetworkError(state_->client->name() + ": get: malformed response");
  return std::move(r.values[0]);
}

int64_t TCPStore::add(const std::string& key, int64_t amount) {
  const std::string* k = &key;
  Response r = state_->call(Command::kAdd, {&k, 1}, {}, amount, timeout());
  return r.num;
}

void TCPStore::append(const std::string& key, const std::string& value) {
  const std::string* k = &key;
  const std::string* v = &value;
  state_->call(Command::kAppend, {&k, 1}, {&v, 1}, 0, timeout());
}

std::string TCPStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  const std::string* k = &key;
  const std::string* vs[2] = {&expected, &desired};
  Response r = state_->call(Command::kCompareSet, {&k, 1}, vs, 0, timeout());
  if (r.values.size() != 1) throw DistNetworkError(state_->client->name() + ": compare_set: malformed response");
  return std::move(r.values[0]);
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  auto ks = pointers(keys);
  return state_->call(Command::kCheck, ks, {}, 0, timeout()).num != 0;
}

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (keys.empty()) return;
  auto ks = pointers(keys);
  state_->wait_call(Command::kWait, ks, {}, timeout);
}

bool TCPStore::delete_key(const std::string& key) {
  const std::string* k = &key;
  return state_->call(Command::kDelete, {&k, 1}, {}, 0, timeout()).num != 0;
}

int64_t TCPStore::num_keys() { return state_->call(Command::kNumKeys, {}, {}, 0, timeout()).num; }

std::vector<std::string> TCPStore::multi_get(const std::vector<std::string>& keys) {
  if (keys.empty()) return {};
  auto ks = pointers(keys);
  Response r = state_->wait_call(Command::kMultiGet, ks, {}, timeout());
  if (r.values.size() != keys.size())
    throw DistNetworkError(state_->client->name() + ": multi_get: malformed response");
  return std::move(r.values);
}

void TCPStore::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  if (keys.size() != values.size())
    throw DistValueError(state_->client->name() + ": multi_set: " + std::to_string(keys.size()) + " keys but " +
                         std::to_string(values.size()) + " values");
  if (keys.empty()) return;
  auto ks = pointers(keys);
  auto vs = pointers(values);
  state_->call(Command::kMultiSet, ks, vs, 0, timeout());
}

void TCPStore::queue_push(const std::string& key, const std::string& value) {
  const std::string* k = &key;
  const std::string* v = &value;
  state_->call(Command::kQueuePush, {&k, 1}, {&v, 1}, 0, timeout());
}

std::string TCPStore::queue_pop(const std::string& key, bool block, std::chrono::milliseconds timeout) {
  const std::string* k = &key;
  Response r;
  if (!block) {
    r = state_->call(Command::kQueuePop, {&k, 1}, {}, -1, this->timeout());
    if (r.status == Status::kTimeout)
      throw DistQueueEmptyError(state_->client->name() + ": queue_pop(key " + quote(key) +
                                ", block=false): the queue is empty");
  } else {
    Deadline deadline = timeout >= kForever ? Deadline::never() : deadline_after(timeout + reply_margin(timeout));
    r = state_->client->call(Command::kQueuePop, {&k, 1}, {}, timeout_arg(timeout), deadline);
    if (r.status == Status::kError)
      throw DistStoreError(state_->client->name() + ": queue_pop(key " + quote(key) + "): " +
                           (r.values.empty() ? std::string("server error") : r.values[0]));
    if (r.status == Status::kTimeout)
      throw DistStoreError(state_->client->name() + ": queue_pop(key " + quote(key) + ") timed out after " +
                           format_ms(timeout) + ": the queue stayed empty");
  }
  if (r.values.size() != 1) throw DistNetworkError(state_->client->name() + ": queue_pop: malformed response");
  return std::move(r.values[0]);
}

int64_t TCPStore::queue_len(const std::string& key) {
  const std::string* k = &key;
  return state_->call(Command::kQueueLen, {&k, 1}, {}, 0, timeout()).num;
}

std::vector<std::string> TCPStore::list_keys() {
  return std::move(state_->call(Command::kListKeys, {}, {}, 0, timeout()).values);
}

// A client of the same server, counted as one more store user (wait_for_workers
// has long been met).
std::shared_ptr<Store> TCPStore::clone() {
  return std::make_shared<TCPStore>(host_, port_, TCPStoreOptions{.world_size = std::nullopt, .timeout = timeout(),
                                                                  .wait_for_workers = false,
                                                                  .protocol = state_->protocol});
}

}  // namespace tdist
