#include "init/slurm.h"

#include <cctype>

#include "tdist/errors.h"
#include "util/settings.h"

namespace tdist::slurm {

namespace {

// More hosts than any job has: a list that names more is refused, not expanded.
constexpr size_t kMaxHosts = 100000;

[[noreturn]] void malformed(const std::string& list, const std::string& why) {
  throw DistValueError("the Slurm host list '" + list + "' is malformed: " + why);
}

// The values of one bracket group's body: "01-03,07" -> 01 02 03 07.
std::vector<std::string> expand_ranges(const std::string& body, const std::string& list) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= body.size()) {
    const size_t comma = body.find(',', pos);
    const std::string item = body.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash), hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    auto digits = [](const std::string& t) {
      if (t.empty() || t.size() > 9) return false;
      for (char c : t)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
      return true;
    };
    if (!digits(lo) || !digits(hi)) malformed(list, "'" + item + "' is not a number or a range of numbers");
    const long a = std::stol(lo), b = std::stol(hi);
    if (b < a) malformed(list, "the range '" + item + "' runs backwards");
    if (b - a >= static_cast<long>(kMaxHosts)) malformed(list, "the range '" + item + "' names more than 100000 hosts");
    for (long v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');  // node[01-10]: the padding of the low end
      out.push_back(s);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// One name with bracket groups: the product of its parts.
void expand_name(const std::string& name, const std::string& list, std::vector<std::string>& out) {
  std::vector<std::string> partial{""};
  size_t pos = 0;
  while (pos < name.size()) {
    const size_t open = name.find('[', pos);
    const std::string literal = name.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (literal.find(']') != std::string::npos) malformed(list, "a ']' without its '['");
    for (auto& p : partial) p += literal;
    if (open == std::string::npos) break;
    const size_t close = name.find(']', open);
    if (close == std::string::npos) malformed(list, "a '[' without its ']'");
    const auto values = expand_ranges(name.substr(open + 1, close - open - 1), list);
    // Several groups multiply: bound the product as each range is bounded.
    if (partial.size() * values.size() > kMaxHosts) malformed(list, "it names more than 100000 hosts");
    std::vector<std::string> next;
    for (const auto& p : partial)
      for (const auto& v : values) next.push_back(p + v);
    partial.swap(next);
    pos = close + 1;
  }
  out.insert(out.end(), partial.begin(), partial.end());
  if (out.size() > kMaxHosts) malformed(list, "it names more than 100000 hosts");
}

}  // namespace

std::vector<std::string> expand_nodelist(const std::string& list) {
  std::vector<std::string> hosts;
  int depth = 0;
  std::string name;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) malformed(list, "a ']' without its '['");
    if (c == ',' && depth == 0) {
      if (name.empty()) malformed(list, "an empty name");
      expand_name(name, list, hosts);
      name.clear();
    } else {
      name += c;
    }
  }
  if (depth != 0) malformed(list, "a '[' without its ']'");
  if (name.empty()) malformed(list, "an empty name");
  expand_name(name, list, hosts);
  return hosts;
}

std::optional<std::string> master_host() {
  auto list = settings::get<"SLURM_JOB_NODELIST">();
  if (!list) list = settings::get<"SLURM_NODELIST">();
  if (!list) return std::nullopt;
  return expand_nodelist(*list).front();
}

std::optional<int> master_port() {
  auto job = settings::get<"SLURM_JOB_ID">();
  if (!job) return std::nullopt;
  return 20000 + static_cast<int>(*job % 20000);
}

}  // namespace tdist::slurm
