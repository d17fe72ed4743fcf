// The Store contract (torch.distributed's semantics), run against every store:
// HashStore, PrefixStore over a HashStore, FileStore and TCPStore. Each case
// gets two handles on the same data (`store` and `other`: a second client, a
// second FileStore on the file, ...) so visibility across instances is tested too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.h"
#include "store/store_errors.h"
#include "tdist/errors.h"
#include "tdist/store.h"

using namespace std::chrono_literals;
using tdist::DistStoreError;
using tdist::Store;

namespace {

constexpr std::chrono::milliseconds kLong = 30s;   // for calls that must succeed
constexpr std::chrono::milliseconds kShort = 1s;   // for calls that must time out

struct Kit {
  std::shared_ptr<Store> store;
  std::shared_ptr<Store> other;
  std::function<void()> cleanup;
  ~Kit() {
    other.reset();
    store.reset();
    if (cleanup) cleanup();
  }
};

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
    std::string path = tdist::testing::temp_path("semantics");
    kit->store = std::make_shared<tdist::FileStore>(path, -1, kLong);
    kit->other = std::make_shared<tdist::FileStore>(path, -1, kLong);
    kit->cleanup = [path] { ::unlink(path.c_str()); };
  } else if (kind == "TCPStore") {
    auto master = std::make_shared<tdist::TCPStore>(
        "127.0.0.1", 0, tdist::TCPStoreOptions{.world_size = std::nullopt, .is_master = true, .timeout = kLong, .wait_for_workers = false});
    kit->store = master;
    kit->other = std::make_shared<tdist::TCPStore>("127.0.0.1", master->port(), tdist::TCPStoreOptions{.world_size = std::nullopt, .timeout = kLong});
  }
  return kit;
}

using tdist::testing::contains;
using tdist::testing::store_error;

class StoreSemantics : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { kit_ = make_kit(GetParam()); }
  void TearDown() override { kit_.reset(); }
  Store& store() { return *kit_->store; }
  Store& other() { return *kit_->other; }
  bool is_file() const { return GetParam() == "FileStore"; }
  std::unique_ptr<Kit> kit_;
};

TEST_P(StoreSemantics, SetThenGetFromAnotherHandle) {
  store().set("k", "v1");
  EXPECT_EQ(other().get("k"), "v1");
  store().set("k", "v2");  // set overwrites
  EXPECT_EQ(other().get("k"), "v2");
  EXPECT_EQ(store().get("k"), "v2");
}

TEST_P(StoreSemantics, EmptyAndBinaryKeysAndValues) {
  std::string binary("a\0b\xff\n", 5);
  store().set(binary, binary);
  store().set("", "empty key");
  store().set("empty value", "");
  EXPECT_EQ(other().get(binary), binary);
  EXPECT_EQ(other().get(""), "empty key");
  EXPECT_EQ(other().get("empty value"), "");
  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>(i);
  store().set("big", big);
  EXPECT_EQ(other().get("big"), big);
}

TEST_P(StoreSemantics, GetWaitsUntilTheKeyIsSet) {
  std::string got;
  std::thread reader([&] { got = other().get("late"); });
  store().set("late", "here");
  reader.join();
  EXPECT_EQ(got, "here");
}

TEST_P(StoreSemantics, GetTimeoutNamesKeyAndTimeout) {
  other().set_timeout(kShort);
  EXPECT_EQ(other().timeout(), kShort);
  auto start = std::chrono::steady_clock::now();
  std::string msg = store_error([&] { other().get("never-set-key"); });
  EXPECT_GE(std::chrono::steady_clock::now() - start, kShort - 20ms);
  EXPECT_TRUE(contains(msg, "never-set-key")) << msg;
  EXPECT_TRUE(contains(msg, "1000 ms")) << msg;
  EXPECT_TRUE(contains(msg, "get")) << msg;
  // The store stays usable after a timeout.
  store().set("after", "ok");
  EXPECT_EQ(other().get("after"), "ok");
}

TEST_P(StoreSemantics, AddCreatesAndIncrementsCounters) {
  EXPECT_EQ(store().add("c", 1), 1);
  EXPECT_EQ(other().add("c", 6), 7);
  EXPECT_EQ(store().get("c"), "7");
  EXPECT_EQ(store().add("c", -10), -3);
  EXPECT_EQ(other().get("c"), "-3");
  EXPECT_EQ(store().add("zero", 0), 0);
  EXPECT_EQ(store().get("zero"), "0");
  EXPECT_EQ(store().add("big", int64_t{1} << 40), int64_t{1} << 40);
}

TEST_P(StoreSemantics, AddOnAValueThatIsNotACounterFails) {
  store().set("by-set", "v");
  std::string msg = store_error([&] { other().add("by-set", 1); });
  EXPECT_TRUE(contains(msg, "by-set")) << msg;
  EXPECT_TRUE(contains(msg, "counter")) << msg;
  EXPECT_EQ(store().get("by-set"), "v");  // unchanged

  store().append("by-append", "1");
  EXPECT_THROW(store().add("by-append", 1), DistStoreError);
  store().compare_set("by-cas", "", "1");
  EXPECT_THROW(store().add("by-cas", 1), DistStoreError);
  store().multi_set({"by-multi"}, {"1"});
  EXPECT_THROW(store().add("by-multi", 1), DistStoreError);

  // A counter overwritten by set is no longer a counter; appending to a counter neither.
  store().add("was-counter", 5);
  store().set("was-counter", "5");
  EXPECT_THROW(store().add("was-counter", 1), DistStoreError);
  store().add("appended", 1);
  store().append("appended", "0");
  EXPECT_EQ(store().get("appended"), "10");
  EXPECT_THROW(store().add("appended", 1), DistStoreError);
}

TEST_P(StoreSemantics, AppendCreatesOrAppends) {
  store().append("a", "po");
  other().append("a", "tato");
  EXPECT_EQ(store().get("a"), "potato");
  store().set("s", "x");
  store().append("s", "y");
  EXPECT_EQ(other().get("s"), "xy");
}

TEST_P(StoreSemantics, CompareSetAllCases) {
  // Key exists and equals expected: set desired, return desired.
  store().set("key", "first_value");
  EXPECT_EQ(other().compare_set("key", "first_value", "second_value"), "second_value");
  EXPECT_EQ(store().get("key"), "second_value");
  // Key exists and differs: unchanged, return the current value.
  EXPECT_EQ(other().compare_set("key", "wrong", "third_value"), "second_value");
  EXPECT_EQ(store().get("key"), "second_value");
  // Key exists, expected empty but the value is not: unchanged.
  EXPECT_EQ(other().compare_set("key", "", "fourth_value"), "second_value");
  // Key missing and expected empty: set desired, return desired.
  EXPECT_EQ(store().compare_set("fresh", "", "created"), "created");
  EXPECT_EQ(other().get("fresh"), "created");
  // Key missing and expected not empty: return expected, set nothing.
  EXPECT_EQ(store().compare_set("absent", "expected", "desired"), "expected");
  EXPECT_FALSE(other().check({"absent"}));
  // Key holding the empty string and expected empty: set.
  store().set("empty", "");
  EXPECT_EQ(store().compare_set("empty", "", "filled"), "filled");
  // On a counter, the decimal text is compared.
  store().add("counter", 3);
  EXPECT_EQ(store().compare_set("counter", "3", "three"), "three");
  EXPECT_EQ(other().get("counter"), "three");
}

TEST_P(StoreSemantics, CheckNeverWaits) {
  EXPECT_TRUE(store().check({}));
  EXPECT_FALSE(store().check({"nope"}));
  store().set("a", "1");
  store().add("b", 1);
  EXPECT_TRUE(other().check({"a"}));
  EXPECT_TRUE(other().check({"a", "b"}));
  EXPECT_FALSE(other().check({"a", "b", "c"}));
}

TEST_P(StoreSemantics, WaitReturnsWhenAllKeysAreSet) {
  store().wait({});
  std::thread waiter([&] { other().wait({"w1", "w2", "w1"}); });
  store().set("w1", "x");
  store().add("w2", 1);
  waiter.join();
  other().wait({"w1", "w2"}, 5s);
}

TEST_P(StoreSemantics, WaitTimeoutListsMissingKeysAndTimeout) {
  store().set("present", "1");
  auto start = std::chrono::steady_clock::now();
  std::string msg = store_error([&] { other().wait({"present", "missing-one", "missing-two"}, kShort); });
  EXPECT_GE(std::chrono::steady_clock::now() - start, kShort - 20ms);
  EXPECT_TRUE(contains(msg, "missing-one")) << msg;
  EXPECT_TRUE(contains(msg, "missing-two")) << msg;
  EXPECT_TRUE(contains(msg, "1000 ms")) << msg;
  // Only the missing keys are listed as missing.
  std::string missing = msg.substr(std::min(msg.size(), msg.find("missing keys: [")));
  EXPECT_TRUE(contains(missing, "missing-one'") && contains(missing, "missing-two'")) << msg;
  EXPECT_FALSE(contains(missing, "present")) << msg;
  // The store's own timeout is used by wait(keys).
  other().set_timeout(kShort);
  msg = store_error([&] { other().wait({"nope"}); });
  EXPECT_TRUE(contains(msg, "nope'") && contains(msg, "1000 ms")) << msg;
}

TEST_P(StoreSemantics, DeleteKey) {
  store().set("first_key", "v");
  if (is_file()) {
    std::string msg = store_error([&] { store().delete_key("first_key"); });
    EXPECT_TRUE(contains(msg, "not supported")) << msg;
    EXPECT_TRUE(contains(msg, "FileStore")) << msg;
    return;
  }
  EXPECT_TRUE(other().delete_key("first_key"));
  EXPECT_FALSE(other().delete_key("first_key"));
  EXPECT_FALSE(store().delete_key("bad_key"));
  EXPECT_FALSE(store().check({"first_key"}));
  // Deleted keys can be created again, counters too.
  store().add("first_key", 2);
  EXPECT_EQ(other().get("first_key"), "2");
}

TEST_P(StoreSemantics, NumKeys) {
  EXPECT_EQ(store().num_keys(), 0);
  store().set("a", "1");
  store().add("b", 1);
  store().append("c", "x");
  store().set("a", "2");  // overwrite: still 3 keys
  EXPECT_EQ(other().num_keys(), 3);
  if (!is_file()) {
    store().delete_key("a");
    EXPECT_EQ(other().num_keys(), 2);
  }
}

TEST_P(StoreSemantics, ListKeysShowsEveryUserKey) {
  EXPECT_TRUE(store().list_keys().empty());
  store().set("a", "1");
  store().add("b", 1);
  other().append("c", "x");
  auto keys = other().list_keys();
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()), (std::set<std::string>{"a", "b", "c"}));
  EXPECT_EQ(static_cast<int64_t>(keys.size()), store().num_keys());
}

TEST_P(StoreSemantics, CloneSeesAndWritesTheSameData) {
  store().set("before", "1");
  std::shared_ptr<Store> copy = store().clone();
  ASSERT_NE(copy.get(), &store());
  EXPECT_EQ(copy->get("before"), "1");
  copy->set("after", "2");
  EXPECT_EQ(other().get("after"), "2");
  EXPECT_EQ(copy->timeout(), store().timeout());
  // The clone lives on its own: dropping it leaves the store whole.
  copy.reset();
  EXPECT_EQ(store().get("after"), "2");
}

TEST_P(StoreSemantics, MultiSetAndMultiGet) {
  store().multi_set({"first_key", "second_key"}, {"po", "tato"});
  EXPECT_EQ(other().multi_get({"first_key", "second_key"}), (std::vector<std::string>{"po", "tato"}));
  EXPECT_EQ(other().multi_get({"second_key", "first_key", "second_key"}),
            (std::vector<std::string>{"tato", "po", "tato"}));
  EXPECT_TRUE(other().multi_get({}).empty());
  std::vector<std::string> keys, values;
  for (int i = 0; i < 500; ++i) {
    keys.push_back("many/" + std::to_string(i));
    values.push_back(std::string(static_cast<size_t>(i), 'v'));
  }
  store().multi_set(keys, values);
  EXPECT_EQ(other().multi_get(keys), values);
  EXPECT_THROW(store().multi_set({"a", "b"}, {"1"}), tdist::DistError);
}

TEST_P(StoreSemantics, MultiGetWaitsLikeGet) {
  store().set("ready", "1");
  std::vector<std::string> got;
  std::thread reader([&] { got = other().multi_get({"ready", "late"}); });
  store().set("late", "2");
  reader.join();
  EXPECT_EQ(got, (std::vector<std::string>{"1", "2"}));

  other().set_timeout(kShort);
  std::string msg = store_error([&] { other().multi_get({"ready", "never"}); });
  EXPECT_TRUE(contains(msg, "never")) << msg;
  EXPECT_TRUE(contains(msg, "1000 ms")) << msg;
}

TEST_P(StoreSemantics, TimeoutGetterAndSetter) {
  store().set_timeout(12345ms);
  EXPECT_EQ(store().timeout(), 12345ms);
  store().set_timeout(kLong);
  EXPECT_EQ(store().timeout(), kLong);
}

TEST_P(StoreSemantics, ConcurrentAddsFromEightThreads) {
  constexpr int kThreads = 8, kAdds = 100;
  std::vector<std::vector<int64_t>> seen(kThreads);
  tdist::testing::run_in_threads(kThreads, [&](int t) {
    Store& s = (t % 2 == 0) ? store() : other();
    for (int i = 0; i < kAdds; ++i) seen[t].push_back(s.add("counter", 1));
  });
  EXPECT_EQ(store().get("counter"), std::to_string(kThreads * kAdds));
  std::set<int64_t> all;
  for (const auto& v : seen) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kAdds));  // every add saw a distinct value
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kAdds);
}

TEST_P(StoreSemantics, ConcurrentWritersAndWaiters) {
  constexpr int kThreads = 6;
  tdist::testing::run_in_threads(kThreads, [&](int t) {
    Store& s = (t % 2 == 0) ? store() : other();
    s.set("rank/" + std::to_string(t), std::to_string(t * t));
    std::vector<std::string> keys;
    for (int r = 0; r < kThreads; ++r) keys.push_back("rank/" + std::to_string(r));
    auto values = s.multi_get(keys);
    for (int r = 0; r < kThreads; ++r)
      if (values[r] != std::to_string(r * r)) throw std::runtime_error("wrong value for rank " + std::to_string(r));
  });
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreSemantics,
                         ::testing::Values("HashStore", "PrefixStore", "FileStore", "TCPStore"),
                         [](const auto& info) { return info.param; });

// PrefixStore specifics: keys land under "prefix/" in the underlying store.
TEST(PrefixStore, KeysArePrefixedInTheUnderlyingStore) {
  auto base = std::make_shared<tdist::HashStore>();
  base->set_timeout(kShort);
  tdist::PrefixStore a("a", base), b("b", base);
  a.set("k", "from a");
  b.set("k", "from b");
  EXPECT_EQ(base->get("a/k"), "from a");
  EXPECT_EQ(base->get("b/k"), "from b");
  EXPECT_EQ(a.underlying_store(), base);
  EXPECT_EQ(a.prefix(), "a");
  EXPECT_EQ(a.timeout(), kShort);
  std::string msg = store_error([&] { b.get("missing"); });
  EXPECT_TRUE(contains(msg, "b/missing")) << msg;
  a.set_timeout(2s);
  EXPECT_EQ(base->timeout(), 2s);
  EXPECT_EQ(a.list_keys(), std::vector<std::string>{"k"});  // b's key is not a's
  // Nested prefixes.
  auto ab = std::make_shared<tdist::PrefixStore>("inner", std::make_shared<tdist::PrefixStore>("outer", base));
  ab->set("x", "1");
  EXPECT_EQ(base->get("outer/inner/x"), "1");
}

}  // namespace
