// Typed access to the members of one JSON object of an input file, with errors that name the
// file, the line and the place ("FILE:LINE: groups[0].entries[3]: 'seq' must be an integer").
#pragma once

#include <cstdint>
#include <string>

#include "json.h"
#include "records.h"

namespace ttrace {

class Fields {
 public:
  // where: the object's place in the document ("the header", "groups[1]"), for messages.
  Fields(const JsonValue& object, const std::string& file, std::string where);

  bool has(const char* key) const { return obj_.find(key) != nullptr && !obj_.find(key)->is_null(); }
  int64_t integer(const char* key, int64_t min, int64_t max) const;  // required
  int64_t integer_or(const char* key, int64_t fallback, int64_t min, int64_t max) const;
  std::string text(const char* key) const;  // required
  std::string text_or(const char* key, const std::string& fallback) const;
  bool flag_or(const char* key, bool fallback) const;
  const JsonValue& array(const char* key) const;  // required
  std::vector<Shape> shapes_or_empty(const char* key) const;

  [[noreturn]] void fail(const std::string& what, const JsonValue* at = nullptr) const;
  std::string place(const std::string& sub) const { return where_ + sub; }

 private:
  const JsonValue* required(const char* key) const;

  const JsonValue& obj_;
  const std::string& file_;
  std::string where_;
};

// The members of an entry (a flight recorder entry, or a timeline line) into e.
void read_entry(const Fields& f, const JsonValue& object, Entry& e);
// The members of a timeline file's step line into s.
void read_step(const Fields& f, const JsonValue& object, Step& s);

// "FILE:LINE: " (LINE left out when 0).
std::string file_line(const std::string& file, int line);

}  // namespace ttrace
