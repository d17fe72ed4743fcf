// Whether this process can use NCCL, for is_nccl_available() (the front):
// defined by src/backends/nccl (NCCL loaded at run time) and, in a build
// without CUDA, by src/backends/nccl_absent (never).
#pragma once

#include <string>

namespace tdist {

// True when the NCCL library loads here and has every symbol the nccl backend
// uses. A GPU is not needed: the library loads without one (as torch's
// dist.is_nccl_available() answers without one).
bool nccl_library_loads();
// "2.28.9", or "" when the library does not load.
std::string nccl_library_version();

}  // namespace tdist
