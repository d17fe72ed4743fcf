#include "util/settings.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "tdist/errors.h"

namespace tdist {

std::span<const SettingInfo> all_settings() { return kSettingTable; }

const SettingInfo* find_setting(std::string_view name) {
  for (const SettingInfo& s : kSettingTable)
    if (name == s.name) return &s;
  return nullptr;
}

namespace {

bool is_number(SettingType t) {
  return t == SettingType::Int || t == SettingType::Bytes || t == SettingType::Micros || t == SettingType::Millis ||
         t == SettingType::Seconds;
}

// An empty value is unset, except for a number, where it is a mistake to
// name, and for a list, where it is a list of nothing (no interface, no transport).
bool empty_means_unset(SettingType t) {
  return !is_number(t) && t != SettingType::FractionalSeconds && t != SettingType::List;
}

bool is_free_text(SettingType t) {
  return t == SettingType::Text || t == SettingType::Path || t == SettingType::PathPrefix || t == SettingType::List;
}

const char* unit_of(SettingType t) {
  switch (t) {
    case SettingType::Bytes: return " of bytes";
    case SettingType::Micros: return " of microseconds";
    case SettingType::Millis: return " of milliseconds";
    case SettingType::Seconds: return " of seconds";
    default: return "";
  }
}

// The parts of "A, B, C" or "A=B,C=D", blanks around each dropped, views
// into the (static) text.
template <typename Fn>
void for_each_part(std::string_view list, Fn&& fn) {
  while (true) {
    const size_t end = list.find(',');
    std::string_view part = list.substr(0, end);
    while (!part.empty() && (part.front() == ' ' || part.front() == '\t')) part.remove_prefix(1);
    while (!part.empty() && (part.back() == ' ' || part.back() == '\t')) part.remove_suffix(1);
    fn(part);
    if (end == std::string_view::npos) return;
    list.remove_prefix(end + 1);
  }
}

bool same_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// 2 GiB, 512 KiB, 4095.
std::string bytes_text(long long n) {
  for (auto [unit, name] : {std::pair{kGiB, " GiB"}, std::pair{kMiB, " MiB"}, std::pair{kKiB, " KiB"}})
    if (n != 0 && n % unit == 0) return std::to_string(n / unit) + name;
  return std::to_string(n);
}

std::string number_text(const SettingInfo& s, long long n) {
  return s.type == SettingType::Bytes ? bytes_text(n) : std::to_string(n);
}

// ", at least 1", ", from 4096 to 1073741824", or "".
std::string range_text(const SettingInfo& s, bool readable) {
  auto text = [&](long long n) { return readable ? number_text(s, n) : std::to_string(n); };
  const bool low = s.min != LLONG_MIN, high = s.max != LLONG_MAX;
  if (low && high) return ", from " + text(s.min) + " to " + text(s.max);
  if (low) return ", at least " + text(s.min);
  if (high) return ", at most " + text(s.max);
  return "";
}

std::string type_text(const SettingInfo& s) {
  switch (s.type) {
    case SettingType::Bool: return "bool";
    case SettingType::Int: return "int" + range_text(s, true);
    case SettingType::Bytes: return "bytes" + range_text(s, true);
    case SettingType::Micros: return "µs" + range_text(s, true);
    case SettingType::Millis: return "ms" + range_text(s, true);
    case SettingType::Seconds: return "s" + range_text(s, true);
    case SettingType::FractionalSeconds: return "seconds (fractions allowed)";
    case SettingType::Choice: return s.choices;
    case SettingType::Text: return "text";
    case SettingType::Path: return "path";
    case SettingType::PathPrefix: return "path prefix";
    case SettingType::List: return "list (comma-separated)";
  }
  return "?";
}

std::string default_text(const SettingInfo& s) {
  std::string out = s.default_text  ? std::string(s.default_text)
                    : s.default_number ? number_text(s, *s.default_number)
                                       : std::string("unset");
  return s.note ? out + " (" + s.note + ")" : out;
}

std::string accepted(const SettingInfo& s) {
  switch (s.type) {
    case SettingType::Bool: return "1 or 0 (or true/false, yes/no, on/off)";
    case SettingType::FractionalSeconds:
      return "a positive number of seconds (fractions allowed, e.g. 60 or 0.5), at least 0.001" +
             (s.max == LLONG_MAX ? std::string() : " and at most " + std::to_string(s.max));
    case SettingType::Choice: {
      std::string out = std::string("one of ") + s.choices;
      if (s.aliases) {
        const char* sep = " (or ";
        for_each_part(s.aliases, [&](std::string_view a) { out += std::exchange(sep, ", ") + std::string(a.substr(0, a.find('='))); });
        out += ")";
      }
      return out + ", in any case";
    }
    default:
      if (is_number(s.type)) return std::string("a whole number") + unit_of(s.type) + range_text(s, false);
      return "any text";
  }
}

[[noreturn]] void refuse(const SettingInfo& s, const char* read_as, const std::string& value) {
  const std::string name = read_as;
  const std::string why = name == s.name ? "" : " (read because " + std::string(s.name) + " is unset)";
  throw DistValueError("environment variable " + name + "='" + value + "'" + why + " is not valid: expected " +
                       accepted(s) + ". Fix or unset it (docs/configuration.md lists every setting)");
}

long long parse_number(const SettingInfo& s, const char* read_as, const std::string& value) {
  long long n = 0;
  const char* first = value.data() + (value.size() > 1 && value[0] == '+' ? 1 : 0);
  const char* last = value.data() + value.size();
  auto [end, ec] = std::from_chars(first, last, n);
  if (value.empty() || ec != std::errc() || end != last || n < s.min || n > s.max) refuse(s, read_as, value);
  return n;
}

std::chrono::milliseconds parse_fractional_seconds(const SettingInfo& s, const char* read_as,
                                                   const std::string& value) {
  // strtod would skip leading blanks, which no other number here takes.
  const bool blank = value.empty() || std::isspace(static_cast<unsigned char>(value[0]));
  char* end = nullptr;
  errno = 0;
  const double d = blank ? 0 : std::strtod(value.c_str(), &end);
  // At least a millisecond: a timeout that rounds to 0 would fail every wait at once.
  if (blank || errno != 0 || end != value.c_str() + value.size() || !std::isfinite(d) || d < 0.001 ||
      d > static_cast<double>(s.max))
    refuse(s, read_as, value);
  return std::chrono::milliseconds(std::llround(d * 1000.0));
}

bool parse_bool(const SettingInfo& s, const char* read_as, const std::string& value) {
  for (const char* yes : {"1", "true", "yes", "on"})
    if (same_ignoring_case(value, yes)) return true;
  for (const char* no : {"0", "false", "no", "off"})
    if (same_ignoring_case(value, no)) return false;
  refuse(s, read_as, value);
}

// The registry's spelling: a view into the table's own text.
std::string_view parse_choice(const SettingInfo& s, const char* read_as, const std::string& value) {
  std::string_view found;
  for_each_part(s.choices, [&](std::string_view c) {
    if (found.empty() && same_ignoring_case(value, c)) found = c;
  });
  if (found.empty() && s.aliases)
    for_each_part(s.aliases, [&](std::string_view a) {
      const size_t eq = a.find('=');
      if (found.empty() && same_ignoring_case(value, a.substr(0, eq))) found = a.substr(eq + 1);
    });
  if (found.empty()) refuse(s, read_as, value);
  return found;
}

// The variable's text and which name it was read from (ours, else torch's), or nullopt where neither is set.
struct Raw {
  const char* read_as;
  std::string value;
};

std::optional<Raw> raw(const SettingInfo& s) {
  const char* read_as = s.name;
  const char* v = std::getenv(read_as);
  if (v == nullptr && s.torch_name != nullptr) v = std::getenv(read_as = s.torch_name);
  if (v == nullptr) return std::nullopt;
  return Raw{read_as, v};
}

std::optional<Raw> raw_set(const SettingInfo& s) {
  auto r = raw(s);
  if (r && r->value.empty() && empty_means_unset(s.type)) return std::nullopt;
  return r;
}

}  // namespace

std::string settings_markdown() {
  std::string out, group;
  for (const SettingInfo& s : kSettingTable) {
    if (s.group != group) {
      group = s.group;
      out += (out.empty() ? "" : "\n") + std::string("### ") +
             (group == "launch" ? std::string("Set by the launcher") : "Read by `" + group + "`") + "\n\n";
      out += "| Variable | Type | Default | torch's name | Meaning |\n|---|---|---|---|---|\n";
    }
    out += "| `" + std::string(s.name) + "` | " + type_text(s) + " | " + default_text(s) + " | " +
           (s.torch_name ? "`" + std::string(s.torch_name) + "`" : std::string("")) + " | " + s.meaning + " |\n";
  }
  return out;
}

std::optional<std::string> parse_setting(const SettingInfo& s, const char* read_as, const std::string& value) {
  if (value.empty() && empty_means_unset(s.type)) return std::nullopt;
  if (is_free_text(s.type)) return value;
  if (s.type == SettingType::Bool) return parse_bool(s, read_as, value) ? "1" : "0";
  if (s.type == SettingType::Choice) return std::string(parse_choice(s, read_as, value));
  if (s.type == SettingType::FractionalSeconds) parse_fractional_seconds(s, read_as, value);
  else parse_number(s, read_as, value);
  return value;
}

namespace settings {

namespace detail {

std::optional<bool> read_bool(std::size_t index) {
  const SettingInfo& s = kSettingTable[index];
  auto r = raw_set(s);
  return r ? std::optional<bool>(parse_bool(s, r->read_as, r->value)) : std::nullopt;
}

std::optional<long long> read_number(std::size_t index) {
  const SettingInfo& s = kSettingTable[index];
  auto r = raw_set(s);
  return r ? std::optional<long long>(parse_number(s, r->read_as, r->value)) : std::nullopt;
}

std::optional<std::chrono::milliseconds> read_fractional_seconds(std::size_t index) {
  const SettingInfo& s = kSettingTable[index];
  auto r = raw_set(s);
  return r ? std::optional(parse_fractional_seconds(s, r->read_as, r->value)) : std::nullopt;
}

std::optional<std::string_view> read_choice(std::size_t index) {
  const SettingInfo& s = kSettingTable[index];
  auto r = raw_set(s);
  return r ? std::optional(parse_choice(s, r->read_as, r->value)) : std::nullopt;
}

std::optional<std::string> read_text(std::size_t index) {
  auto r = raw_set(kSettingTable[index]);
  return r ? std::optional(std::move(r->value)) : std::nullopt;
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  for_each_part(text, [&](std::string_view part) {
    if (!part.empty()) out.emplace_back(part);
  });
  return out;
}

std::optional<std::vector<std::string>> read_list(std::size_t index) {
  auto r = raw_set(kSettingTable[index]);
  return r ? std::optional(split_list(r->value)) : std::nullopt;
}

std::string text_of(std::size_t index) {
  const SettingInfo& s = kSettingTable[index];
  if (auto r = raw_set(s)) return parse_setting(s, r->read_as, r->value).value_or("");
  if (s.default_text) return s.default_text;
  return s.default_number ? std::to_string(*s.default_number) : "unset";
}

}  // namespace detail

Debug debug_level() {
  const std::string_view level = get<"TDIST_DEBUG">();
  return level == "DETAIL" ? Debug::Detail : level == "INFO" ? Debug::Info : Debug::Off;
}

}  // namespace settings

}  // namespace tdist
