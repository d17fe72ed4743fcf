#include "store_adapter.h"

#include <exception>

#include "tdist/errors.h"

namespace tdist_torch {

namespace {

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string text(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// Runs `f` and turns whatever the torch store throws into DistStoreError.
template <typename F>
auto guarded(const char* op, const std::string& key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const tdist::DistError&) {
    throw;
  } catch (const std::exception& e) {
    throw tdist::DistStoreError(std::string("torch store: ") + op + "('" + key + "') failed: " + e.what());
  }
}

std::string join(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? "', '" : "") + keys[i];
  return s;
}

}  // namespace

C10dStoreAdapter::C10dStoreAdapter(c10::intrusive_ptr<c10d::Store> store)
    : tdist::Store(store->getTimeout()), store_(std::move(store)) {}

void C10dStoreAdapter::set(const std::string& key, const std::string& value) {
  guarded("set", key, [&] { store_->set(key, bytes(value)); });
}

std::string C10dStoreAdapter::get(const std::string& key) {
  return guarded("get", key, [&] { return text(store_->get(key)); });
}

int64_t C10dStoreAdapter::add(const std::string& key, int64_t amount) {
  return guarded("add", key, [&] { return store_->add(key, amount); });
}

void C10dStoreAdapter::append(const std::string& key, const std::string& value) {
  guarded("append", key, [&] {
    std::string current = store_->check({key}) ? text(store_->get(key)) : std::string();
    for (;;) {
      std::string desired = current + value;
      std::string now = text(store_->compareSet(key, bytes(current), bytes(desired)));
      if (now == desired) return;
      current = now;  // another writer came first: retry on its value
    }
  });
}

std::string C10dStoreAdapter::compare_set(const std::string& key, const std::string& expected,
                                          const std::string& desired) {
  return guarded("compare_set", key, [&] { return text(store_->compareSet(key, bytes(expected), bytes(desired))); });
}

bool C10dStoreAdapter::check(const std::vector<std::string>& keys) {
  return guarded("check", join(keys), [&] { return store_->check(keys); });
}

void C10dStoreAdapter::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  // torch reads a zero timeout as "none"; tdist's deadline arithmetic may hand
  // us zero when a deadline has just passed, which must not mean "forever".
  if (timeout <= std::chrono::milliseconds(0)) timeout = std::chrono::milliseconds(1);
  guarded("wait", join(keys), [&] { store_->wait(keys, timeout); });
}

bool C10dStoreAdapter::delete_key(const std::string& key) {
  return guarded("delete_key", key, [&] { return store_->deleteKey(key); });
}

int64_t C10dStoreAdapter::num_keys() {
  return guarded("num_keys", "", [&] { return store_->getNumKeys(); });
}

void C10dStoreAdapter::set_timeout(std::chrono::milliseconds timeout) {
  tdist::Store::set_timeout(timeout);
  store_->setTimeout(timeout);
}

}  // namespace tdist_torch
