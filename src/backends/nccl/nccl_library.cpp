#include "backends/nccl/nccl_library.h"

#include <dlfcn.h>

#include <memory>
#include <vector>

#include "backends/nccl_availability.h"
#include "tdist/errors.h"
#include "util/settings.h"

namespace tdist::nccl {

namespace {

constexpr const char* kToolkitLibrary = "/usr/local/cuda/lib/libnccl.so.2";

struct Loaded {
  std::unique_ptr<Api> api;
  std::string error;  // why api is null
};

// The places to try, in order (nccl_library.h says why these).
std::vector<std::string> candidates() {
  if (auto named = settings::get<"TDIST_NCCL_LIBRARY">()) return {*named};
  return {"libnccl.so.2", kToolkitLibrary};
}

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& slot, bool required, std::string& missing) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (slot == nullptr && required) {
    missing += (missing.empty() ? "" : ", ") + std::string(name);
    return false;
  }
  return true;
}

// The file a loaded handle came from (the loader's search may have found it
// anywhere), through one of its symbols.
std::string file_of(void* symbol, const std::string& fallback) {
  Dl_info info{};
  if (symbol != nullptr && dladdr(symbol, &info) != 0 && info.dli_fname != nullptr) return info.dli_fname;
  return fallback;
}

Loaded load() {
  Loaded out;
  std::string tried;
  void* handle = nullptr;
  std::string name;
  for (const std::string& candidate : candidates()) {
    dlerror();
    handle = dlopen(candidate.c_str(), RTLD_LOCAL | RTLD_NOW);
    if (handle != nullptr) {
      name = candidate;
      break;
    }
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + candidate + " (" + (why ? why : "dlopen failed") + ")";
  }
  if (handle == nullptr) {
    out.error = "NCCL could not be loaded: tried " + tried +
                (settings::get<"TDIST_NCCL_LIBRARY">() ? " (TDIST_NCCL_LIBRARY names the only file tried)"
                                               : " (set TDIST_NCCL_LIBRARY to the path of libnccl.so.2)");
    return out;
  }
  auto api = std::make_unique<Api>();
  std::string missing;
  resolve(handle, "ncclGetVersion", api->GetVersion, true, missing);
  resolve(handle, "ncclGetUniqueId", api->GetUniqueId, true, missing);
  resolve(handle, "ncclCommInitRank", api->CommInitRank, true, missing);
  resolve(handle, "ncclCommAbort", api->CommAbort, true, missing);
  resolve(handle, "ncclCommDestroy", api->CommDestroy, true, missing);
  resolve(handle, "ncclCommGetAsyncError", api->CommGetAsyncError, true, missing);
  resolve(handle, "ncclGetErrorString", api->GetErrorString, true, missing);
  resolve(handle, "ncclAllReduce", api->AllReduce, true, missing);
  resolve(handle, "ncclBroadcast", api->Broadcast, true, missing);
  resolve(handle, "ncclReduce", api->Reduce, true, missing);
  resolve(handle, "ncclAllGather", api->AllGather, true, missing);
  resolve(handle, "ncclReduceScatter", api->ReduceScatter, true, missing);
  resolve(handle, "ncclSend", api->Send, true, missing);
  resolve(handle, "ncclRecv", api->Recv, true, missing);
  resolve(handle, "ncclGroupStart", api->GroupStart, true, missing);
  resolve(handle, "ncclGroupEnd", api->GroupEnd, true, missing);
  resolve(handle, "ncclRedOpCreatePreMulSum", api->RedOpCreatePreMulSum, true, missing);
  resolve(handle, "ncclRedOpDestroy", api->RedOpDestroy, true, missing);
  resolve(handle, "ncclCommSplit", api->CommSplit, false, missing);
  resolve(handle, "ncclGetLastError", api->GetLastError, false, missing);
  api->path = file_of(reinterpret_cast<void*>(api->GetVersion ? api->GetVersion : nullptr), name);
  if (!missing.empty()) {
    out.error = "NCCL at " + api->path + " lacks " + missing +
                " (tdist needs NCCL 2.11 or later; set TDIST_NCCL_LIBRARY to another libnccl.so.2)";
    dlclose(handle);
    return out;
  }
  int code = 0;
  if (api->GetVersion(&code) != ncclSuccess) {
    out.error = "NCCL at " + api->path + ": ncclGetVersion failed";
    return out;
  }
  api->version = version_string(code);
  // The handle stays open for the life of the process: communicators and
  // their proxy threads may outlive any one group.
  out.api = std::move(api);
  return out;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

std::string version_string(int code) {
  // NCCL_VERSION(X,Y,Z) is X*10000+Y*100+Z from 2.9 on, X*1000+Y*100+Z before.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int rest = code >= 10000 ? code % 10000 : code % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

const Api* try_api(std::string* why) {
  const Loaded& l = loaded();
  if (!l.api && why) *why = l.error;
  return l.api.get();
}

const Api& api(const std::string& who) {
  std::string why;
  if (const Api* a = try_api(&why)) return *a;
  throw DistBackendError(who + ": " + why);
}

}  // namespace tdist::nccl

namespace tdist {

bool nccl_library_loads() { return nccl::try_api() != nullptr; }

std::string nccl_library_version() {
  const nccl::Api* a = nccl::try_api();
  return a ? a->version : std::string();
}

}  // namespace tdist
