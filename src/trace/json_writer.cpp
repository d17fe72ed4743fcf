#include "trace/json_writer.h"

#include "util/json_text.h"

namespace tdist::trace {

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ", ";
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::open(char c) {
  separate();
  out_.push_back(c);
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::close(char c) {
  out_.push_back(c);
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  separate();
  append_json_string(out_, name);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view text) {
  separate();
  append_json_string(out_, text);
  return *this;
}

JsonWriter& JsonWriter::value(int64_t n) {
  separate();
  out_ += std::to_string(n);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t n) {
  separate();
  out_ += std::to_string(n);
  return *this;
}

JsonWriter& JsonWriter::value(bool b) {
  separate();
  out_ += b ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  separate();
  out_.append(json);
  return *this;
}

void write_shapes(JsonWriter& w, const std::vector<std::vector<int64_t>>& shapes) {
  w.begin_array();
  for (const auto& shape : shapes) {
    w.begin_array();
    for (int64_t d : shape) w.value(d);
    w.end_array();
  }
  w.end_array();
}

void write_event(JsonWriter& w, const OpEvent& e, bool with_group) {
  w.begin_object();
  if (with_group) w.key("group").value(e.group);
  w.key("seq").value(e.seq);
  w.key("op").value(e.op);
  w.key("p2p").value(e.p2p);
  w.key("dtype").value(e.dtype);
  w.key("shapes");
  write_shapes(w, e.shapes);
  w.key("out_shapes");
  write_shapes(w, e.out_shapes);
  w.key("bytes").value(e.bytes);
  w.key("root").value(e.root);
  w.key("peer").value(e.peer);
  w.key("reduce_op").value(e.reduce_op);
  w.key("engine").value(e.engine);
  w.key("algorithm").value(e.algorithm);
  w.key("state").value(e.state);
  w.key("queued_us").value(e.queued_us);
  w.key("started_us").value(e.started_us);
  w.key("ended_us").value(e.ended_us);
  if (e.time_resolution_us > 0) w.key("time_resolution_us").value(e.time_resolution_us);
  if (!e.error.empty()) w.key("error").value(e.error);
  w.end_object();
}

}  // namespace tdist::trace
