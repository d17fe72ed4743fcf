#include <algorithm>
#include <cctype>
#include <string>

#include "algorithms/collective.h"
#include "util/env.h"

namespace tdist {

std::string forced_algorithm(const char* collective) {
  std::string var = std::string("TDIST_ALGO_") + collective;
  std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) { return std::toupper(c); });
  auto v = get_env(var.c_str());
  if (!v) return "";
  std::string out = *v;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace tdist
