// A small streaming JSON writer for dumps and timeline lines: commas and
// escaping are its business, so the callers read as the format does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tdist/trace.h"

namespace tdist::trace {

class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(const std::string& text) { return value(std::string_view(text)); }
  JsonWriter& value(int64_t n);
  JsonWriter& value(uint64_t n);
  JsonWriter& value(int n) { return value(static_cast<int64_t>(n)); }
  JsonWriter& value(bool b);
  // An already written JSON value (a group's section).
  JsonWriter& raw(std::string_view json);
  std::string take() { return std::move(out_); }

 private:
  JsonWriter& open(char c);
  JsonWriter& close(char c);
  void separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

// One operation: a dump's entry, or (with_group) a timeline line.
void write_event(JsonWriter& w, const OpEvent& e, bool with_group);
void write_shapes(JsonWriter& w, const std::vector<std::vector<int64_t>>& shapes);

}  // namespace tdist::trace
