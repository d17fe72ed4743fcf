// A small, bounded JSON reader (RFC 8259) for files other processes wrote and may have left
// truncated or that someone made hostile: every depth, length and count has a limit, numbers
// must fit an int64 or a finite double, and an error says where (line and column) and what.
// The values also serve to build the tool's own --json output (see json_write.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ttrace {

struct JsonLimits {
  int max_depth = 64;                        // nested arrays/objects
  size_t max_string_bytes = 1 << 20;         // one string, after unescaping
  size_t max_values = 2u << 20;              // values in one document (~80,000 entries)
  size_t max_number_chars = 40;              // one number's literal
};

class JsonValue {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;
  static JsonValue boolean(bool b);
  static JsonValue integer(int64_t i);
  static JsonValue number(double d);
  static JsonValue string(std::string s);
  static JsonValue array();
  static JsonValue object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }
  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return type_ == Type::kInt ? static_cast<double>(i_) : d_; }
  const std::string& as_string() const { return s_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<Member>& members() const { return members_; }
  // The first member named key, or nullptr.
  const JsonValue* find(std::string_view key) const;
  int line() const { return line_; }  // where the value starts in its document (1-based; 0: built)

  // Building (for output).
  JsonValue& push(JsonValue v);                         // arrays
  JsonValue& set(std::string key, JsonValue v);         // objects: appends (keys kept in order)

  // "string", "integer", "object" ... for error messages.
  static const char* type_name(Type t);

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  int line_ = 0;
  std::string s_;
  std::vector<JsonValue> items_;
  std::vector<Member> members_;
};

// A parse error at line:column (1-based) of the document.
class JsonError : public std::runtime_error {
 public:
  JsonError(int line, int column, const std::string& what)
      : std::runtime_error(what), line_(line), column_(column) {}
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  int line_;
  int column_;
};

// Parses one JSON document (a UTF-8 byte order mark is skipped; anything but white space after
// the value is an error). first_line numbers the document's first line (for JSON Lines).
JsonValue parse_json(std::string_view text, const JsonLimits& limits = {}, int first_line = 1);

}  // namespace ttrace
