// Whether this process maps a point-to-point ring segment of the shared-memory
// data path (src/transport/shm/): its name holds "tdist-p2p-" (the arena's
// segments are named otherwise).
#pragma once

#include <fstream>
#include <string>

namespace tdist::testing {

inline bool maps_shm_rings() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/tdist-p2p-") != std::string::npos) return true;
  return false;
}

}  // namespace tdist::testing
