// PrefixStore: every key becomes "prefix/key" in the underlying store.
#include "tdist/errors.h"
#include "tdist/store.h"

namespace tdist {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(store ? store->timeout() : kDefaultStoreTimeout), prefix_(std::move(prefix)), store_(std::move(store)) {
  if (!store_) throw DistValueError("PrefixStore('" + prefix_ + "'): the underlying store is null");
}

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(join(k));
  return out;
}

void PrefixStore::set(const std::string& key, const std::string& value) { store_->set(join(key), value); }
std::string PrefixStore::get(const std::string& key) { return store_->get(join(key)); }
int64_t PrefixStore::add(const std::string& key, int64_t amount) { return store_->add(join(key), amount); }
void PrefixStore::append(const std::string& key, const std::string& value) { store_->append(join(key), value); }
std::string PrefixStore::compare_set(const std::string& key, const std::string& expected,
                                     const std::string& desired) {
  return store_->compare_set(join(key), expected, desired);
}
bool PrefixStore::check(const std::vector<std::string>& keys) { return store_->check(join(keys)); }
void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  store_->wait(join(keys), timeout);
}
bool PrefixStore::delete_key(const std::string& key) { return store_->delete_key(join(key)); }
// As in torch: the count of the underlying store (keys of every prefix).
int64_t PrefixStore::num_keys() { return store_->num_keys(); }
std::vector<std::string> PrefixStore::multi_get(const std::vector<std::string>& keys) {
  return store_->multi_get(join(keys));
}
void PrefixStore::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  store_->multi_set(join(keys), values);
}
// The underlying store's queue under "prefix/key" (its native form, if any).
void PrefixStore::queue_push(const std::string& key, const std::string& value) { store_->queue_push(join(key), value); }
std::string PrefixStore::queue_pop(const std::string& key, bool block, std::chrono::milliseconds timeout) {
  return store_->queue_pop(join(key), block, timeout);
}
int64_t PrefixStore::queue_len(const std::string& key) { return store_->queue_len(join(key)); }
std::vector<std::string> PrefixStore::list_keys() {
  const std::string head = prefix_ + "/";
  std::vector<std::string> out;
  for (auto& k : store_->list_keys())
    if (k.compare(0, head.size(), head) == 0) out.push_back(k.substr(head.size()));
  return out;
}
std::shared_ptr<Store> PrefixStore::clone() { return std::make_shared<PrefixStore>(prefix_, store_->clone()); }
// The timeout is the underlying store's: get/wait there use it.
void PrefixStore::set_timeout(std::chrono::milliseconds timeout) {
  Store::set_timeout(timeout);
  store_->set_timeout(timeout);
}

}  // namespace tdist
