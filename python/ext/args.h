// Argument helpers shared by the operation bindings.
#pragma once

#include <optional>
#include <string>

#include <tdist/distributed.h>

#include "common.h"

namespace tdist_py {

// torch's src=/group_src= (dst=/group_dst=) pair as a tdist::PeerRank:
// exactly one of them, or neither when `any_ok` (any source).
tdist::PeerRank peer_rank(std::optional<int> global, std::optional<int> in_group, const std::string& op,
                          const char* global_name, const char* group_name, bool any_ok);

// A timeout argument: None (nullopt), datetime.timedelta, or seconds (int or float).
std::optional<std::chrono::milliseconds> to_timeout(py::handle obj, const char* what);

// The default group's timeout when none was given.
std::chrono::milliseconds timeout_or_default(const std::optional<std::chrono::milliseconds>& timeout);

}  // namespace tdist_py
