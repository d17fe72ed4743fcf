// The key-value table behind HashStore, FileStore's replayed log and the
// TCPStore server: values are byte strings; a key written by add() is a
// counter (its value is the decimal text of the count) and only counters may
// be added to.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tdist::store_detail {

class KvTable {
 public:
  struct Entry {
    std::string value;
    bool counter = false;
  };
  enum class AddStatus { kOk, kNotCounter, kOverflow };

  const Entry* find(const std::string& key) const {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : &it->second;
  }
  bool contains(const std::string& key) const { return map_.count(key) != 0; }
  size_t size() const { return map_.size(); }
  // Bytes of keys and values held (what a store's memory limit counts).
  size_t bytes() const { return bytes_; }
  // Every key, in no particular order (list_keys), and the bytes of all keys.
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(map_.size());
    for (const auto& kv : map_) out.push_back(kv.first);
    return out;
  }
  size_t key_bytes() const {
    size_t n = 0;
    for (const auto& kv : map_) n += kv.first.size();
    return n;
  }
  void clear() {
    map_.clear();
    bytes_ = 0;
  }

  void set(const std::string& key, std::string value);
  void set_counter(const std::string& key, std::string decimal);
  void append(const std::string& key, const std::string& value);
  // Creates the counter with `amount` or adds to it; *result is the new count.
  AddStatus add(const std::string& key, int64_t amount, int64_t* result);
  // torch's compare_set; returns whether it wrote desired. *after is the
  // value returned to the caller.
  bool compare_set(const std::string& key, const std::string& expected, const std::string& desired,
                   std::string* after);
  bool erase(const std::string& key) {
    bytes_ -= footprint(key);
    return map_.erase(key) != 0;
  }

  // The text of an add() failure, for "<store>: add(...): <text>".
  static std::string add_error(AddStatus status, int64_t current_or_zero, int64_t amount);

 private:
  size_t footprint(const std::string& key) const {
    auto it = map_.find(key);
    return it == map_.end() ? 0 : key.size() + it->second.value.size();
  }
  std::unordered_map<std::string, Entry> map_;
  size_t bytes_ = 0;
};

}  // namespace tdist::store_detail
