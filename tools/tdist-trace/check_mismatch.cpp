// (a) The first collective on which the members disagree.
#include <algorithm>
#include <set>

#include "check_util.h"
#include "checks.h"
#include "text.h"

namespace ttrace {

namespace {

// Collectives whose every member passes inputs of the same shapes (all_to_all and scatter take
// per-rank sizes; their shapes are not compared).
bool same_input_shapes(const std::string& op) {
  static const std::set<std::string> ops = {"all_reduce", "allreduce_coalesced", "all_reduce_coalesced", "broadcast",
                                            "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                                            "reduce_scatter_tensor", "gather", "all_gather_coalesced"};
  return ops.count(op) != 0;
}

// ... and outputs of the same shapes.
bool same_output_shapes(const std::string& op) {
  static const std::set<std::string> ops = {"all_gather", "all_gather_into_tensor", "reduce_scatter",
                                            "reduce_scatter_tensor", "all_gather_coalesced"};
  return ops.count(op) != 0;
}

// What must agree, as one comparable string per field.
struct Call {
  std::string op, dtype, shapes, out_shapes, root, reduce_op;
  explicit Call(const Entry& e)
      : op(e.op),
        dtype(e.dtype),
        shapes(same_input_shapes(e.op) ? shapes_text(e.shapes) : ""),
        out_shapes(same_output_shapes(e.op) ? shapes_text(e.out_shapes) : ""),
        root(std::to_string(e.root)),
        reduce_op(e.reduce_op) {}
  std::string key() const {
    std::string k;
    for (const std::string* f : {&op, &dtype, &shapes, &out_shapes, &root, &reduce_op}) k += *f + '\x1f';
    return k;
  }
};

std::vector<std::string> differences(const Call& a, const Call& b) {
  std::vector<std::string> d;
  if (a.op != b.op) d.push_back("op");
  if (a.dtype != b.dtype) d.push_back("dtype");
  if (a.shapes != b.shapes) d.push_back("shapes");
  if (a.out_shapes != b.out_shapes) d.push_back("out_shapes");
  if (a.root != b.root) d.push_back("root");
  if (a.reduce_op != b.reduce_op) d.push_back("reduce_op");
  return d;
}

struct Side {
  std::string key;
  const Entry* entry;
  std::vector<int> ranks;
};

// The members that recorded seq, grouped by what they called; the largest group first.
std::vector<Side> sides_at(const GroupView& g, int64_t seq) {
  std::vector<Side> sides;
  for (const MemberView& m : g.dumped) {
    const Entry* e = m.at(seq);
    if (e == nullptr) continue;
    const std::string key = Call(*e).key();
    auto it = std::find_if(sides.begin(), sides.end(), [&](const Side& s) { return s.key == key; });
    if (it == sides.end()) sides.push_back({key, e, {m.rank}});
    else it->ranks.push_back(m.rank);
  }
  std::stable_sort(sides.begin(), sides.end(), [](const Side& a, const Side& b) { return a.ranks.size() > b.ranks.size(); });
  return sides;
}

}  // namespace

void check_mismatch(const GroupView& g, std::vector<Finding>& out) {
  std::set<int64_t> seqs;
  for (const MemberView& m : g.dumped)
    for (const auto& [seq, e] : m.collectives) seqs.insert(seq);

  Finding* first = nullptr;
  int64_t later = 0;
  for (int64_t seq : seqs) {
    const std::vector<Side> sides = sides_at(g, seq);
    if (sides.size() < 2) continue;
    if (first != nullptr) {
      ++later;
      continue;
    }
    const Call reference(*sides[0].entry);
    std::set<std::string> fields;
    for (size_t i = 1; i < sides.size(); ++i)
      for (const std::string& d : differences(reference, Call(*sides[i].entry))) fields.insert(d);
    std::vector<std::string> names(fields.begin(), fields.end());
    std::string differ;
    for (size_t i = 0; i < names.size(); ++i)
      differ += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];

    out.push_back(make_finding(FindingKind::kMismatch, Severity::kProblem, &g, seq,
                               "the members disagree on collective #" + std::to_string(seq) + ": they differ in " +
                                   differ + "."));
    first = &out.back();
    // The calls, the fewest ranks first (the odd ones out), labels aligned.
    size_t width = 0;
    for (const Side& side : sides) width = std::max(width, ranks_phrase(side.ranks).size());
    for (auto side = sides.rbegin(); side != sides.rend(); ++side) {
      std::string label = ranks_phrase(side->ranks) + ":";
      label.resize(width + 3, ' ');
      first->details.push_back(label + call_text(*side->entry));
    }
    first->details.push_back(
        "Every member must call the group's collectives in the same order with matching arguments; "
        "later failures or hangs usually follow from the first difference.");
    JsonValue& data = first->data;
    data.set("seq", JsonValue::integer(seq));
    JsonValue& differ_in = data.set("differ_in", JsonValue::array());
    for (const std::string& f : fields) differ_in.push(JsonValue::string(f));
    JsonValue& list = data.set("sides", JsonValue::array());
    for (const Side& s : sides) {
      JsonValue side = call_json(*s.entry);
      side.set("ranks", ranks_json(s.ranks));
      list.push(std::move(side));
    }
  }
  if (first != nullptr) {
    first->data.set("later_mismatches", JsonValue::integer(later));
    if (later > 0)
      first->details.insert(first->details.end() - 1,
                            std::to_string(later) + " later collective" + (later == 1 ? "" : "s") + " differ too.");
  }
}

}  // namespace ttrace
