// HashStore: a table under a mutex; waiters block on a condition variable
// with a deadline.
#include <condition_variable>
#include <mutex>

#include "store/kv_table.h"
#include "store/store_util.h"
#include "tdist/errors.h"
#include "tdist/store.h"

namespace tdist {

using store_detail::KvTable;
using store_detail::quote;
using store_detail::quote_list;

struct HashStore::State {
  std::mutex mu;
  std::condition_variable cv;
  KvTable table;

  // Waits until pred() holds or the timeout passes; returns pred().
  template <typename Pred>
  bool wait_for(std::unique_lock<std::mutex>& lock, Millis timeout, Pred pred) {
    if (timeout >= store_detail::kForever) {
      cv.wait(lock, pred);
      return true;
    }
    return cv.wait_until(lock, store_detail::time_after(timeout), pred);
  }
};

HashStore::HashStore() : state_(std::make_shared<State>()) {}
HashStore::HashStore(std::shared_ptr<State> state) : state_(std::move(state)) {}
HashStore::~HashStore() = default;

void HashStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->table.set(key, value);
  }
  state_->cv.notify_all();
}

std::string HashStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(state_->mu);
  Millis t = timeout();
  if (!state_->wait_for(lock, t, [&] { return state_->table.contains(key); }))
    throw DistStoreError("HashStore: get(key " + quote(key) + ") timed out after " + format_ms(t) +
                         ": the key was not set");
  return state_->table.find(key)->value;
}

int64_t HashStore::add(const std::string& key, int64_t amount) {
  int64_t result = 0;
  KvTable::AddStatus status;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    status = state_->table.add(key, amount, &result);
  }
  if (status != KvTable::AddStatus::kOk)
    throw DistStoreError("HashStore: add(key " + quote(key) + ", " + std::to_string(amount) +
                         "): " + KvTable::add_error(status, result, amount));
  state_->cv.notify_all();
  return result;
}

void HashStore::append(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->table.append(key, value);
  }
  state_->cv.notify_all();
}

std::string HashStore::compare_set(const std::string& key, const std::string& expected,
                                   const std::string& desired) {
  std::string after;
  bool wrote;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    wrote = state_->table.compare_set(key, expected, desired, &after);
  }
  if (wrote) state_->cv.notify_all();
  return after;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (const auto& k : keys)
    if (!state_->table.contains(k)) return false;
  return true;
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  auto all = [&] {
    for (const auto& k : keys)
      if (!state_->table.contains(k)) return false;
    return true;
  };
  if (state_->wait_for(lock, timeout, all)) return;
  auto missing = store_detail::missing_keys(keys, [&](const std::string& k) { return state_->table.contains(k); });
  throw DistStoreError("HashStore: wait(keys " + quote_list(keys) + ") timed out after " + format_ms(timeout) +
                       "; missing keys: " + quote_list(missing));
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->table.erase(key);
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return static_cast<int64_t>(state_->table.size());
}

std::vector<std::string> HashStore::list_keys() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->table.keys();
}

std::shared_ptr<Store> HashStore::clone() {
  auto copy = std::shared_ptr<HashStore>(new HashStore(state_));
  copy->set_timeout(timeout());
  return copy;
}

}  // namespace tdist
