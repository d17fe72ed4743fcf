#include "transport/data_path_registry.h"

#include <mutex>
#include <utility>

#include "tdist/errors.h"
#include "util/socket.h"

namespace tdist {

namespace {
struct Registry {
  std::mutex mu;
  // Few entries, read when a pair connects: a vector keeps registration order.
  std::vector<std::pair<std::string, std::unique_ptr<DataPathFactory>>> paths;
};

Registry& registry() {
  static Registry r;  // built on first use: paths register from static initializers
  return r;
}
}  // namespace

void SetupChannel::send(const void* data, size_t n, Deadline deadline) const {
  send_all(fd_, data, n, deadline, peer_name_);
}

void SetupChannel::recv(void* data, size_t n, Deadline deadline) const {
  recv_all(fd_, data, n, deadline, peer_name_);
}

void register_data_path(const std::string& name, DataPathFactory factory) {
  if (name.empty() || name == "tcp" || name.find_first_of(", \tABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos)
    throw DistValueError("register_data_path: '" + name +
                         "' cannot name a data path (lower case, no comma or space; tcp is the socket's own)");
  if (!factory.reaches || !factory.connect)
    throw DistValueError("register_data_path: the factory of '" + name + "' needs reaches and connect");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& [known, f] : r.paths)
    if (known == name) throw DistValueError("register_data_path: '" + name + "' is registered already");
  // Entries are never removed: a factory found earlier stays valid.
  r.paths.emplace_back(name, std::make_unique<DataPathFactory>(std::move(factory)));
}

const DataPathFactory* find_data_path(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& [known, f] : r.paths)
    if (known == name) return f.get();
  return nullptr;
}

std::vector<std::string> known_data_paths() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (auto& [known, f] : r.paths) names.push_back(known);
  names.push_back("tcp");
  return names;
}

}  // namespace tdist
