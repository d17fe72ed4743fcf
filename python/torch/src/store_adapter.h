// A tdist::Store over a torch c10d::Store, so that tdist's rendezvous goes
// through the store torch made for the group (TCPStore, FileStore, HashStore,
// a Python store, wrapped in the PrefixStore torch gives each group).
#pragma once

#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "tdist/store.h"

namespace tdist_torch {

class C10dStoreAdapter final : public tdist::Store {
 public:
  explicit C10dStoreAdapter(c10::intrusive_ptr<c10d::Store> store);

  // Errors of the torch store come back as tdist::DistStoreError with torch's
  // message, so tdist's rendezvous can tell which ranks are missing.
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  // torch 1.13's Store has no append: emulated with compareSet (atomic on
  // stores that implement compareSet, which TCPStore, FileStore and HashStore do).
  void append(const std::string& key, const std::string& value) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  using tdist::Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  bool has_extended_api() const override { return false; }
  void set_timeout(std::chrono::milliseconds timeout) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace tdist_torch
