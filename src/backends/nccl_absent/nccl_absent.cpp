// A build without CUDA has no nccl backend: asking for it says why (backend_registry.cpp).
#include "backends/nccl_availability.h"
#include "backends/backend_registry.h"

namespace tdist {

void register_nccl_backend() {}
bool nccl_library_loads() { return false; }
std::string nccl_library_version() { return ""; }

}  // namespace tdist
