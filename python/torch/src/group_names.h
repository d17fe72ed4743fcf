// The names the plugin gives its groups: the ones tdist's C++ API gives the
// same groups, so that errors read alike whichever API made a group.
#pragma once

#include <string>
#include <vector>

namespace tdist_torch {

// "default_pg" for torch's default group (made without a member list; a new
// one starts the counts again), else "group(0,2)#k" for the k-th group of
// those members (global ranks, in any order). torch's own names are a count
// ("0", "1", ...) or a hash, which say nothing of who is in the group.
std::string group_name_for(const std::vector<int>& global_ranks);

}  // namespace tdist_torch
