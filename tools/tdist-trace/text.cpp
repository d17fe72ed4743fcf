#include "text.h"

#include <algorithm>
#include <cstdio>

#include "json_write.h"

namespace ttrace {

std::string printable(std::string_view s, size_t max_bytes) {
  std::string out = valid_utf8(s);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (out.size() > max_bytes) {
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // whole characters
    out.resize(cut);
    out += "...";
  }
  return out;
}

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    if (j - i >= 2) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
    } else {
      for (size_t k = i; k <= j; ++k) out += (k > i ? "," : "") + std::to_string(ranks[k]);
    }
    i = j + 1;
  }
  return out;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

std::string capitalized(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

std::string duration_text(int64_t us) {
  char buf[48];
  const double a = static_cast<double>(us < 0 ? -us : us);
  const char* sign = us < 0 ? "-" : "";
  if (a < 1000) std::snprintf(buf, sizeof buf, "%s%.0f us", sign, a);
  else if (a < 1e6) std::snprintf(buf, sizeof buf, "%s%.2f ms", sign, a / 1e3);
  else if (a < 120e6) std::snprintf(buf, sizeof buf, "%s%.1f s", sign, a / 1e6);
  else std::snprintf(buf, sizeof buf, "%s%.1f min", sign, a / 60e6);
  return buf;
}

std::string shapes_text(const std::vector<Shape>& shapes) {
  if (shapes.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (i == 8 && shapes.size() > 9) {
      out += ",... (" + std::to_string(shapes.size()) + " tensors)";
      break;
    }
    if (i > 0) out += ',';
    out += '[';
    for (size_t d = 0; d < shapes[i].size(); ++d) out += (d > 0 ? "," : "") + std::to_string(shapes[i][d]);
    out += ']';
  }
  return out;
}

std::string op_label(const Entry& e) {
  return printable(e.op, 60) + " #" + std::to_string(e.seq) + (e.p2p ? " (p2p)" : "");
}

}  // namespace ttrace
