// Starting ranks from one program, like torch.multiprocessing.spawn: forks
// nprocs processes that run fn(rank, nprocs) and waits for them.
#pragma once

#include <functional>
#include <string>

namespace tdist {

struct SpawnOptions {
  // Sets MASTER_ADDR/MASTER_PORT (a free port), RANK, WORLD_SIZE, LOCAL_RANK in
  // each child so that init_process_group() with env:// just works.
  bool set_env = true;
  std::string master_addr = "127.0.0.1";
};

// Returns when every child has exited 0. When one fails the others are
// terminated and DistError names the first failing rank and its exit code or signal.
void spawn(const std::function<void(int rank, int world_size)>& fn, int nprocs, SpawnOptions options = {});

}  // namespace tdist
