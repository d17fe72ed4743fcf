// Starting ranks from one program, like torch.multiprocessing.spawn: forks
// nprocs processes that run fn(rank, nprocs) and waits for them.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tdist {

struct SpawnOptions {
  // Sets MASTER_ADDR/MASTER_PORT (a free port), RANK, WORLD_SIZE, LOCAL_RANK in
  // each child so that init_process_group() with env:// just works, and
  // removes launcher_variables() there: spawned from a worker of tdistrun or
  // torchrun, the children meet among themselves, not in the launcher's store.
  bool set_env = true;
  std::string master_addr = "127.0.0.1";
};

// What a launcher (tdistrun, torchrun) tells its workers about its own job
// and store, beyond MASTER_ADDR/PORT and the ranks: TORCHELASTIC_USE_AGENT_STORE
// (rank 0 would then join the launcher's store instead of serving one),
// TDIST_AGENT_STORE_PREFIX, TORCHELASTIC_RUN_ID, TORCHELASTIC_ERROR_FILE, ...
const std::vector<std::string>& launcher_variables();

// Returns when every child has exited 0. When one fails the others are
// terminated and DistError names the first failing rank and its exit code or signal.
void spawn(const std::function<void(int rank, int world_size)>& fn, int nprocs, SpawnOptions options = {});

}  // namespace tdist
