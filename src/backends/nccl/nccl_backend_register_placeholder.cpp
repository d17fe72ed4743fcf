// A build without CUDA has no nccl backend: asking for it says why (registry.cpp).
#include "backends/registry.h"

namespace tdist {

void register_nccl_backend() {}

}  // namespace tdist
