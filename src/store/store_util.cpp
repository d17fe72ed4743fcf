#include "store/store_util.h"

#include <charconv>
#include <cstdio>

namespace tdist::store_detail {

std::string quote(const std::string& key) {
  constexpr size_t kMaxShown = 200;
  std::string out = "'";
  size_t n = std::min(key.size(), kMaxShown);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  out += "'";
  if (key.size() > kMaxShown) out += "... (" + std::to_string(key.size()) + " bytes)";
  return out;
}

std::string quote_list(const std::vector<std::string>& keys) {
  constexpr size_t kMaxShown = 8;
  std::string out = "[";
  for (size_t i = 0; i < keys.size() && i < kMaxShown; ++i) {
    if (i) out += ", ";
    out += quote(keys[i]);
  }
  if (keys.size() > kMaxShown) out += ", ... (" + std::to_string(keys.size() - kMaxShown) + " more)";
  return out + "]";
}

Deadline deadline_after(Millis timeout) {
  if (timeout >= kForever) return Deadline::never();
  return Deadline::after(std::max(timeout, Millis(0)));
}

Clock::time_point time_after(Millis timeout) {
  if (timeout >= kForever) return Clock::time_point::max();
  return Clock::now() + std::max(timeout, Millis(0));
}

std::string counter_text(int64_t v) { return std::to_string(v); }

std::optional<int64_t> parse_counter(const std::string& text) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

}  // namespace tdist::store_detail
