// A build without CUDA has no nccl backend: asking for it says why (registry.cpp).
#include "backends/nccl_availability.h"
#include "backends/registry.h"

namespace tdist {

void register_nccl_backend() {}
bool nccl_library_loads() { return false; }
std::string nccl_library_version() { return ""; }

}  // namespace tdist
