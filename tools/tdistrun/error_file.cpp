#include "error_file.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>

namespace tdistrun {
namespace {

constexpr size_t kMaxErrorFile = 1 << 20;

// Just enough JSON for the error file: objects and strings are kept, other
// values are checked and skipped. A worker writes this file, so every step
// is bounded by the input and nesting depth.
class Reader {
 public:
  explicit Reader(const std::string& text) : s_(text) {}

  struct Value {
    std::string text;                    // a string's value
    std::map<std::string, Value> fields;  // an object's members
    bool is_object = false;
  };

  bool parse(Value* out) {
    if (!value(out, 0)) return false;
    space();
    return i_ == s_.size();
  }

 private:
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool eat(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  bool string(std::string* out) {
    if (!eat('"')) return false;
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          unsigned cp = 0;
          for (int k = 0; k < 4; ++k) {
            char h = s_[i_++];
            cp <<= 4;
            if (h >= '0' && h <= '9') cp |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') cp |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') cp |= static_cast<unsigned>(h - 'A' + 10);
            else return false;
          }
          put_utf8(*out, cp);  // a surrogate half shows as itself: the text is for reading
          break;
        }
        default: out->push_back(e); break;  // \" \\ \/
      }
    }
    return false;
  }
  bool value(Value* out, int depth) {
    if (depth > 16) return false;
    space();
    if (i_ >= s_.size()) return false;
    if (s_[i_] == '"') return string(&out->text);
    if (s_[i_] == '{') {
      ++i_;
      out->is_object = true;
      if (eat('}')) return true;
      do {
        std::string name;
        if (!string(&name) || !eat(':')) return false;
        Value v;
        if (!value(&v, depth + 1)) return false;
        out->fields[name] = std::move(v);
      } while (eat(','));
      return eat('}');
    }
    if (s_[i_] == '[') {
      ++i_;
      if (eat(']')) return true;
      do {
        Value ignored;
        if (!value(&ignored, depth + 1)) return false;
      } while (eat(','));
      return eat(']');
    }
    // A number, true, false or null: its characters, whatever they are, up to a delimiter.
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && s_[i_] != ' ' && s_[i_] != '\n') ++i_;
    out->text = s_.substr(start, i_ - start);
    return i_ > start;
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

std::optional<WorkerError> read_error_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text;
  text.resize(kMaxErrorFile + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxErrorFile) return std::nullopt;
  Reader::Value root;
  if (!Reader(text).parse(&root) || !root.is_object) return std::nullopt;
  auto top = root.fields.find("message");
  if (top == root.fields.end()) return std::nullopt;
  WorkerError e;
  if (!top->second.is_object) {
    e.message = top->second.text;  // {"message": "text"}
    return e;
  }
  const auto& m = top->second.fields;
  if (auto it = m.find("message"); it != m.end()) e.message = it->second.text;
  if (auto extra = m.find("extraInfo"); extra != m.end()) {
    if (auto cs = extra->second.fields.find("py_callstack"); cs != extra->second.fields.end()) e.traceback = cs->second.text;
  }
  return e;
}

}  // namespace tdistrun
