// What a process holds, read from /proc/self: its sockets, threads and
// resident memory. Used by tests that check a group opens no sockets or
// threads of its own, and by the benchmarks that report them
// (bench/mesh_footprint.cpp, bench/scale_probe.cpp, built with -I tests).
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

namespace tdist::process_counts {

// Entries of `dir` (links pointing at `link_prefix`..., or all when null).
inline int count_entries(const char* dir, const char* link_prefix) {
  int n = 0;
  DIR* d = opendir(dir);
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (!link_prefix) {
      ++n;
      continue;
    }
    char link[256] = {0};
    const std::string path = std::string(dir) + "/" + e->d_name;
    if (readlink(path.c_str(), link, sizeof(link) - 1) > 0 && std::strncmp(link, link_prefix, std::strlen(link_prefix)) == 0)
      ++n;
  }
  closedir(d);
  return n;
}

inline int sockets() { return count_entries("/proc/self/fd", "socket:"); }
inline int threads() { return count_entries("/proc/self/task", nullptr); }

inline long resident_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

}  // namespace tdist::process_counts
