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
};

// Looks a backend up ("gloo" is an alias of "tdist"); DistValueError listing
// the registered names when unknown.
BackendEntry lookup_backend(const std::string& name);
std::vector<std::string> registered_backends();

// Registers one built-in backend (see kBuiltinBackends in registry.cpp);
// each is defined in its backend's file.
void register_tdist_backend();

}  // namespace tdist
