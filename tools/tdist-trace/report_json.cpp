#include "json_write.h"
#include "report.h"

namespace ttrace {

namespace {

JsonValue ranks(const std::vector<int>& list) {
  JsonValue a = JsonValue::array();
  for (int r : list) a.push(JsonValue::integer(r));
  return a;
}

}  // namespace

std::string report_json(const Report& r) {
  JsonValue root = JsonValue::object();
  root.set("tool", JsonValue::string("tdist-trace"));
  root.set("format", JsonValue::integer(1));
  root.set("pattern", JsonValue::string(r.pattern));
  root.set("world_size", JsonValue::integer(r.world_size));
  root.set("dumped", ranks(r.dumped));
  root.set("problems", JsonValue::integer(static_cast<int64_t>(r.problems())));
  JsonValue& findings = root.set("findings", JsonValue::array());
  for (const Finding& f : r.findings) {
    JsonValue o = JsonValue::object();
    o.set("kind", JsonValue::string(finding_kind_name(f.kind)));
    o.set("severity", JsonValue::string(f.severity == Severity::kProblem ? "problem" : "note"));
    o.set("group", f.group.empty() ? JsonValue() : JsonValue::string(f.group));
    o.set("message", JsonValue::string(f.message));
    JsonValue& details = o.set("details", JsonValue::array());
    for (const std::string& d : f.details) details.push(JsonValue::string(d));
    for (const auto& [key, value] : f.data.members()) o.set(key, value);
    findings.push(std::move(o));
  }
  JsonValue& groups = root.set("groups", JsonValue::array());
  for (const GroupSummary& g : r.groups) {
    JsonValue o = JsonValue::object();
    o.set("name", JsonValue::string(g.name));
    o.set("members", ranks(g.members));
    o.set("dumped", ranks(g.dumped));
    o.set("last_seq", JsonValue::integer(g.last_seq));
    if (g.slowest) {
      JsonValue s = JsonValue::object();
      s.set("rank", JsonValue::integer(g.slowest->rank));
      s.set("last_count", JsonValue::integer(g.slowest->last_count));
      s.set("collectives", JsonValue::integer(g.slowest->collectives));
      s.set("first_seq", JsonValue::integer(g.slowest->first_seq));
      s.set("last_seq", JsonValue::integer(g.slowest->last_seq));
      s.set("median_behind_first_us", JsonValue::integer(g.slowest->median_behind_first_us));
      s.set("median_behind_next_us", JsonValue::integer(g.slowest->median_behind_next_us));
      s.set("problem", JsonValue::boolean(g.slowest->problem));
      o.set("slowest", std::move(s));
    } else {
      o.set("slowest", JsonValue());
    }
    groups.push(std::move(o));
  }
  JsonValue& reasons = root.set("dump_reasons", JsonValue::array());
  for (const DumpReason& d : r.reasons) {
    JsonValue& o = reasons.push(JsonValue::object());
    o.set("reason", JsonValue::string(d.reason));
    o.set("detail", JsonValue::string(d.detail));
    o.set("detail_rank", JsonValue::integer(d.detail_rank));
    o.set("same_detail", JsonValue::boolean(d.same_detail));
    o.set("ranks", ranks(d.ranks));
  }
  std::string out;
  append_json(out, root, 0);
  out += "\n";
  return out;
}

}  // namespace ttrace
