// Helpers the checks share: a finding started for a group, and JSON for ranks, shapes, entries.
#pragma once

#include <string>
#include <vector>

#include "analysis.h"
#include "group_view.h"

namespace ttrace {

Finding make_finding(FindingKind kind, Severity severity, const GroupView* g, int64_t seq, std::string message);

JsonValue ranks_json(const std::vector<int>& ranks);
JsonValue shapes_json(const std::vector<Shape>& shapes);
// The fields of an entry that identify the call (op, dtype, shapes, root, reduce_op, ...).
JsonValue call_json(const Entry& e);

// "all_reduce(dtype=float32, shapes=[4096], reduce_op=sum)"
std::string call_text(const Entry& e);

int64_t median(std::vector<int64_t> values);

}  // namespace ttrace
