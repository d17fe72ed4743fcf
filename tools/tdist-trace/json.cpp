#include "json.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ttrace {

JsonValue JsonValue::boolean(bool b) {
  JsonValue v;
  v.type_ = Type::kBool;
  v.b_ = b;
  return v;
}
JsonValue JsonValue::integer(int64_t i) {
  JsonValue v;
  v.type_ = Type::kInt;
  v.i_ = i;
  return v;
}
JsonValue JsonValue::number(double d) {
  JsonValue v;
  v.type_ = Type::kDouble;
  v.d_ = d;
  return v;
}
JsonValue JsonValue::string(std::string s) {
  JsonValue v;
  v.type_ = Type::kString;
  v.s_ = std::move(s);
  return v;
}
JsonValue JsonValue::array() {
  JsonValue v;
  v.type_ = Type::kArray;
  return v;
}
JsonValue JsonValue::object() {
  JsonValue v;
  v.type_ = Type::kObject;
  return v;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& m : members_)
    if (m.first == key) return &m.second;
  return nullptr;
}

JsonValue& JsonValue::push(JsonValue v) {
  items_.push_back(std::move(v));
  return items_.back();
}

JsonValue& JsonValue::set(std::string key, JsonValue v) {
  members_.emplace_back(std::move(key), std::move(v));
  return members_.back().second;
}

const char* JsonValue::type_name(Type t) {
  switch (t) {
    case Type::kNull: return "null";
    case Type::kBool: return "a boolean";
    case Type::kInt: return "an integer";
    case Type::kDouble: return "a fractional number";
    case Type::kString: return "a string";
    case Type::kArray: return "an array";
    case Type::kObject: return "an object";
  }
  return "?";
}

class JsonParser {
 public:
  JsonParser(std::string_view text, const JsonLimits& limits, int first_line)
      : text_(text), limits_(limits), line_(first_line) {}

  JsonValue parse_document() {
    if (text_.size() >= 3 && text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3, line_start_ = 3;
    skip_space();
    if (pos_ == text_.size()) fail("empty: no JSON value");
    JsonValue v = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected data after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw JsonError(line_, static_cast<int>(pos_ - line_start_) + 1, what);
  }
  [[noreturn]] void fail_eof(const char* inside, int opened_line) const {
    fail(std::string("the file ends inside ") + inside +
         (opened_line > 0 ? " that starts at line " + std::to_string(opened_line) : std::string()) +
         " (truncated?)");
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        line_start_ = ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  void count_value() {
    if (++values_ > limits_.max_values)
      fail("more than " + std::to_string(limits_.max_values) + " values in one document");
  }

  JsonValue parse_value(int depth) {
    count_value();
    if (pos_ >= text_.size()) fail("the file ends where a value was expected (truncated?)");
    const char c = text_[pos_];
    JsonValue v;
    v.line_ = line_;
    switch (c) {
      case '{': return parse_object(depth + 1, v);
      case '[': return parse_array(depth + 1, v);
      case '"':
        v.type_ = JsonValue::Type::kString;
        v.s_ = parse_string();
        return v;
      case 't': literal("true"); v.type_ = JsonValue::Type::kBool; v.b_ = true; return v;
      case 'f': literal("false"); v.type_ = JsonValue::Type::kBool; return v;
      case 'n': literal("null"); return v;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          parse_number(v);
          return v;
        }
        fail(std::string("unexpected ") + describe_char(c) + " where a value was expected");
    }
  }

  static std::string describe_char(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", u);
    return buf;
  }

  void literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) {
      if (text_.size() - pos_ < word.size() && word.substr(0, text_.size() - pos_) == text_.substr(pos_))
        fail("the file ends inside '" + std::string(word) + "' (truncated?)");
      fail("unexpected " + describe_char(text_[pos_]) + " where a value was expected");
    }
    pos_ += word.size();
  }

  void check_depth(int depth) const {
    if (depth > limits_.max_depth)
      fail("nested deeper than " + std::to_string(limits_.max_depth) + " arrays/objects");
  }

  JsonValue parse_object(int depth, JsonValue& v) {
    check_depth(depth);
    const int opened = line_;
    v.type_ = JsonValue::Type::kObject;
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return std::move(v);
    }
    for (;;) {
      skip_space();
      if (pos_ >= text_.size()) fail_eof("an object", opened);
      if (text_[pos_] != '"') fail("expected a member name in quotes, found " + describe_char(text_[pos_]));
      std::string key = parse_string();
      skip_space();
      if (pos_ >= text_.size()) fail_eof("an object", opened);
      if (text_[pos_] != ':') fail("expected ':' after the member name \"" + printable(key) + "\"");
      ++pos_;
      skip_space();
      if (pos_ >= text_.size()) fail_eof("an object", opened);
      JsonValue member = parse_value(depth);
      v.members_.emplace_back(std::move(key), std::move(member));
      skip_space();
      if (pos_ >= text_.size()) fail_eof("an object", opened);
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == '}') {
        ++pos_;
        return std::move(v);
      }
      fail("expected ',' or '}' in an object, found " + describe_char(text_[pos_]));
    }
  }

  JsonValue parse_array(int depth, JsonValue& v) {
    check_depth(depth);
    const int opened = line_;
    v.type_ = JsonValue::Type::kArray;
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return std::move(v);
    }
    for (;;) {
      skip_space();
      if (pos_ >= text_.size()) fail_eof("an array", opened);
      v.items_.push_back(parse_value(depth));
      skip_space();
      if (pos_ >= text_.size()) fail_eof("an array", opened);
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == ']') {
        ++pos_;
        return std::move(v);
      }
      fail("expected ',' or ']' in an array, found " + describe_char(text_[pos_]));
    }
  }

  // At most 40 printable characters of s, for messages.
  static std::string printable(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (out.size() >= 40) return out + "...";
      out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
    }
    return out;
  }

  unsigned hex4() {
    if (text_.size() - pos_ < 4) fail("the file ends inside a \\u escape (truncated?)");
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      u <<= 4;
      if (c >= '0' && c <= '9') u |= c - '0';
      else if (c >= 'a' && c <= 'f') u |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') u |= c - 'A' + 10;
      else fail("bad \\u escape: " + describe_char(c) + " is not a hex digit");
    }
    return u;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    const int opened = line_;
    ++pos_;  // the opening quote
    std::string out;
    for (;;) {
      if (pos_ >= text_.size()) fail_eof("a string", opened);
      if (out.size() > limits_.max_string_bytes)
        fail("a string longer than " + std::to_string(limits_.max_string_bytes) + " bytes");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20)
        fail(c == '\n' ? "a line break inside a string (unterminated string?)"
                       : "a control character (" + describe_char(c) + ") inside a string");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      if (++pos_ >= text_.size()) fail_eof("a string", opened);
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
            const size_t save = pos_;
            pos_ += 2;
            const unsigned lo = hex4();
            if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else pos_ = save;  // a lone high surrogate; the next escape stands alone
          }
          if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;  // lone surrogate
          append_utf8(out, cp);
          break;
        }
        default: fail("bad escape \\" + std::string(1, e) + " inside a string");
      }
    }
  }

  void parse_number(JsonValue& v) {
    const size_t start = pos_;
    bool integral = true;
    if (text_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      if (pos_ - start > limits_.max_number_chars)
        fail("a number longer than " + std::to_string(limits_.max_number_chars) + " characters");
      return pos_ - from;
    };
    const size_t int_start = pos_;
    if (digits() == 0) fail(pos_ >= text_.size() ? "the file ends inside a number (truncated?)" : "a '-' without digits");
    if (text_[int_start] == '0' && pos_ - int_start > 1) fail("a number with a leading zero");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (digits() == 0) fail("a number without digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) fail("a number without digits in its exponent");
    }
    const std::string_view lit = text_.substr(start, pos_ - start);
    if (integral) {
      int64_t i = 0;
      auto [p, ec] = std::from_chars(lit.data(), lit.data() + lit.size(), i);
      if (ec != std::errc() || p != lit.data() + lit.size()) {
        pos_ = start;  // point at the number
        fail("the number " + std::string(lit) + " is out of range (beyond 64-bit integers)");
      }
      v.type_ = JsonValue::Type::kInt;
      v.i_ = i;
      return;
    }
    const std::string copy(lit);
    errno = 0;
    char* end = nullptr;
    const double d = std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size() || !std::isfinite(d) || errno == ERANGE) {
      pos_ = start;
      fail("the number " + copy + " is out of range");
    }
    v.type_ = JsonValue::Type::kDouble;
    v.d_ = d;
  }

  std::string_view text_;
  const JsonLimits& limits_;
  size_t pos_ = 0;
  int line_;
  size_t line_start_ = 0;
  size_t values_ = 0;
};

JsonValue parse_json(std::string_view text, const JsonLimits& limits, int first_line) {
  JsonParser parser(text, limits, first_line);
  return parser.parse_document();
}

}  // namespace ttrace
