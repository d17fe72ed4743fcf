// (e) Failed operations with their errors: the first one in full, the later ones counted (after
// a failure the group fails every later call with the same cause).
#include <algorithm>
#include <map>

#include "check_util.h"
#include "checks.h"
#include "text.h"

namespace ttrace {

namespace {

struct FailedOp {
  const Entry* entry = nullptr;   // one member's record of it
  int64_t failed_at = INT64_MAX;  // earliest end (or entry) on rank 0's clock
  std::vector<std::pair<std::string, std::vector<int>>> errors;  // error text, ranks
  std::vector<int> ranks;
};

}  // namespace

void check_failures(const GroupView& g, std::vector<Finding>& out) {
  std::map<std::pair<bool, int64_t>, FailedOp> failed;  // (p2p, seq)
  for (const MemberView& m : g.dumped) {
    for (const Entry& e : m.record->entries) {
      if (e.state != State::kFailed) continue;
      FailedOp& f = failed[{e.p2p, e.seq}];
      if (f.entry == nullptr) f.entry = &e;
      const int64_t t = e.ended_us != 0 ? e.ended_us : e.entered_us();
      if (t != 0) f.failed_at = std::min(f.failed_at, m.aligned(t));
      f.ranks.push_back(m.rank);
      auto it = std::find_if(f.errors.begin(), f.errors.end(), [&](const auto& p) { return p.first == e.error; });
      if (it == f.errors.end()) f.errors.push_back({e.error, {m.rank}});
      else it->second.push_back(m.rank);
    }
  }
  if (failed.empty()) return;
  std::vector<FailedOp*> order;
  for (auto& [key, f] : failed) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(), [](const FailedOp* a, const FailedOp* b) {
    if (a->failed_at != b->failed_at) return a->failed_at < b->failed_at;
    return a->entry->seq < b->entry->seq;
  });

  const FailedOp& first = *order.front();
  auto error_text = [](const std::string& e) { return e.empty() ? std::string("(no error message)") : printable(e); };
  std::string message = op_label(*first.entry) + " failed on " + ranks_phrase(first.ranks);
  if (first.errors.size() == 1) message += ": " + error_text(first.errors.front().first);
  Finding f = make_finding(FindingKind::kFailed, Severity::kProblem, &g, first.entry->seq, message);
  if (first.errors.size() > 1) {
    const size_t shown = std::min<size_t>(first.errors.size(), 4);
    for (size_t i = 0; i < shown; ++i)
      f.details.push_back(ranks_phrase(first.errors[i].second) + ": " + error_text(first.errors[i].first));
    if (first.errors.size() > shown)
      f.details.push_back("... and " + std::to_string(first.errors.size() - shown) + " other errors (--json lists them).");
  }
  if (order.size() > 1) {
    std::string later;
    for (size_t i = 1; i < order.size() && i <= 5; ++i) later += (i > 1 ? ", " : "") + op_label(*order[i]->entry);
    if (order.size() > 6) later += ", ...";
    f.details.push_back(std::to_string(order.size() - 1) + " later operation" + (order.size() == 2 ? "" : "s") +
                        " failed too: " + later + ".");
  }
  JsonValue& list = f.data.set("failed", JsonValue::array());
  for (const FailedOp* op : order) {
    JsonValue o = JsonValue::object();
    o.set("seq", JsonValue::integer(op->entry->seq));
    o.set("op", JsonValue::string(op->entry->op));
    o.set("p2p", JsonValue::boolean(op->entry->p2p));
    o.set("ranks", ranks_json(op->ranks));
    JsonValue& errors = o.set("errors", JsonValue::array());
    for (const auto& [text, ranks] : op->errors) {
      JsonValue& e = errors.push(JsonValue::object());
      e.set("ranks", ranks_json(ranks));
      e.set("error", JsonValue::string(text));
    }
    list.push(std::move(o));
  }
  out.push_back(std::move(f));
}

}  // namespace ttrace
