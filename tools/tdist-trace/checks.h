// The checks on one group; each appends its findings. See analysis.h for the kinds.
#pragma once

#include <vector>

#include "analysis.h"
#include "group_view.h"

namespace ttrace {

// (a) The first collective on which the members disagree (op, dtype, shapes, root, reduce_op).
void check_mismatch(const GroupView& g, std::vector<Finding>& out);

// (b) Members that never entered a collective others entered, and collectives members were
// still inside when they dumped.
void check_progress(const GroupView& g, std::vector<Finding>& out);

// (e) Failed operations with their errors.
void check_failures(const GroupView& g, std::vector<Finding>& out);

// (d) Which member entered last, over the completed collectives every member recorded.
void check_slowest(const GroupView& g, double slow_ms, GroupSummary& summary, std::vector<Finding>& out);

// Members without the group, with other member lists, or with the recorder off.
void check_membership(const GroupView& g, std::vector<Finding>& out);

}  // namespace ttrace
