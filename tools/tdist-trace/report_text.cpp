#include <algorithm>

#include "report.h"
#include "text.h"

namespace ttrace {

namespace {

constexpr size_t kMaxShown = 10;  // findings of one severity shown in full

void header(const Report& r, std::string& out) {
  out += "tdist-trace: " + std::to_string(r.dumped.size()) + (r.dumped.size() == 1 ? " dump" : " dumps");
  if (r.world_size > 0) out += " of " + std::to_string(r.world_size) + " ranks";
  out += " (" + printable(r.pattern, 200) + ")";
  if (!r.groups.empty()) {
    out += r.groups.size() == 1 ? "; group " : "; groups ";
    for (size_t i = 0; i < r.groups.size(); ++i) {
      if (i == 4) {
        out += ", ... (" + std::to_string(r.groups.size()) + " in all)";
        break;
      }
      out += (i > 0 ? ", " : "") + printable(r.groups[i].name, 60) + " (" + std::to_string(r.groups[i].members.size()) +
             " ranks, collectives up to #" + std::to_string(r.groups[i].last_seq) + ")";
    }
  }
  out += "\n";
  for (size_t i = 0; i < r.reasons.size() && i < 4; ++i) {
    const DumpReason& d = r.reasons[i];
    out += "Dumped on " + (d.reason.empty() ? std::string("(no reason)") : printable(d.reason, 40)) + " by " +
           ranks_phrase(d.ranks);
    if (d.detail.empty()) out += ".\n";
    else if (d.same_detail) out += ": " + printable(d.detail, 200) + "\n";
    else out += "; rank " + std::to_string(d.detail_rank) + "'s: " + printable(d.detail, 200) + "\n";
  }
  if (r.reasons.size() > 4) out += "... and " + std::to_string(r.reasons.size() - 4) + " other reasons.\n";
}

void findings(const Report& r, Severity severity, std::string& out) {
  std::vector<const Finding*> list;
  for (const Finding& f : r.findings)
    if (f.severity == severity) list.push_back(&f);
  if (list.empty()) return;
  if (severity == Severity::kProblem)
    out += "\n" + std::to_string(list.size()) + (list.size() == 1 ? " problem:\n" : " problems, most important first:\n");
  else
    out += "\nNotes:\n";
  for (size_t i = 0; i < list.size() && i < kMaxShown; ++i) {
    const std::string mark = severity == Severity::kProblem ? std::to_string(i + 1) + ". " : "- ";
    out += mark + list[i]->message + "\n";
    const std::string indent(mark.size(), ' ');
    for (const std::string& d : list[i]->details) out += indent + d + "\n";
  }
  if (list.size() > kMaxShown) out += "... and " + std::to_string(list.size() - kMaxShown) + " more (--json lists all).\n";
}

void slowest(const Report& r, std::string& out) {
  std::string lines;
  for (const GroupSummary& g : r.groups) {
    if (!g.slowest || g.slowest->problem) continue;  // a problem is told above
    const SlowestRank& s = *g.slowest;
    lines += "  " + printable(g.name, 60) + ": rank " + std::to_string(s.rank) + ", last in " +
             std::to_string(s.last_count) + " of " + std::to_string(s.collectives) + " completed collectives, median " +
             duration_text(s.median_behind_first_us) + " after the first rank\n";
  }
  if (!lines.empty()) out += "\nSlowest rank per group (entered last most often):\n" + lines;
}

}  // namespace

std::string report_text(const Report& r) {
  std::string out;
  header(r, out);
  findings(r, Severity::kProblem, out);
  if (r.problems() == 0) out += "\nNo problem found.\n";
  findings(r, Severity::kNote, out);
  slowest(r, out);
  return out;
}

}  // namespace ttrace
