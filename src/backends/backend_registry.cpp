#include "backends/backend_registry.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "tdist/errors.h"

namespace tdist {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, BackendEntry> entries;
};

Registry& raw_registry() {
  static Registry r;
  return r;
}

bool registering_builtins = false;  // only true inside the call_once below

// The backends built into the library: each entry registers one (its name,
// factory and devices), from the backend's own file. Adding a built-in
// backend is adding its file and its line here.
constexpr void (*kBuiltinBackends[])() = {
    register_tdist_backend,
    register_mpi_backend,
    register_nccl_backend,
};

// Built-ins are registered on first lookup rather than by static initializers,
// so the order in which objects of the shared library initialise does not
// matter. A backend the user registered under a built-in name first wins.
Registry& registry() {
  static std::once_flag builtins;
  std::call_once(builtins, [] {
    registering_builtins = true;
    for (auto register_builtin : kBuiltinBackends) register_builtin();
    registering_builtins = false;
  });
  return raw_registry();
}

std::string canonical(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "gloo") return "tdist";  // so torch programs run unchanged
  return lower;
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory, std::vector<DeviceType> devices) {
  register_backend_entry(BackendEntry{name, std::move(factory), std::move(devices)});
}

void register_backend_entry(BackendEntry entry) {
  if (entry.name.empty() || !entry.factory)
    throw DistValueError("register_backend: a backend needs a name and a factory");
  entry.name = canonical(entry.name);
  auto& r = raw_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (registering_builtins)
    r.entries.emplace(entry.name, std::move(entry));
  else
    r.entries[entry.name] = std::move(entry);
}

bool is_backend_available(const std::string& name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.entries.count(canonical(name)) > 0;
}

std::vector<std::string> registered_backends() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (auto& [k, v] : r.entries) names.push_back(k);
  return names;
}

BackendEntry lookup_backend(const std::string& name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.entries.find(canonical(name));
  if (it == r.entries.end()) {
    std::string known;
    for (auto& [k, v] : r.entries) known += (known.empty() ? "" : ", ") + k;
    std::string hint;
    if (canonical(name) == "mpi")
      hint = ": this build of tdist has no MPI (configured without an MPI library or with -DTDIST_WITH_MPI=OFF; "
             "apt-get install libopenmpi-dev and rebuild)";
    if (canonical(name) == "nccl")
      hint = ": this build of tdist has no CUDA (CMake found no nvcc, or -DTDIST_WITH_CUDA=OFF; install the CUDA "
             "toolkit, which carries NCCL, and rebuild)";
    throw DistValueError("unknown backend '" + name + "' (registered: " + known + ")" + hint);
  }
  return it->second;
}

}  // namespace tdist
