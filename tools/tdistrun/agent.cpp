#include "agent.h"

#include <cstdio>
#include <exception>

#include "log_files.h"
#include "rendezvous.h"
#include "signals.h"
#include "supervisor.h"
#include "util/shm_leftovers.h"

namespace tdistrun {
namespace {

void say(const std::string& line) {
  std::fputs(("tdistrun: " + line + "\n").c_str(), stderr);
  std::fflush(stderr);
}

std::string ranks_text(const Placement& p, int nproc) {
  const long long last = p.rank_offset + nproc - 1;
  return nproc == 1 ? "rank " + std::to_string(p.rank_offset)
                    : "ranks " + std::to_string(p.rank_offset) + ".." + std::to_string(last);
}

// Removes what workers killed inside their shared-memory set-up left in
// /dev/shm (only names whose creator is provably dead): when tdistrun starts,
// for jobs before it, and when it ends, for its own workers, which are all
// reaped by then.
class ShmLeftoverSweep {
 public:
  ShmLeftoverSweep() { sweep(); }
  ~ShmLeftoverSweep() { sweep(); }
  ShmLeftoverSweep(const ShmLeftoverSweep&) = delete;
  ShmLeftoverSweep& operator=(const ShmLeftoverSweep&) = delete;

 private:
  // Quietly, as the library's own sweep: the names are no one's any more.
  static void sweep() {
    try {
      tdist::remove_segments_of_dead_processes();
    } catch (const std::exception&) {
      // Nothing left behind is worth stopping a job for.
    }
  }
};

}  // namespace

int run_agent(const Options& opt, const std::string& program_path) {
  ShmLeftoverSweep shm_leftovers;
  LogLayout logs(opt);
  if (logs.kept()) say("worker logs and error files in " + logs.dir());
  AgentRendezvous rdzv(opt);
  const bool several_nodes = opt.rdzv.dynamic || opt.nnodes > 1;
  if (several_nodes) {
    say(std::string(rdzv.hosts_store() ? "hosting" : "joined") + " the rendezvous store on " + rdzv.host() + ":" +
        std::to_string(rdzv.port()) + " (job " + opt.rdzv_id + ")");
  }
  SignalEvents::install(opt.signals_to_handle);
  rdzv.set_interrupt_check([] {
    auto sigs = SignalEvents::take_termination_signals();
    return sigs.empty() ? 0 : sigs.front();
  });

  int attempt = 0;
  int code = 0;
  bool store_lost = false;
  while (true) {
    Placement p;
    if (rdzv.join(opt.nproc_per_node, &p) == AgentRendezvous::Joined::kJobFinished) {
      say("the job finished before this node could join it");
      break;
    }
    if (several_nodes || p.restart_count > 0) {
      say("round " + std::to_string(p.round) + ": node " + std::to_string(p.node_rank) + " of " +
          std::to_string(p.nnodes) + ", " + ranks_text(p, opt.nproc_per_node) + " of " + std::to_string(p.world_size) +
          (opt.max_restarts > 0 ? ", restart " + std::to_string(p.restart_count) + " of at most " +
                                      std::to_string(opt.max_restarts)
                                : std::string()));
    }
    WorkerPlacement where;
    where.node_rank = p.node_rank;
    where.nnodes = p.nnodes;
    where.rank_offset = p.rank_offset;
    where.world_size = p.world_size;
    where.restart_count = p.restart_count;
    where.master_addr = rdzv.host();
    where.master_port = rdzv.port();
    where.store_prefix = p.store_prefix;
    auto monitor = [&]() -> std::optional<std::string> {
      try {
        auto poll = rdzv.poll();
        if (poll.stop) return poll.reason;
      } catch (const RendezvousError& e) {
        store_lost = true;
        return std::string(e.what());
      }
      return std::nullopt;
    };
    Supervisor supervisor(opt, program_path, where, logs, attempt++, monitor);
    if (opt.on_failure != OnFailure::kRestart) {
      supervisor.set_failure_report([&rdzv](const WorkerEnd& end) {
        try {
          rdzv.report_exit(end.launch_id, exit_sentence(end));
        } catch (const RendezvousError& e) {
          say(std::string(e.what()) + ": the other workers were not told that rank " + std::to_string(end.rank) +
              " exited");
        }
      });
    }
    const AttemptResult r = supervisor.run();
    if (store_lost) {
      code = r.exit_code != 0 ? r.exit_code : 1;
      say("stopping: the rendezvous store is gone, so this node cannot rejoin the job");
      return code;
    }
    using Kind = AttemptResult::Kind;
    if (r.kind == Kind::kSucceeded) {
      rdzv.report_done();
      code = 0;
      break;
    }
    if (r.kind == Kind::kWorkerFailed && opt.on_failure != OnFailure::kRestart) {
      // Every worker of this node failed: tolerated all the same, so no node restarts; this one is done.
      rdzv.report_done();
      code = r.exit_code;
      if (several_nodes) {
        say("every worker of node " + std::to_string(p.node_rank) +
            " failed; the other nodes' workers run on (--on-failure shrink); exiting with status " +
            std::to_string(code));
      }
      break;
    }
    // Tell the other nodes; without the store this node can only end.
    try {
      if (r.kind == Kind::kSignaled) {
        rdzv.report_failure("node " + std::to_string(p.node_rank) + " was stopped by a signal");
        code = r.exit_code;
        break;
      }
      if (r.kind == Kind::kWorkerFailed || r.kind == Kind::kStartFailed) {
        rdzv.report_failure(r.kind == Kind::kWorkerFailed ? r.failure + " on node " + std::to_string(p.node_rank)
                                                          : "node " + std::to_string(p.node_rank) +
                                                                " could not start its workers");
      }
    } catch (const RendezvousError& e) {
      say(std::string(e.what()) + "; exiting with status " + std::to_string(r.exit_code));
      return r.exit_code;
    }
    const auto poll = rdzv.poll();
    if (poll.job_failed) {
      code = r.kind == Kind::kStopped ? 1 : r.exit_code;
      if (several_nodes || opt.max_restarts > 0) {
        say("the job failed: " + poll.reason +
            (opt.max_restarts > 0 ? "; no restarts left (--max-restarts " + std::to_string(opt.max_restarts) + ")"
                                  : std::string()) +
            "; exiting with status " + std::to_string(code));
      }
      break;
    }
    say("restarting the workers in a new round: " + poll.reason);
  }
  rdzv.leave();
  return code;
}

}  // namespace tdistrun
