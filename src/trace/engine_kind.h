// Which engine ran an operation, as a value: the selector decides one, an
// Engine says which it is, and the flight recorder keeps it in a byte of its
// stamp. It lives in the core layer because the recorder, below the engines,
// stores it; the engines themselves are in src/engines.
#pragma once

#include <cstdint>
#include <string_view>

namespace tdist {

enum class EngineKind : uint8_t {
  Unknown = 0,   // not said (a backend that does not mark its operations)
  Transport,     // the algorithms over messages (src/algorithms)
  SharedMemory,  // the group's shared-memory segment (src/shm_engine)
  Hierarchical,  // steps inside each host and among hosts
  Mpi,           // the mpi backend's library
  Nccl,          // the nccl backend's library
};
inline constexpr uint8_t kEngineKinds = 6;

// The name traces and diagnostics print: "transport", "shm", "hierarchical",
// "mpi", "nccl"; "" for Unknown or a value out of range.
constexpr const char* engine_kind_name(EngineKind kind) {
  switch (kind) {
    case EngineKind::Transport: return "transport";
    case EngineKind::SharedMemory: return "shm";
    case EngineKind::Hierarchical: return "hierarchical";
    case EngineKind::Mpi: return "mpi";
    case EngineKind::Nccl: return "nccl";
    case EngineKind::Unknown: break;
  }
  return "";
}

// The kind a name says (a backend's name for the engines it is); Unknown
// for any other name.
constexpr EngineKind engine_kind_of(std::string_view name) {
  for (uint8_t k = 1; k < kEngineKinds; ++k)
    if (name == engine_kind_name(static_cast<EngineKind>(k))) return static_cast<EngineKind>(k);
  return EngineKind::Unknown;
}

}  // namespace tdist
