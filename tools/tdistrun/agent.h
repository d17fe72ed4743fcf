// The node's agent, torchrun's: rendezvous with the other nodes, run this
// node's workers, and on a failure anywhere restart them all in a new round
// (up to --max-restarts), or stop the job.
#pragma once

#include <string>

#include "options.h"

namespace tdistrun {

// Runs the job on this node; returns tdistrun's exit status. SignalEvents
// must not be installed yet (the agent installs them once the store is up).
int run_agent(const Options& opt, const std::string& program_path);

}  // namespace tdistrun
