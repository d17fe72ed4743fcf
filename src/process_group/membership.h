// What the calls that change a group's members share (shrink_group,
// admit_new_ranks, and a process that joins a running job): forming the new
// group all-or-nothing, and making it the default group.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tdist/distributed.h"
#include "util/deadline.h"

namespace tdist {

// "1,3": ranks in messages and in store keys.
std::string ranks_text(const std::vector<int>& ranks);

// Makes this rank's part of the new group under `keys` (rank `rank` of
// `size`), then settles with the other members whether the group formed. The
// outcome is fixed once in the store (compare_set), so every member gets the
// same: the group, or null and `why` ("abandoned: <reason>") on every member
// alike. A member proven dead by the launcher's record (exited/<launch rank>
// in options.death_records) abandons the attempt at once, a missing one at
// the deadline.
Group form_changed_group(const std::shared_ptr<Store>& keys, int rank, int size, const ProcessGroupOptions& options,
                         Deadline deadline, std::string& why);

// Makes `g` the default group of this process. As torch's shrink_group of the
// default group: every other group is destroyed (their ranks no longer mean
// anything), and groups made from now on get keys of their own under `keys`.
void install_default_group(const Group& g, const std::shared_ptr<Store>& keys);

}  // namespace tdist
