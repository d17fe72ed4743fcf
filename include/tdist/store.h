// Key-value stores: how processes find each other (see the seeds' 分布式键值存储).
// Keys are strings; values are byte strings (std::string holds any bytes).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tdist {

inline constexpr std::chrono::milliseconds kDefaultStoreTimeout{300'000};

class Store {
 public:
  explicit Store(std::chrono::milliseconds timeout = kDefaultStoreTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Writes key = value, replacing any old value.
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until key exists (up to timeout()), then returns its value;
  // DistStoreError naming the key and the timeout otherwise.
  virtual std::string get(const std::string& key) = 0;
  // Counter: creates key with `amount` or adds to it; returns the new value.
  // A key holding a value written by set/append/compare_set is an error.
  virtual int64_t add(const std::string& key, int64_t amount) = 0;
  // Appends to the value of key, creating it when missing.
  virtual void append(const std::string& key, const std::string& value) = 0;
  // Sets key to desired when its value equals expected, or when key is missing
  // and expected is empty. Returns the value the key holds afterwards (when the
  // key is missing and expected is not empty: expected).
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
  // True when every key exists; never waits.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists; DistStoreError listing the missing keys after the timeout.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  // Removes key; returns whether it existed.
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;
  // Waits for every key like get; returns the values in order.
  virtual std::vector<std::string> multi_get(const std::vector<std::string>& keys);
  virtual void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values);
  virtual bool has_extended_api() const { return true; }
  // torch's list_keys: every key the store holds, in no particular order (the
  // store's own reserved keys are left out). The base class has no way to
  // list keys: DistStoreError.
  virtual std::vector<std::string> list_keys();
  // torch's clone: another handle on the same data, for another thread
  // (TCPStore: a new client of the same server; PrefixStore: the same prefix
  // over a clone of its store; HashStore: the same table; FileStore: the same
  // file, not counted among its world_size users). The base: DistStoreError.
  virtual std::shared_ptr<Store> clone();

  // Queues (torch's queue_push / queue_pop / queue_len): first in, first out
  // under a key, safe with many pushers and poppers in many processes; every
  // value is popped once. Queues are apart from the keys above. The default
  // form is built from the operations above in keys under "<key>/.queue/";
  // TCPStore keeps queues on its server; PrefixStore prefixes the key.
  virtual void queue_push(const std::string& key, const std::string& value);
  // Removes and returns the oldest value. block: waits up to `timeout` for
  // one, then DistStoreError naming the key (a pop that timed out takes
  // nothing); !block: DistQueueEmptyError naming the key when it is empty.
  virtual std::string queue_pop(const std::string& key, bool block, std::chrono::milliseconds timeout);
  std::string queue_pop(const std::string& key, bool block = true) { return queue_pop(key, block, timeout()); }
  // The number of values in the queue (0 for a queue never pushed to).
  virtual int64_t queue_len(const std::string& key);

  std::chrono::milliseconds timeout() const { return timeout_; }
  virtual void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 protected:
  std::chrono::milliseconds timeout_;
};

// Threads of one process; not across processes.
class HashStore : public Store {
 public:
  HashStore();
  ~HashStore() override;
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  void append(const std::string& key, const std::string& value) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<std::string> list_keys() override;
  std::shared_ptr<Store> clone() override;

 private:
  struct State;
  explicit HashStore(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;  // shared by clones
};

// Prepends "prefix/" to every key of an underlying store.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  void append(const std::string& key, const std::string& value) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) override;
  void queue_push(const std::string& key, const std::string& value) override;
  using Store::queue_pop;
  std::string queue_pop(const std::string& key, bool block, std::chrono::milliseconds timeout) override;
  int64_t queue_len(const std::string& key) override;
  void set_timeout(std::chrono::milliseconds timeout) override;
  // The underlying store's keys under "prefix/", without it.
  std::vector<std::string> list_keys() override;
  std::shared_ptr<Store> clone() override;
  const std::shared_ptr<Store>& underlying_store() const { return store_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> join(const std::vector<std::string>& keys) const;
  std::string prefix_{};
  std::shared_ptr<Store> store_{};
};

// Processes sharing a file system; fcntl locks serialise access. The last of
// world_size users to be destroyed removes the file (world_size <= 0: the
// file and its keys stay, as in torch). A file whose users all died without
// closing their store (same host, processes gone) is reset on open.
class FileStore : public Store {
 public:
  explicit FileStore(std::string path, int world_size = -1,
                     std::chrono::milliseconds timeout = kDefaultStoreTimeout);
  ~FileStore() override;
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  void append(const std::string& key, const std::string& value) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  // Not supported by FileStore (as in torch): throws DistStoreError.
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) override;
  std::vector<std::string> list_keys() override;
  std::shared_ptr<Store> clone() override;
  const std::string& path() const { return path_; }

 private:
  struct State;
  std::string path_{};
  std::unique_ptr<State> state_;
};

// The protocol a TCPStore client speaks: tdist's own (a tdist server, which
// also serves torch's clients), or torch.distributed's, to a torch server
// (torchrun's agent store; docs/store.md says what it cannot do there).
enum class StoreProtocol { kTdist, kTorch };

struct TCPStoreOptions {
  std::optional<int> world_size{};  // number of store users (clients + server's own); nullopt: not fixed
  bool is_master = false;
  std::chrono::milliseconds timeout = kDefaultStoreTimeout;
  bool wait_for_workers = true;
  bool multi_tenant = false;
  // The master serves on this socket instead of binding one itself: a TCP
  // socket the caller bound (to `port`, or port 0 given) and may have set
  // listening, which the store takes over (closes when its server stops,
  // also when the constructor throws). Only with is_master.
  std::optional<int> master_listen_fd{};
  // kTorch: the server is torch's (never with is_master). The job token is
  // not asked (torch's protocol has none); this client counts itself in
  // torch's "init/" key, as torch's workers do.
  StoreProtocol protocol = StoreProtocol::kTdist;
};

// The server (is_master) holds the data in an event-loop thread; every
// instance, the master's too, talks to it as a client over TCP. Every
// instance counts itself in a reserved key for wait_for_workers; unlike
// torch, num_keys() does not count that key.
class TCPStore : public Store {
 public:
  TCPStore(std::string host, uint16_t port, TCPStoreOptions options = {});
  // torch's positional form.
  TCPStore(std::string host, uint16_t port, std::optional<int> world_size, bool is_master,
           std::chrono::milliseconds timeout = kDefaultStoreTimeout, bool wait_for_workers = true,
           bool multi_tenant = false, std::optional<int> master_listen_fd = std::nullopt);
  ~TCPStore() override;
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  void append(const std::string& key, const std::string& value) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) override;
  // Queues live on the server: a push or a pop is one request, a blocking
  // pop is parked there until a value comes (longest-waiting pop first).
  void queue_push(const std::string& key, const std::string& value) override;
  using Store::queue_pop;
  std::string queue_pop(const std::string& key, bool block, std::chrono::milliseconds timeout) override;
  int64_t queue_len(const std::string& key) override;
  std::vector<std::string> list_keys() override;
  std::shared_ptr<Store> clone() override;

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }  // the bound port when constructed with port 0
  // For an orderly end (destroy_process_group): the server this store hosts
  // (is_master) stops accepting connections; connected clients are still
  // served. Then stop_server() closes it now, whoever still holds the store:
  // its port is free and its clients' calls fail. Both do nothing elsewhere.
  void stop_accepting();
  void stop_server();

  // Limits the server enforces; a request beyond them drops that client only.
  static constexpr size_t kMaxKeyBytes = 4096;
  static constexpr size_t kMaxValueBytes = size_t{1} << 30;  // 1 GiB
  static constexpr size_t kMaxKeysPerRequest = 1 << 16;

 private:
  struct State;
  std::string host_{};
  uint16_t port_;
  std::unique_ptr<State> state_;
};

}  // namespace tdist
