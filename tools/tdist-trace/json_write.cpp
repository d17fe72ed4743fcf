#include "json_write.h"

#include <cmath>
#include <cstdio>

namespace ttrace {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t utf8_length(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  size_t n;
  unsigned min;
  unsigned cp;
  if ((b0 & 0xE0) == 0xC0) n = 2, min = 0x80, cp = b0 & 0x1F;
  else if ((b0 & 0xF0) == 0xE0) n = 3, min = 0x800, cp = b0 & 0x0F;
  else if ((b0 & 0xF8) == 0xF0) n = 4, min = 0x10000, cp = b0 & 0x07;
  else return 0;
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0;
  return n;
}

void newline(std::string& out, int indent) {
  out += '\n';
  out.append(static_cast<size_t>(indent) * 2, ' ');
}

}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      const size_t n = utf8_length(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

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
