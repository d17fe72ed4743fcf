#include "json_write.h"

#include <cmath>
#include <cstdio>

namespace ttrace {

namespace {

void newline(std::string& out, int indent) {
  out += '\n';
  out.append(static_cast<size_t>(indent) * 2, ' ');
}

}  // namespace

void append_json(std::string& out, const JsonValue& v, int indent) {
  const bool pretty = indent >= 0;
  switch (v.type()) {
    case JsonValue::Type::kNull: out += "null"; return;
    case JsonValue::Type::kBool: out += v.as_bool() ? "true" : "false"; return;
    case JsonValue::Type::kInt: out += std::to_string(v.as_int()); return;
    case JsonValue::Type::kDouble: {
      if (!std::isfinite(v.as_double())) {
        out += "null";
        return;
      }
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", v.as_double());
      out += buf;
      return;
    }
    case JsonValue::Type::kString: append_json_string(out, v.as_string()); return;
    case JsonValue::Type::kArray: {
      // Arrays of scalars stay on one line.
      bool scalars = true;
      for (const auto& item : v.items()) scalars = scalars && !item.is_array() && !item.is_object();
      out += '[';
      bool first = true;
      for (const auto& item : v.items()) {
        if (!first) out += scalars || !pretty ? (pretty ? ", " : ",") : ",";
        first = false;
        if (pretty && !scalars) newline(out, indent + 1);
        append_json(out, item, pretty ? indent + 1 : -1);
      }
      if (pretty && !scalars && !v.items().empty()) newline(out, indent);
      out += ']';
      return;
    }
    case JsonValue::Type::kObject: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.members()) {
        if (!first) out += ',';
        first = false;
        if (pretty) newline(out, indent + 1);
        append_json_string(out, key);
        out += pretty ? ": " : ":";
        append_json(out, value, pretty ? indent + 1 : -1);
      }
      if (pretty && !v.members().empty()) newline(out, indent);
      out += '}';
      return;
    }
  }
}

}  // namespace ttrace
