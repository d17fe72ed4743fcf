#include "fields.h"

#include "text.h"

namespace ttrace {

const char* state_name(State s) {
  switch (s) {
    case State::kQueued: return "queued";
    case State::kStarted: return "started";
    case State::kCompleted: return "completed";
    case State::kFailed: return "failed";
  }
  return "?";
}

std::string file_line(const std::string& file, int line) {
  return line > 0 ? file + ":" + std::to_string(line) + ": " : file + ": ";
}

Fields::Fields(const JsonValue& object, const std::string& file, std::string where)
    : obj_(object), file_(file), where_(std::move(where)) {
  if (!obj_.is_object()) fail(std::string("must be an object, found ") + JsonValue::type_name(obj_.type()));
}

void Fields::fail(const std::string& what, const JsonValue* at) const {
  const int line = at != nullptr && at->line() > 0 ? at->line() : obj_.line();
  throw InputError(file_line(file_, line) + where_ + ": " + what);
}

const JsonValue* Fields::required(const char* key) const {
  const JsonValue* v = obj_.find(key);
  if (v == nullptr || v->is_null()) fail(std::string("'") + key + "' is missing");
  return v;
}

namespace {
std::string range_text(int64_t min, int64_t max) {
  return std::to_string(min) + " .. " + std::to_string(max);
}
}  // namespace

int64_t Fields::integer(const char* key, int64_t min, int64_t max) const {
  const JsonValue* v = required(key);
  if (!v->is_int())
    fail(std::string("'") + key + "' must be an integer, found " + JsonValue::type_name(v->type()), v);
  if (v->as_int() < min || v->as_int() > max)
    fail(std::string("'") + key + "' is " + std::to_string(v->as_int()) + ", outside " + range_text(min, max), v);
  return v->as_int();
}

int64_t Fields::integer_or(const char* key, int64_t fallback, int64_t min, int64_t max) const {
  return has(key) ? integer(key, min, max) : fallback;
}

std::string Fields::text(const char* key) const {
  const JsonValue* v = required(key);
  if (!v->is_string())
    fail(std::string("'") + key + "' must be a string, found " + JsonValue::type_name(v->type()), v);
  return v->as_string();
}

std::string Fields::text_or(const char* key, const std::string& fallback) const {
  return has(key) ? text(key) : fallback;
}

bool Fields::flag_or(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  const JsonValue* v = obj_.find(key);
  if (v->type() != JsonValue::Type::kBool)
    fail(std::string("'") + key + "' must be true or false, found " + JsonValue::type_name(v->type()), v);
  return v->as_bool();
}

const JsonValue& Fields::array(const char* key) const {
  const JsonValue* v = required(key);
  if (!v->is_array())
    fail(std::string("'") + key + "' must be an array, found " + JsonValue::type_name(v->type()), v);
  return *v;
}

std::vector<Shape> Fields::shapes_or_empty(const char* key) const {
  std::vector<Shape> shapes;
  if (!has(key)) return shapes;
  const JsonValue& list = array(key);
  shapes.reserve(list.items().size());
  for (const JsonValue& s : list.items()) {
    if (!s.is_array())
      fail(std::string("'") + key + "' must be a list of shapes (arrays of sizes), found " +
               JsonValue::type_name(s.type()) + " in it",
           &s);
    if (s.items().size() > kMaxShapeDims)
      fail(std::string("'") + key + "' has a shape of " + std::to_string(s.items().size()) +
               " dimensions (at most " + std::to_string(kMaxShapeDims) + ")",
           &s);
    Shape shape;
    for (const JsonValue& d : s.items()) {
      if (!d.is_int() || d.as_int() < 0 || d.as_int() > kMaxTime)
        fail(std::string("'") + key + "' has a size that is not an integer in " + range_text(0, kMaxTime), &d);
      shape.push_back(d.as_int());
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

void read_entry(const Fields& f, const JsonValue& object, Entry& e) {
  e.line = object.line();
  e.seq = f.integer("seq", 0, kMaxTime);
  e.op = f.text("op");
  if (e.op.empty()) f.fail("'op' is empty");
  e.p2p = f.flag_or("p2p", false);
  e.dtype = f.text_or("dtype", "");
  e.shapes = f.shapes_or_empty("shapes");
  e.out_shapes = f.shapes_or_empty("out_shapes");
  e.bytes = f.integer_or("bytes", 0, 0, kMaxTime);
  e.root = f.integer_or("root", -1, -1, kMaxRanks - 1);
  e.peer = f.integer_or("peer", -1, -1, kMaxRanks - 1);
  e.reduce_op = f.text_or("reduce_op", "");
  e.engine = f.text_or("engine", "");
  e.algorithm = f.text_or("algorithm", "");
  const std::string state = f.text("state");
  if (state == "queued") e.state = State::kQueued;
  else if (state == "started") e.state = State::kStarted;
  else if (state == "completed") e.state = State::kCompleted;
  else if (state == "failed") e.state = State::kFailed;
  else f.fail("'state' is \"" + printable(state, 40) + "\", not queued, started, completed or failed");
  e.queued_us = f.integer_or("queued_us", 0, 0, kMaxTime);
  e.started_us = f.integer_or("started_us", 0, 0, kMaxTime);
  e.ended_us = f.integer_or("ended_us", 0, 0, kMaxTime);
  e.time_resolution_us = f.integer_or("time_resolution_us", 0, 0, kMaxTime);
  e.error = f.text_or("error", "");
}

void read_step(const Fields& f, const JsonValue& object, Step& s) {
  s.line = object.line();
  s.where = f.text("step");
  if (s.where.empty()) f.fail("'step' is empty");
  s.group = f.text("group");
  if (s.group.empty()) f.fail("'group' is empty");
  s.seq = f.integer("seq", 0, kStepSeqModulus - 1);
  s.part = f.integer_or("part", 0, 0, kMaxTime);
  s.op = f.text_or("op", "");
  s.engine = f.text_or("engine", "");
  s.bytes = f.integer_or("bytes", 0, 0, kMaxTime);
  s.thread = f.integer_or("thread", 0, 0, kMaxTime);
  s.state = f.text_or("state", "");
  if (!s.state.empty() && s.state != "completed" && s.state != "failed")
    f.fail("'state' is \"" + printable(s.state, 40) + "\", not completed or failed");
  s.started_us = f.integer_or("started_us", 0, 0, kMaxTime);
  s.ended_us = f.integer_or("ended_us", 0, 0, kMaxTime);
  s.error = f.text_or("error", "");
}

}  // namespace ttrace
