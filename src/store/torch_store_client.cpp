// tdist's TCPStore client speaking torch's protocol (torch_store_protocol.h)
// to a torch.distributed server, such as torchrun's agent store: tdist's
// requests are carried as torch's client carries them (a GET is a WAIT, then
// a GET; a wait that gives up sends CANCEL_WAIT), keys with torch's "/" in
// front, so torch's processes and this one see the same keys. Thread-safe as
// tdist's own client: its connections are a StoreConnectionPool.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "store/store_client.h"
#include "store/store_connection_pool.h"
#include "store/store_util.h"
#include "store/torch_store_protocol.h"
#include "tdist/errors.h"
#include "tdist/store.h"
#include "util/socket.h"

namespace tdist::store_detail {

namespace {

// torch's libuv server closes a connection that sends a payload above this
// (its MAX_PAYLOAD_LEN): said here first, as an error naming it.
constexpr size_t kTorchMaxPayload = size_t{8} << 20;
// After a CANCEL_WAIT, how long the server has to acknowledge it.
constexpr Millis kCancelAnswerTime{30000};

std::string wire_key(const std::string& key) { return key == kWorkersKey ? std::string("init/") : "/" + key; }

class TorchStoreClient final : public StoreClient {
 public:
  TorchStoreClient(const std::string& host, uint16_t port, Millis timeout)
      : host_(host),
        port_(port),
        name_("TCPStore(" + endpoint(host, port) + ", torch's protocol)"),
        peer_("torch's TCPStore server " + endpoint(host, port)),
        value_limit_("the " + std::to_string(kTorchMaxPayload) + " bytes torch's server takes in one value"),
        pool_([this](Deadline deadline) { return open(deadline); },
              "is torch's TCPStore server, torchrun's agent, still running?") {
    pool_.keep(open(Deadline::after(timeout)));
  }

  const std::string& name() const override { return name_; }

  Response call(Command c, std::span<const std::string* const> keys, std::span<const std::string* const> values,
                int64_t arg, Deadline deadline) override {
    if (c == Command::kWaitCounter)
      throw DistValueError(name_ + ": wait_for_workers is the master's, and torch's server has its own master");
    check_request_size(name_, c, keys, values, kTorchMaxPayload, value_limit_);
    return pool_.call(name_, c, keys, deadline, [&](int fd) { return run(fd, c, keys, values, arg, deadline); });
  }

 private:
  // Connects, then VALIDATE and PING as torch's client does.
  Fd open(Deadline deadline) {
    Fd fd = connect_tcp(host_, port_, deadline, name_ + " client");
    const auto nonce = static_cast<uint32_t>(::getpid());
    std::string out;
    out.push_back(static_cast<char>(TorchQuery::kValidate));
    put_torch_u32(out, kTorchValidateMagic);
    out.push_back(static_cast<char>(TorchQuery::kPing));
    put_torch_u32(out, nonce);
    char answer[4];
    try {
      send_all(fd.get(), out.data(), out.size(), deadline, peer_);
      recv_all(fd.get(), answer, sizeof(answer), deadline, peer_);
    } catch (const DistNetworkError& e) {
      // torch 1.x's server has neither VALIDATE nor PING: it resets the connection at once. Its
      // usual host is torch 1.x's torchrun with the static rendezvous (its default), which hands
      // the workers its agent's store; with c10d it does not, and rank 0 hosts tdist's store.
      throw DistNetworkError(std::string(e.what()) + " at VALIDATE and PING, torch 2.x's first requests: a torch "
                             "1.x TCPStore server does that, and tdist speaks only torch 2.x's protocol. Under "
                             "torch 1.x's torchrun, add --rdzv_backend=c10d --rdzv_endpoint=HOST:PORT (or "
                             "--standalone on one node): rank 0 then hosts tdist's store; or launch with tdistrun "
                             "(python -m tdist.run, the same options), or with torch 2.x's torchrun");
    }
    if (get_u32(answer) != nonce)
      throw DistNetworkError(peer_ + " answered the ping with " + std::to_string(get_u32(answer)) + ", not " +
                             std::to_string(nonce) + " (not torch's TCPStore server?)");
    return fd;
  }

  void send(int fd, const std::string& bytes, Deadline deadline) {
    send_all(fd, bytes.data(), bytes.size(), deadline, peer_);
  }
  uint8_t read_u8(int fd, Deadline deadline) {
    char b;
    recv_all(fd, &b, 1, deadline, peer_);
    return static_cast<uint8_t>(b);
  }
  int64_t read_i64(int fd, Deadline deadline) {
    char b[8];
    recv_all(fd, b, sizeof(b), deadline, peer_);
    return static_cast<int64_t>(get_u64(b));
  }
  std::string read_string(int fd, Deadline deadline) {
    const auto n = static_cast<uint64_t>(read_i64(fd, deadline));
    if (n > TCPStore::kMaxValueBytes)
      throw DistNetworkError("malformed answer from " + peer_ + " (a value of " + std::to_string(n) + " bytes)");
    std::string v(n, '\0');
    recv_all(fd, v.data(), n, deadline, peer_);
    return v;
  }
  static std::string head(TorchQuery q) { return std::string(1, static_cast<char>(q)); }
  static void put_keys(std::string& out, std::span<const std::string* const> keys) {
    put_u64(out, keys.size());
    for (const std::string* k : keys) put_torch_string(out, wire_key(*k));
  }

  // WAIT for every key until `wait_ms` (kForever: no end); false when it gave
  // up (the server acknowledged the CANCEL_WAIT).
  bool wait_for(int fd, std::span<const std::string* const> keys, int64_t wait_ms, Deadline deadline) {
    std::string out = head(TorchQuery::kWait);
    put_keys(out, keys);
    send(fd, out, deadline);
    const Deadline until = Millis(wait_ms) >= kForever ? Deadline::never() : Deadline::after(Millis(wait_ms));
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      const int n = ::poll(&p, 1, until.poll_ms());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw DistNetworkError("poll on the connection to " + peer_ + " failed: " + errno_string(errno));
      if (n > 0) {
        const uint8_t b = read_u8(fd, deadline);
        if (b != kTorchStopWaiting)
          throw DistNetworkError("malformed answer from " + peer_ + " to WAIT (" + std::to_string(b) + ")");
        return true;
      }
      if (until.expired()) break;
    }
    send(fd, head(TorchQuery::kCancelWait), deadline);
    const Deadline ack = Deadline::after(kCancelAnswerTime);
    uint8_t b = read_u8(fd, ack);
    if (b == kTorchStopWaiting) b = read_u8(fd, ack);  // the keys came as it gave up
    if (b != kTorchWaitCanceled)
      throw DistNetworkError("malformed answer from " + peer_ + " to CANCEL_WAIT (" + std::to_string(b) + ")");
    return false;
  }

  // The keys still missing after a wait gave up (each checked alone).
  std::vector<std::string> missing(int fd, std::span<const std::string* const> keys, Deadline deadline) {
    std::vector<std::string> out;
    for (const std::string* k : keys) {
      std::string q = head(TorchQuery::kCheck);
      put_keys(q, {&k, 1});
      send(fd, q, deadline);
      if (read_u8(fd, deadline) != kTorchReady) out.push_back(*k);
    }
    return out;
  }

  Response run(int fd, Command c, std::span<const std::string* const> keys,
               std::span<const std::string* const> values, int64_t arg, Deadline deadline) {
    Response r;
    std::string out;
    auto key_value = [&](TorchQuery q) {
      out = head(q);
      put_torch_string(out, wire_key(*keys[0]));
      put_torch_string(out, *values[0]);
      send(fd, out, deadline);
    };
    auto one_key = [&](TorchQuery q) {
      out = head(q);
      put_torch_string(out, wire_key(*keys[0]));
      send(fd, out, deadline);
    };
    switch (c) {
      case Command::kSet:
        key_value(TorchQuery::kSet);
        break;
      case Command::kAppend:
        key_value(TorchQuery::kAppend);
        break;
      case Command::kQueuePush:
        key_value(TorchQuery::kQueuePush);
        break;
      case Command::kMultiSet:
        out = head(TorchQuery::kMultiSet);
        put_u64(out, keys.size());
        for (size_t i = 0; i < keys.size(); ++i) {
          put_torch_string(out, wire_key(*keys[i]));
          put_torch_string(out, *values[i]);
        }
        send(fd, out, deadline);
        break;
      case Command::kCompareSet:
        out = head(TorchQuery::kCompareSet);
        put_torch_string(out, wire_key(*keys[0]));
        put_torch_string(out, *values[0]);
        put_torch_string(out, *values[1]);
        send(fd, out, deadline);
        r.values.push_back(read_string(fd, deadline));
        break;
      case Command::kAdd:
        out = head(TorchQuery::kAdd);
        put_torch_string(out, wire_key(*keys[0]));
        put_torch_i64(out, arg);
        send(fd, out, deadline);
        r.num = read_i64(fd, deadline);
        break;
      case Command::kCheck: {
        out = head(TorchQuery::kCheck);
        put_keys(out, keys);
        send(fd, out, deadline);
        const uint8_t b = read_u8(fd, deadline);
        if (b != kTorchReady && b != kTorchNotReady)
          throw DistNetworkError("malformed answer from " + peer_ + " to CHECK (" + std::to_string(b) + ")");
        r.num = b == kTorchReady ? 1 : 0;
        break;
      }
      case Command::kDelete:
        one_key(TorchQuery::kDeleteKey);
        r.num = read_i64(fd, deadline);
        break;
      case Command::kQueueLen:
        one_key(TorchQuery::kQueueLen);
        r.num = read_i64(fd, deadline);
        break;
      case Command::kNumKeys:
        send(fd, head(TorchQuery::kGetNumKeys), deadline);
        r.num = read_i64(fd, deadline);
        break;
      case Command::kWait:
      case Command::kGet:
      case Command::kMultiGet:
        if (!wait_for(fd, keys, arg, deadline)) {
          r.status = Status::kTimeout;
          r.values = missing(fd, keys, deadline);
          break;
        }
        if (c == Command::kWait) break;
        out = head(TorchQuery::kMultiGet);
        put_keys(out, keys);
        send(fd, out, deadline);
        for (size_t i = 0; i < keys.size(); ++i) r.values.push_back(read_string(fd, deadline));
        break;
      case Command::kQueuePop: {
        // arg -1: take one now or answer TIMEOUT; else wait on the queue's name up to arg ms (another pop
        // may take the value first: then wait again for what is left).
        const Deadline until = arg < 0 || Millis(arg) >= kForever ? Deadline::never() : Deadline::after(Millis(arg));
        for (;;) {
          if (arg >= 0) {
            const int64_t left = until.is_never() ? arg : until.remaining().count();
            if (!wait_for(fd, keys, left, deadline)) {
              r.status = Status::kTimeout;
              break;
            }
          }
          one_key(TorchQuery::kQueuePop);
          if (read_i64(fd, deadline) > 0) {
            r.values.push_back(read_string(fd, deadline));
            break;
          }
          if (arg < 0 || until.expired()) {
            r.status = Status::kTimeout;
            break;
          }
        }
        break;
      }
      case Command::kListKeys: {
        // Torch's server lists its keys in their wire form: "/k" is the user's "k"; the rest
        // ("init/") are torch's own, which list_keys leaves out as torch does.
        send(fd, head(TorchQuery::kListKeys), deadline);
        const int64_t n = read_i64(fd, deadline);
        for (int64_t i = 0; i < n; ++i) {
          std::string wire = read_string(fd, deadline);
          if (wire.starts_with('/')) r.values.push_back(wire.substr(1));
        }
        break;
      }
      case Command::kHello:
      case Command::kAuth:
      case Command::kWaitCounter:
        throw DistValueError(name_ + ": " + describe_request(c, keys) + " has no form in torch's protocol");
    }
    return r;
  }

  std::string host_;
  uint16_t port_;
  std::string name_;
  std::string peer_;
  const std::string value_limit_;
  StoreConnectionPool pool_;
};

}  // namespace

std::unique_ptr<StoreClient> connect_torch_store(const std::string& host, uint16_t port, Millis timeout) {
  return std::make_unique<TorchStoreClient>(host, port, timeout);
}

}  // namespace tdist::store_detail
