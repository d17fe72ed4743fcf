// The process-wide table of backends by name.
#pragma once

#include <string>
#include <vector>

#include "tdist/backend.h"

namespace tdist {

struct BackendEntry {
  std::string name;
  BackendFactory factory;
  std::vector<DeviceType> devices;
  // Its ranks are MPI_COMM_WORLD's: a group of only such backends needs no
  // store, and init takes rank and size from MPI (backends/mpi_launch.h).
  bool world_from_mpi = false;
};

// register_backend with every field of the entry (built-ins).
void register_backend_entry(BackendEntry entry);

// Looks a backend up ("gloo" is an alias of "tdist"); DistValueError listing
// the registered names when unknown.
BackendEntry lookup_backend(const std::string& name);
std::vector<std::string> registered_backends();

// Registers one built-in backend (see kBuiltinBackends in backend_registry.cpp);
// each is defined in its backend's file.
void register_tdist_backend();
void register_mpi_backend();   // nothing in a build without MPI
void register_nccl_backend();  // nothing in a build without CUDA

}  // namespace tdist
