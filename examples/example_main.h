// The tutorial's set-up template in C++ (分布式设置模板): when started by
// tdistrun (RANK is set) a program initializes from the environment and runs;
// started alone it spawns `world_size` processes itself (default 2, or the
// first argument), each of which initializes and runs the same function.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include <tdist/tdist.h>

namespace example {

inline int run(int argc, char** argv, const std::function<void(int rank, int size)>& fn) {
  auto init_and_run = [&](int rank, int size) {
    tdist::init_process_group({.backend = "tdist"});  // env:// from tdistrun or spawn
    fn(rank, size);
    tdist::destroy_process_group();
  };
  try {
    if (std::getenv("RANK") != nullptr) {
      init_and_run(std::atoi(std::getenv("RANK")), std::atoi(std::getenv("WORLD_SIZE")));
    } else {
      int world_size = argc > 1 ? std::atoi(argv[1]) : 2;
      tdist::spawn(init_and_run, world_size);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
  return 0;
}

}  // namespace example
