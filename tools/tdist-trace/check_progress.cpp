// (b) Members that never entered a collective others entered; collectives members were still
// inside when they dumped.
#include <algorithm>
#include <map>

#include "check_util.h"
#include "checks.h"
#include "text.h"

namespace ttrace {

namespace {

bool pending(const Entry& e) { return e.state == State::kQueued || e.state == State::kStarted; }

// How long m had been in e when it dumped (0 when unknown).
int64_t time_inside(const MemberView& m, const Entry& e) {
  const int64_t since = e.entered_us();
  if (m.dump->dump_time_us == 0 || since == 0 || m.dump->dump_time_us < since) return 0;
  return m.dump->dump_time_us - since;
}

bool dumped_on_error(const MemberView& m) {
  return m.dump->reason == "timeout" || m.dump->reason == "failure";
}

struct InsideSummary {
  std::vector<int> waiting, failed, completed;
  int64_t longest_wait_us = 0;
};

InsideSummary inside(const std::vector<const MemberView*>& members, int64_t seq) {
  InsideSummary s;
  for (const MemberView* m : members) {
    const Entry* e = m->at(seq);
    if (e == nullptr) continue;
    if (pending(*e)) {
      s.waiting.push_back(m->rank);
      s.longest_wait_us = std::max(s.longest_wait_us, time_inside(*m, *e));
    } else if (e->state == State::kFailed) {
      s.failed.push_back(m->rank);
    } else {
      s.completed.push_back(m->rank);
    }
  }
  return s;
}

std::string waiting_text(const InsideSummary& s) {
  std::string t = capitalized(ranks_phrase(s.waiting)) + (s.waiting.size() == 1 ? " was" : " were") + " still inside it";
  if (s.longest_wait_us > 0) t += ", for up to " + duration_text(s.longest_wait_us) + ",";
  return t + (s.waiting.size() == 1 ? " when it dumped." : " when they dumped.");
}

void never_entered(const GroupView& g, int64_t last, const std::vector<const MemberView*>& laggers,
                   std::vector<Finding>& out) {
  const int64_t missed = last + 1;
  std::vector<const MemberView*> entered;
  const Entry* op = nullptr;
  int64_t first_entry_aligned = INT64_MAX;
  for (const MemberView& m : g.dumped) {
    if (m.last_seq < missed) continue;
    entered.push_back(&m);
    if (const Entry* e = m.at(missed)) {
      if (op == nullptr) op = e;
      if (e->queued_us != 0 || e->started_us != 0)
        first_entry_aligned = std::min(first_entry_aligned, m.aligned(e->queued_us != 0 ? e->queued_us : e->started_us));
    }
  }
  std::vector<int> entered_ranks;
  for (const MemberView* m : entered) entered_ranks.push_back(m->rank);
  const std::string label = op != nullptr ? printable(op->op, 60) + " #" + std::to_string(missed)
                                          : "collective #" + std::to_string(missed);

  // A rank whose dump is older than the first entry into the collective cannot tell.
  std::vector<int> never, early;
  int64_t early_by = 0;
  for (const MemberView* m : laggers) {
    const int64_t dumped_at = m->aligned(m->dump->dump_time_us);
    if (m->dump->dump_time_us != 0 && first_entry_aligned != INT64_MAX && dumped_at < first_entry_aligned) {
      early.push_back(m->rank);
      early_by = std::max(early_by, first_entry_aligned - dumped_at);
    } else {
      never.push_back(m->rank);
    }
  }

  const Entry* last_entry = laggers.front()->at(last);
  if (!never.empty()) {
    Finding f = make_finding(FindingKind::kNeverEntered, Severity::kProblem, &g, missed,
                             ranks_phrase(never) + " never entered " + label + ", which " +
                                 ranks_phrase(entered_ranks) + (entered_ranks.size() == 1 ? " has" : " have") +
                                 " entered.");
    if (last == 0)
      f.details.push_back(std::string(never.size() == 1 ? "It" : "They") + " entered no collective of the group.");
    else if (last_entry != nullptr)
      f.details.push_back(std::string(never.size() == 1 ? "Its" : "Their") + " last collective was " +
                          op_label(*last_entry) + " (" + state_name(last_entry->state) + ").");
    const InsideSummary s = inside(entered, missed);
    if (!s.waiting.empty()) f.details.push_back(waiting_text(s));
    if (!s.failed.empty()) f.details.push_back("It failed on " + ranks_phrase(s.failed) + ".");
    if (!s.completed.empty())
      f.details.push_back("It completed on " + ranks_phrase(s.completed) + ", so the dumps were not taken at the same time.");
    f.data.set("seq", JsonValue::integer(missed));
    f.data.set("op", op != nullptr ? JsonValue::string(op->op) : JsonValue());
    f.data.set("ranks", ranks_json(never));
    f.data.set("entered", ranks_json(entered_ranks));
    f.data.set("waiting", ranks_json(s.waiting));
    f.data.set("longest_wait_us", JsonValue::integer(s.longest_wait_us));
    f.data.set("last_seq", JsonValue::integer(last));
    out.push_back(std::move(f));
  }
  if (!early.empty()) {
    // Whether it matters: the others were stuck inside the collective when they dumped on an error.
    const InsideSummary s = inside(entered, missed);
    bool stuck = false;
    for (const MemberView* m : entered) stuck = stuck || (dumped_on_error(*m) && m->at(missed) && pending(*m->at(missed)));
    const bool one = early.size() == 1;
    Finding f = make_finding(FindingKind::kNeverEntered, stuck ? Severity::kProblem : Severity::kNote, &g, missed,
                             ranks_phrase(early) + " dumped before the others entered " + label + " (up to " +
                                 duration_text(early_by) + " before), so " + (one ? "its dump" : "their dumps") +
                                 " cannot tell whether " + (one ? "it" : "they") + " entered it.");
    if (!s.waiting.empty()) f.details.push_back(waiting_text(s));
    f.data.set("seq", JsonValue::integer(missed));
    f.data.set("op", op != nullptr ? JsonValue::string(op->op) : JsonValue());
    f.data.set("ranks", ranks_json(early));
    f.data.set("entered", ranks_json(entered_ranks));
    f.data.set("waiting", ranks_json(s.waiting));
    f.data.set("dumped_early", JsonValue::boolean(true));
    out.push_back(std::move(f));
  }
}

}  // namespace

void check_progress(const GroupView& g, std::vector<Finding>& out) {
  if (g.dumped.empty()) return;
  int64_t top = 0;
  for (const MemberView& m : g.dumped) top = std::max(top, m.last_seq);
  if (top == 0) return;

  std::map<int64_t, std::vector<const MemberView*>> by_last;
  for (const MemberView& m : g.dumped)
    if (m.last_seq < top) by_last[m.last_seq].push_back(&m);
  for (const auto& [last, laggers] : by_last) never_entered(g, last, laggers, out);
  if (!by_last.empty()) return;  // the collective at the top is explained by who did not enter it

  // Every member that dumped entered the last collective: was it still running?
  std::vector<const MemberView*> all;
  bool on_error = false;
  for (const MemberView& m : g.dumped) {
    all.push_back(&m);
    on_error = on_error || dumped_on_error(m);
  }
  const InsideSummary s = inside(all, top);
  if (s.waiting.empty()) return;
  // The collective's name, unless the members disagree on it (the mismatch check tells that).
  const Entry* e = g.dumped.front().at(top);
  for (const MemberView& m : g.dumped)
    if (e != nullptr && m.at(top) != nullptr && m.at(top)->op != e->op) e = nullptr;
  const std::string label = e != nullptr ? op_label(*e) : "collective #" + std::to_string(top);
  Finding f;
  if (!g.missing.empty()) {
    f = make_finding(FindingKind::kWaiting, Severity::kProblem, &g, top,
                     ranks_phrase(s.waiting) + (s.waiting.size() == 1 ? " was inside " : " were inside ") + label +
                         (s.waiting.size() == 1 ? " when it dumped; " : " when they dumped; ") + ranks_phrase(g.missing) + ", whose dump is missing, may never have entered it.");
  } else {
    f = make_finding(FindingKind::kWaiting, on_error ? Severity::kProblem : Severity::kNote, &g, top,
                     "every member entered " + label + ", and " + ranks_phrase(s.waiting) +
                         (s.waiting.size() == 1 ? " was still inside it when it dumped." : " were still inside it when they dumped."));
  }
  if (s.longest_wait_us > 0) f.details.push_back("The longest had been inside it for " + duration_text(s.longest_wait_us) + ".");
  if (!s.completed.empty()) f.details.push_back("It completed on " + ranks_phrase(s.completed) + ".");
  f.data.set("seq", JsonValue::integer(top));
  f.data.set("op", e != nullptr ? JsonValue::string(e->op) : JsonValue());
  f.data.set("waiting", ranks_json(s.waiting));
  f.data.set("missing", ranks_json(g.missing));
  f.data.set("longest_wait_us", JsonValue::integer(s.longest_wait_us));
  out.push_back(std::move(f));
}

}  // namespace ttrace
