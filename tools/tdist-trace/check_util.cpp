#include "check_util.h"

#include <algorithm>

#include "text.h"

namespace ttrace {

Finding make_finding(FindingKind kind, Severity severity, const GroupView* g, int64_t seq, std::string message) {
  Finding f;
  f.kind = kind;
  f.severity = severity;
  f.seq = seq;
  if (g != nullptr) {
    f.group = g->name;
    f.group_order = g->order;
    message = printable(g->name, 80) + ": " + message;
  }
  f.message = std::move(message);
  return f;
}

JsonValue ranks_json(const std::vector<int>& ranks) {
  JsonValue a = JsonValue::array();
  for (int r : ranks) a.push(JsonValue::integer(r));
  return a;
}

JsonValue shapes_json(const std::vector<Shape>& shapes) {
  JsonValue a = JsonValue::array();
  for (const Shape& s : shapes) {
    JsonValue& dims = a.push(JsonValue::array());
    for (int64_t d : s) dims.push(JsonValue::integer(d));
  }
  return a;
}

JsonValue call_json(const Entry& e) {
  JsonValue o = JsonValue::object();
  o.set("op", JsonValue::string(e.op));
  o.set("dtype", JsonValue::string(e.dtype));
  o.set("shapes", shapes_json(e.shapes));
  o.set("out_shapes", shapes_json(e.out_shapes));
  o.set("root", JsonValue::integer(e.root));
  o.set("reduce_op", JsonValue::string(e.reduce_op));
  o.set("state", JsonValue::string(state_name(e.state)));
  return o;
}

std::string call_text(const Entry& e) {
  std::string s = printable(e.op, 60) + "(";
  std::string args;
  auto arg = [&](const std::string& a) { args += (args.empty() ? "" : ", ") + a; };
  if (!e.dtype.empty()) arg("dtype=" + printable(e.dtype, 40));
  if (!e.shapes.empty()) arg("shapes=" + shapes_text(e.shapes));
  if (!e.out_shapes.empty()) arg("out_shapes=" + shapes_text(e.out_shapes));
  if (e.root >= 0) arg("root=" + std::to_string(e.root));
  if (!e.reduce_op.empty()) arg("reduce_op=" + printable(e.reduce_op, 40));
  return s + args + ")";
}

int64_t median(std::vector<int64_t> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<long>(mid), values.end());
  return values[mid];
}

}  // namespace ttrace
