// The job token tdistrun hands its workers (TDIST_JOB_TOKEN), so that nobody
// outside the job can join it (see src/util/job_token.h for how it is used).
#pragma once

#include <string>

#include "options.h"

namespace tdistrun {

// A fresh token for a single-node job when the user set none
// (TDIST_JOB_TOKEN or TDIST_JOB_TOKEN_FILE pass through untouched); "" when
// the user set one, or when several nodes must share one that this node
// cannot invent (a warning is added to opt.warnings then).
std::string job_token_for_workers(Options& opt, const EnvLookup& env);

}  // namespace tdistrun
