// tdist.Store subclassed in Python (torch allows it): PyStore is the C++ side
// of such a store, whose methods call the Python ones. A shared_ptr<Store>
// taken from Python (init_process_group(store=...), PrefixStore(...)) keeps a
// Python-made store's Python object alive as long as C++ holds it; without
// that, the object could be collected while C++ still calls its methods.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include <tdist/store.h>

namespace tdist_py {

class PyStore : public tdist::Store {
 public:
  PyStore() = default;
  // Every method calls the Python override; set, get, add, compare_set,
  // check, wait, delete_key and num_keys must exist (NotImplementedError
  // otherwise). append, multi_get, multi_set and the queue methods fall back
  // to Store's forms built on the others when the class has none.
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  void append(const std::string& key, const std::string& value) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
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
  // The Python methods where the class defines them, else Store's (DistStoreError).
  std::vector<std::string> list_keys() override;
  std::shared_ptr<tdist::Store> clone() override;
};

// `held`, which C++ got from the Python object `self` of a Python subclass,
// as a shared_ptr that also holds a reference to `self`.
std::shared_ptr<tdist::Store> keep_python_alive(std::shared_ptr<tdist::Store> held, pybind11::handle self);

}  // namespace tdist_py

namespace pybind11::detail {

// Reads the loaded holder through the base's public conversion only: pybind11 2.x keeps it in a
// member `holder`, 3.x in `shared_ptr_storage` (and loads it lazily), so naming either breaks the other.
template <>
class type_caster<std::shared_ptr<tdist::Store>>
    : public copyable_holder_caster<tdist::Store, std::shared_ptr<tdist::Store>> {
  using Base = copyable_holder_caster<tdist::Store, std::shared_ptr<tdist::Store>>;
  std::shared_ptr<tdist::Store> kept_;

 public:
  bool load(handle src, bool convert) {
    if (!Base::load(src, convert)) return false;
    kept_ = static_cast<std::shared_ptr<tdist::Store>&>(static_cast<Base&>(*this));
    if (kept_ && dynamic_cast<tdist_py::PyStore*>(kept_.get()) != nullptr)
      kept_ = tdist_py::keep_python_alive(std::move(kept_), src);
    return true;
  }
  explicit operator std::shared_ptr<tdist::Store>*() { return &kept_; }
  explicit operator std::shared_ptr<tdist::Store>&() { return kept_; }
};

}  // namespace pybind11::detail
