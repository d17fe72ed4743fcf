#include "store/kv_table.h"

#include "store/store_util.h"

namespace tdist::store_detail {

void KvTable::set(const std::string& key, std::string value) {
  bytes_ -= footprint(key);
  Entry& e = map_[key];
  e.value = std::move(value);
  e.counter = false;
  bytes_ += key.size() + e.value.size();
}

void KvTable::set_counter(const std::string& key, std::string decimal) {
  bytes_ -= footprint(key);
  Entry& e = map_[key];
  e.value = std::move(decimal);
  e.counter = true;
  bytes_ += key.size() + e.value.size();
}

void KvTable::append(const std::string& key, const std::string& value) {
  bytes_ -= footprint(key);
  Entry& e = map_[key];
  e.value += value;
  e.counter = false;
  bytes_ += key.size() + e.value.size();
}

KvTable::AddStatus KvTable::add(const std::string& key, int64_t amount, int64_t* result) {
  auto it = map_.find(key);
  int64_t current = 0;
  if (it != map_.end()) {
    auto parsed = it->second.counter ? parse_counter(it->second.value) : std::nullopt;
    if (!parsed) return AddStatus::kNotCounter;
    current = *parsed;
  }
  int64_t next = 0;
  if (__builtin_add_overflow(current, amount, &next)) {
    *result = current;
    return AddStatus::kOverflow;
  }
  set_counter(key, counter_text(next));
  *result = next;
  return AddStatus::kOk;
}

bool KvTable::compare_set(const std::string& key, const std::string& expected, const std::string& desired,
                          std::string* after) {
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) {
      *after = expected;
      return false;
    }
    set(key, desired);
    *after = desired;
    return true;
  }
  if (it->second.value == expected) {
    set(key, desired);
    *after = desired;
    return true;
  }
  *after = it->second.value;
  return false;
}

std::string KvTable::add_error(AddStatus status, int64_t current, int64_t amount) {
  if (status == AddStatus::kOverflow)
    return "the counter (" + std::to_string(current) + ") plus " + std::to_string(amount) + " overflows int64";
  return "the key holds a value written by set/append/compare_set/multi_set, not a counter created by add";
}

}  // namespace tdist::store_detail
