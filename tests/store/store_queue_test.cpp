// The store queue API (torch's queue_push / queue_pop / queue_len) on every
// store: first in, first out; a non-blocking pop of an empty queue is a
// DistQueueEmptyError naming the key; a blocking pop times out with a
// DistStoreError naming the key and takes nothing; many pushers and poppers
// (threads, and forked processes over a TCPStore) get every value exactly once,
// each pusher's values in the order it pushed them.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <sstream>
#include <memory>
#include <utility>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.h"
#include "store/store_errors.h"
#include "tdist/errors.h"
#include "tdist/store.h"

using namespace std::chrono_literals;
using tdist::DistQueueEmptyError;
using tdist::DistStoreError;
using tdist::Store;
using tdist::TCPStore;
using tdist::TCPStoreOptions;
namespace tt = tdist::testing;

namespace {

constexpr std::chrono::milliseconds kLong = 60s;    // for calls that must succeed
constexpr std::chrono::milliseconds kShort = 300ms;  // for pops that must time out

// Store's own queue, built from the other operations: forwards everything
// else to `inner` and keeps the base class's queue methods, so tests can run
// that algorithm over any store (a TCPStore's native queue otherwise wins).
class PrimitivesOnly : public Store {
 public:
  explicit PrimitivesOnly(std::shared_ptr<Store> inner) : Store(inner->timeout()), inner_(std::move(inner)) {}
  void set(const std::string& k, const std::string& v) override { inner_->set(k, v); }
  std::string get(const std::string& k) override { return inner_->get(k); }
  int64_t add(const std::string& k, int64_t n) override { return inner_->add(k, n); }
  void append(const std::string& k, const std::string& v) override { inner_->append(k, v); }
  std::string compare_set(const std::string& k, const std::string& e, const std::string& d) override {
    return inner_->compare_set(k, e, d);
  }
  bool check(const std::vector<std::string>& ks) override { return inner_->check(ks); }
  using Store::wait;
  void wait(const std::vector<std::string>& ks, std::chrono::milliseconds t) override { inner_->wait(ks, t); }
  bool delete_key(const std::string& k) override { return inner_->delete_key(k); }
  int64_t num_keys() override { return inner_->num_keys(); }
  void set_timeout(std::chrono::milliseconds t) override {
    Store::set_timeout(t);
    inner_->set_timeout(t);
  }

 private:
  std::shared_ptr<Store> inner_;
};

struct Kit {
  std::shared_ptr<Store> store;  // what the test uses
  std::shared_ptr<Store> other;  // another handle on the same data (a second client, ...)
  std::function<void()> cleanup;
  ~Kit() {
    other.reset();
    store.reset();
    if (cleanup) cleanup();
  }
};

std::shared_ptr<TCPStore> tcp_master() {
  return std::make_shared<TCPStore>("127.0.0.1", 0,
                                    TCPStoreOptions{.is_master = true, .timeout = kLong, .wait_for_workers = false});
}
std::shared_ptr<TCPStore> tcp_client(uint16_t port) {
  return std::make_shared<TCPStore>("127.0.0.1", port, TCPStoreOptions{.timeout = kLong});
}

std::unique_ptr<Kit> make_kit(const std::string& kind) {
  auto kit = std::make_unique<Kit>();
  if (kind == "HashStore") {
    kit->store = std::make_shared<tdist::HashStore>();
    kit->store->set_timeout(kLong);
    kit->other = kit->store;
  } else if (kind == "PrefixStore") {
    auto base = std::make_shared<tdist::HashStore>();
    base->set_timeout(kLong);
    kit->store = std::make_shared<tdist::PrefixStore>("pfx", base);
    kit->other = std::make_shared<tdist::PrefixStore>("pfx", base);
  } else if (kind == "FileStore") {
    std::string path = tt::temp_path("queue");
    kit->store = std::make_shared<tdist::FileStore>(path, -1, kLong);
    kit->other = std::make_shared<tdist::FileStore>(path, -1, kLong);
    kit->cleanup = [path] { ::unlink(path.c_str()); };
  } else if (kind == "TCPStore") {
    auto master = tcp_master();
    kit->store = master;
    kit->other = tcp_client(master->port());
  } else if (kind == "PrefixTCPStore") {
    auto master = tcp_master();
    kit->store = std::make_shared<tdist::PrefixStore>("pfx", master);
    kit->other = std::make_shared<tdist::PrefixStore>("pfx", tcp_client(master->port()));
  } else if (kind == "PrimitivesOverTCPStore") {
    auto master = tcp_master();
    kit->store = std::make_shared<PrimitivesOnly>(master);
    kit->other = std::make_shared<PrimitivesOnly>(tcp_client(master->port()));
  }
  return kit;
}

class StoreQueue : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { kit_ = make_kit(GetParam()); }
  void TearDown() override { kit_.reset(); }
  Store& store() { return *kit_->store; }
  Store& other() { return *kit_->other; }
  std::unique_ptr<Kit> kit_;
};

TEST_P(StoreQueue, FirstInFirstOutAcrossHandles) {
  EXPECT_EQ(store().queue_len("q"), 0);
  store().queue_push("q", "one");
  other().queue_push("q", std::string("t\0wo", 4));  // any bytes
  store().queue_push("q", "");                      // an empty value is a value
  EXPECT_EQ(store().queue_len("q"), 3);
  EXPECT_EQ(other().queue_len("q"), 3);
  EXPECT_EQ(other().queue_pop("q"), "one");
  EXPECT_EQ(store().queue_pop("q", false), std::string("t\0wo", 4));
  EXPECT_EQ(other().queue_pop("q", true, kShort), "");
  EXPECT_EQ(store().queue_len("q"), 0);
  // Queues are apart from each other.
  store().queue_push("a", "1");
  store().queue_push("b", "2");
  EXPECT_EQ(other().queue_pop("b"), "2");
  EXPECT_EQ(other().queue_pop("a"), "1");
}

TEST_P(StoreQueue, NonBlockingPopOfAnEmptyQueueIsQueueEmptyNamingTheKey) {
  for (int round = 0; round < 2; ++round) {  // never pushed to, then emptied
    SCOPED_TRACE("round " + std::to_string(round));
    try {
      store().queue_pop("jobs", false);
      ADD_FAILURE() << "a non-blocking pop of an empty queue returned";
    } catch (const DistQueueEmptyError& e) {
      EXPECT_TRUE(tt::contains(e.what(), "jobs'")) << e.what();  // 'jobs' or 'pfx/jobs'
      EXPECT_TRUE(tt::contains(e.what(), "empty")) << e.what();
    }
    store().queue_push("jobs", "x");
    EXPECT_EQ(other().queue_pop("jobs", false), "x");
  }
}

TEST_P(StoreQueue, BlockingPopTimesOutNamingTheKeyAndTakesNothing) {
  auto start = std::chrono::steady_clock::now();
  std::string msg;
  try {
    store().queue_pop("work", true, kShort);
    ADD_FAILURE() << "a pop of an empty queue returned";
  } catch (const DistQueueEmptyError& e) {
    ADD_FAILURE() << "a blocking pop's timeout is not QueueEmpty: " << e.what();
  } catch (const DistStoreError& e) {
    msg = e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, kShort);
  EXPECT_TRUE(tt::contains(msg, "work'")) << msg;
  EXPECT_TRUE(tt::contains(msg, "timed out after 300 ms")) << msg;
  // The store's own timeout is the default.
  store().set_timeout(kShort);
  EXPECT_THROW(store().queue_pop("work"), DistStoreError);
  store().set_timeout(kLong);
  // The pops that timed out claimed nothing: the next values go to the next pops, in order.
  other().queue_push("work", "a");
  other().queue_push("work", "b");
  EXPECT_EQ(store().queue_len("work"), 2);
  EXPECT_EQ(store().queue_pop("work"), "a");
  EXPECT_EQ(store().queue_pop("work"), "b");
}

TEST_P(StoreQueue, BlockedPopGetsALaterPush) {
  std::thread pusher([&] {
    std::this_thread::sleep_for(100ms);  // usually after the pop blocks; either order is valid
    other().queue_push("later", "v");
  });
  EXPECT_EQ(store().queue_pop("later", true, kLong), "v");
  pusher.join();
  EXPECT_EQ(store().queue_len("later"), 0);
}

// A PrefixStore's queue is its store's queue under "prefix/key" (the
// store's native one: TCPStore's on its server).
TEST(StoreQueuePrefix, QueuesAreTheUnderlyingStoresUnderThePrefix) {
  std::vector<std::shared_ptr<Store>> bases = {std::make_shared<tdist::HashStore>(), tcp_master()};
  for (auto& base : bases) {
    SCOPED_TRACE(dynamic_cast<TCPStore*>(base.get()) ? "over a TCPStore" : "over a HashStore");
    base->set_timeout(kLong);
    tdist::PrefixStore store("pfx", base);
    store.queue_push("q", "via-prefix");
    base->queue_push("pfx/q", "via-base");
    EXPECT_EQ(base->queue_len("pfx/q"), 2);
    EXPECT_EQ(base->queue_len("q"), 0);
    EXPECT_EQ(base->queue_pop("pfx/q"), "via-prefix");
    EXPECT_EQ(store.queue_pop("q"), "via-base");
    tdist::PrefixStore elsewhere("other", base);
    store.queue_push("q", "x");
    EXPECT_EQ(elsewhere.queue_len("q"), 0);
    EXPECT_THROW(elsewhere.queue_pop("q", false), DistQueueEmptyError);
    EXPECT_EQ(store.queue_pop("q", false), "x");
  }
}

// kPushers threads push kItems values each ("p:i") while kPoppers threads pop
// until each gets a "stop" (pushed after every pusher finished, so behind all
// the values). Every value must be popped once, and each popper must see
// each pusher's values in increasing order (pops claim in queue order).
void check_pops(const std::vector<std::vector<std::string>>& popped, int pushers, int items) {
  std::map<std::string, int> seen;
  for (size_t p = 0; p < popped.size(); ++p) {
    std::vector<int> last(pushers, -1);
    for (const auto& v : popped[p]) {
      ++seen[v];
      auto colon = v.find(':');
      ASSERT_NE(colon, std::string::npos) << "popper " << p << " got " << v;
      int who = std::stoi(v.substr(0, colon)), i = std::stoi(v.substr(colon + 1));
      ASSERT_GT(i, last[who]) << "popper " << p << " got pusher " << who << "'s values out of order";
      last[who] = i;
    }
  }
  EXPECT_EQ(static_cast<int>(seen.size()), pushers * items) << "values lost";
  for (const auto& [v, n] : seen) EXPECT_EQ(n, 1) << v << " popped " << n << " times";
}

TEST_P(StoreQueue, ManyPushersAndPoppersOnThreads) {
  constexpr int kPushers = 3, kPoppers = 3, kItems = 150;
  std::vector<std::vector<std::string>> popped(kPoppers);
  std::vector<std::thread> poppers;
  std::vector<std::string> errors(kPoppers);
  for (int p = 0; p < kPoppers; ++p)
    poppers.emplace_back([&, p] {
      try {
        // Alternate handles, and mix in non-blocking pops that may find nothing.
        Store& s = p % 2 ? other() : store();
        for (;;) {
          std::string v;
          try {
            v = s.queue_pop("mpmc", p == 0 ? false : true, kLong);
          } catch (const DistQueueEmptyError&) {
            std::this_thread::sleep_for(1ms);
            continue;
          }
          if (v == "stop") return;
          popped[p].push_back(v);
        }
      } catch (const std::exception& e) {
        errors[p] = e.what();
      }
    });
  tt::run_in_threads(kPushers, [&](int who) {
    Store& s = who % 2 ? store() : other();
    for (int i = 0; i < kItems; ++i) s.queue_push("mpmc", std::to_string(who) + ":" + std::to_string(i));
  });
  for (int p = 0; p < kPoppers; ++p) store().queue_push("mpmc", "stop");
  for (auto& t : poppers) t.join();
  for (int p = 0; p < kPoppers; ++p) EXPECT_EQ(errors[p], "") << "popper " << p;
  check_pops(popped, kPushers, kItems);
  EXPECT_EQ(store().queue_len("mpmc"), 0);
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreQueue,
                         ::testing::Values("HashStore", "PrefixStore", "FileStore", "TCPStore", "PrefixTCPStore",
                                           "PrimitivesOverTCPStore"),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------- processes

// Ranks 1..kPushers push, the next kPoppers ranks pop, over one TCPStore whose
// server rank 0 holds. The poppers use short timeouts and simply try again,
// so pops that time out are mixed in: they must lose nothing. Each popper
// reports what it got in the store; rank 0 checks.
void processes_push_and_pop(bool native) {
  constexpr int kPushers = 3, kPoppers = 3, kItems = 150;
  constexpr int kWorld = 1 + kPushers + kPoppers;
  tt::Shared<tt::PortBoard> board;
  auto results = tt::run_in_processes(kWorld, [&](int rank) {
    std::shared_ptr<TCPStore> tcp;
    if (rank == 0) {
      tcp = tcp_master();
      board->publish(tcp->port());
    } else {
      tcp = tcp_client(static_cast<uint16_t>(board->wait(kLong)));
    }
    std::shared_ptr<Store> s = native ? std::static_pointer_cast<Store>(tcp) : std::make_shared<PrimitivesOnly>(tcp);
    if (rank == 0) {
      // Stops behind every value, then the reports.
      std::vector<std::string> pushed;
      for (int who = 0; who < kPushers; ++who) pushed.push_back("pushed/" + std::to_string(who));
      s->wait(pushed, kLong);
      for (int p = 0; p < kPoppers; ++p) s->queue_push("mpmc", "stop");
      std::vector<std::vector<std::string>> popped(kPoppers);
      for (int p = 0; p < kPoppers; ++p) {
        std::string report = s->get("popped/" + std::to_string(p));
        for (size_t pos = 0; pos < report.size();) {
          size_t end = report.find('\n', pos);
          popped[p].push_back(report.substr(pos, end - pos));
          pos = end + 1;
        }
      }
      check_pops(popped, kPushers, kItems);
      if (::testing::Test::HasFailure()) throw std::runtime_error("the pops were wrong (see above)");
      if (s->queue_len("mpmc") != 0) throw std::runtime_error("values left in the queue");
      return;
    }
    if (rank <= kPushers) {
      const int who = rank - 1;
      for (int i = 0; i < kItems; ++i) s->queue_push("mpmc", std::to_string(who) + ":" + std::to_string(i));
      s->set("pushed/" + std::to_string(who), "1");
      return;
    }
    const int p = rank - 1 - kPushers;
    std::string report;
    for (;;) {
      std::string v;
      try {
        v = s->queue_pop("mpmc", true, std::chrono::milliseconds(20 + 10 * p));
      } catch (const DistStoreError&) {
        continue;  // timed out: nothing was taken
      }
      if (v == "stop") break;
      report += v + "\n";
    }
    s->set("popped/" + std::to_string(p), report);
  });
  EXPECT_EQ(tt::describe_failures(results), "");
}

TEST(StoreQueueProcesses, ManyPushersAndPoppersOverTCPStore) { processes_push_and_pop(true); }

TEST(StoreQueueProcesses, ManyPushersAndPoppersOverTheBaseAlgorithm) { processes_push_and_pop(false); }

// Whether process `pid` has ended with all its threads (and so closed its
// sockets): a zombie not yet reaped whose other threads are gone too (a thread
// group's leader is a zombie while the others may still be exiting), or gone.
bool has_ended(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return true;
  std::istringstream fields(stat.substr(paren + 2));
  std::string state, field;
  fields >> state;
  for (int i = 4; i < 20; ++i) fields >> field;  // fields 4..19 (ppid .. nice)
  int threads = 0;
  fields >> threads;  // field 20: num_threads
  return state == "Z" && threads <= 1;
}

// Whether every connection the server on `port` holds as open is still open
// at its client's end too: false while a closed client's end of stream is on
// its way (a dead process's sockets are closed before it becomes a zombie, but
// on a loaded box the kernel may deliver the FIN over loopback later). Read
// from /proc/net/tcp, which lists both ends of a loopback connection.
bool server_saw_every_hang_up(uint16_t port) {
  std::ifstream f("/proc/net/tcp");
  std::string line;
  std::getline(f, line);  // the header
  std::map<std::pair<int, int>, int> state;  // (local port, remote port) -> TCP state
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string slot, local, remote, st;
    in >> slot >> local >> remote >> st;
    auto port_of = [](const std::string& a) { return std::stoi(a.substr(a.find(':') + 1), nullptr, 16); };
    state[{port_of(local), port_of(remote)}] = std::stoi(st, nullptr, 16);
  }
  constexpr int kEstablished = 1;
  for (const auto& [ends, st] : state) {
    if (ends.first != port || st != kEstablished) continue;
    auto client = state.find({ends.second, port});
    if (client != state.end() && client->second != kEstablished) return false;
  }
  return true;
}

// A pop parked on the server whose process is killed takes nothing: the next
// value goes to a live popper. (A popper that dies after the value was sent
// loses it, as with torch's TCPStore: the push comes only once the server can
// know of the death.)
TEST(StoreQueueProcesses, AKilledPoppersParkedPopTakesNothing) {
  tt::Shared<tt::PortBoard> board;
  tt::Shared<std::atomic<int>> victim;
  auto results = tt::run_in_processes(2, [&](int rank) {
    if (rank == 0) {
      auto master = tcp_master();
      board->publish(master->port());
      master->wait({"parked"}, kLong);
      auto until = std::chrono::steady_clock::now() + kLong;
      while (victim->load() == 0 || !has_ended(victim->load())) {
        if (std::chrono::steady_clock::now() > until) throw std::runtime_error("the popper was not killed");
        std::this_thread::sleep_for(5ms);
      }
      while (!server_saw_every_hang_up(master->port())) {
        if (std::chrono::steady_clock::now() > until) throw std::runtime_error("the popper's hang-up never came");
        std::this_thread::sleep_for(5ms);
      }
      master->queue_push("q", "for the living");
      if (master->queue_pop("q", true, 10s) != "for the living") throw std::runtime_error("wrong value");
      return;
    }
    auto client = tcp_client(static_cast<uint16_t>(board->wait(kLong)));
    victim->store(::getpid());
    std::thread killer([port = client->port()] {
      auto announcer = tcp_client(port);
      announcer->set("parked", "1");
      std::this_thread::sleep_for(300ms);  // the pop is parked by then, usually (either way is a valid test)
      ::raise(SIGKILL);
    });
    try {
      client->queue_pop("q", true, kLong);
    } catch (...) {
    }
    for (;;) ::pause();  // SIGKILL ends this process in any case
  });
  EXPECT_TRUE(results[0].ok()) << results[0].describe();
  EXPECT_EQ(results[1].signal, SIGKILL) << results[1].describe();
}

}  // namespace
