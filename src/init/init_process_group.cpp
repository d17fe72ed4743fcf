#include <algorithm>

#include "tdist/distributed.h"
#include "tdist/errors.h"
#include "init/clock_offset.h"
#include "init/rendezvous.h"
#include "process_group/backend_spec.h"
#include "process_group/default_timeout.h"
#include "process_group/world.h"
#include "trace/recorder_registry.h"
#include "util/env.h"
#include "util/settings.h"

namespace tdist {

namespace {

// The options with their timeout resolved: the one given, else TDIST_TIMEOUT,
// else 30 minutes. Everything init waits for (the store, the other ranks)
// and the default group then count with it.
InitOptions with_resolved_timeout(const InitOptions& given) {
  InitOptions options = given;
  options.timeout = resolve_timeout(given.timeout);
  return options;
}

}  // namespace

void init_process_group(const InitOptions& given) {
  const InitOptions options = with_resolved_timeout(given);
  {
    std::lock_guard<std::mutex> lock(world().mu);
    if (world().default_group)
      throw DistError("init_process_group: the default process group is already initialized "
                      "(call destroy_process_group first)");
  }
  // A bad setting or an unknown backend is reported before anyone waits for anyone.
  check_environment();
  validate_backend_spec(options.backend);
  // A trace or dump folder that cannot be made is refused now, not found missing when it is needed.
  trace::prepare_process();
  // Not into the previous group's store, which rank 0 may not have closed yet.
  await_previous_store_close(options.timeout);
  Rendezvous r = rendezvous(options);
  const int64_t replacement = std::max<int64_t>(settings::get<"TDIST_JOIN_RUNNING_JOB">(),
                                                 options.join_running_job ? 1 : 0);
  if (replacement > 0) {
    // A replacement: no rendezvous with the others, who are running already.
    if (r.local_store) throw DistValueError("init_process_group(join_running_job): the " + options.backend +
                                            " backend has no store through which to join a running job");
    {
      std::lock_guard<std::mutex> lock(world().mu);
      world().store = r.store;
      world().owns_store = !options.store;
      world().mpi_hold = std::move(r.mpi_hold);
      ++world().generation;
    }
    // Known to the launcher's death records as its rank plus n world sizes
    // (tdistrun's launch id of the n-th replacement): not as the rank it replaces.
    const int launch_id = static_cast<int>(r.rank + replacement * std::max(r.world_size, 1));
    join_running_job(r.store, launch_id, options.timeout, options.device_id, r.store);
    return;
  }
  int generation;
  {
    std::lock_guard<std::mutex> lock(world().mu);
    generation = world().generation++;
  }
  // Every init of this process gets fresh keys, so a store reused across
  // init/destroy cycles never shows a rank the previous cycle's state.
  auto scoped = std::make_shared<PrefixStore>("tdist/init" + std::to_string(generation), r.store);
  if (!r.local_store) join_all_ranks(*scoped, "joined/", r.rank, r.world_size, options.timeout, r.where);

  ProcessGroupOptions pg;
  pg.backend = options.backend;
  pg.timeout = options.timeout;
  pg.device_id = options.device_id;
  pg.group_name = options.group_name.empty() ? "default_pg" : options.group_name;
  pg.group_desc = "default_pg";
  // A launcher that hosts the store (tdistrun --on-failure shrink) records
  // there the workers it reaped: the failure agreement's proof of death.
  if (!r.local_store) pg.death_records = r.store;
  trace::set_identity(r.rank, r.world_size);
  auto group = std::make_shared<ProcessGroup>(scoped, r.rank, r.world_size, pg);
  measure_clock_offset_if_traced(*scoped, r.rank, r.world_size, options.timeout);
  std::lock_guard<std::mutex> lock(world().mu);
  world().default_group = std::move(group);
  world().default_version.fetch_add(1, std::memory_order_release);
  world().pg_count = 1;
  world().store = r.store;
  world().owns_store = !options.store && !r.local_store;
  world().mpi_hold = std::move(r.mpi_hold);
  world().scoped_store = scoped;
}

void init_process_group(const char* backend, const std::string& init_method, int world_size, int rank,
                        std::chrono::milliseconds timeout) {
  InitOptions o;
  o.backend = backend;
  o.init_method = init_method;
  o.world_size = world_size;
  o.rank = rank;
  o.timeout = timeout;
  init_process_group(o);
}

bool is_torchelastic_launched() { return settings::get<"TORCHELASTIC_RUN_ID">().has_value(); }

}  // namespace tdist
