#include "transport/data_path.h"

#include <algorithm>
#include <cctype>

#include "tdist/errors.h"
#include "transport/data_path_registry.h"
#include "util/settings.h"

namespace tdist {

std::vector<std::string> data_path_order() {
  const std::vector<std::string> known = known_data_paths();
  std::string known_text;
  for (const std::string& k : known) known_text += (known_text.empty() ? "" : ", ") + k;
  const std::string list = settings::text<"TDIST_TRANSPORTS">();  // for the messages
  std::vector<std::string> order;
  std::string off_text;  // the listed paths that are off in this process, and why
  for (std::string name : settings::get<"TDIST_TRANSPORTS">()) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw DistValueError("TDIST_TRANSPORTS=" + list + ": unknown transport '" + name + "' (known: " + known_text +
                           ")");
    if (std::find(order.begin(), order.end(), name) != order.end())
      throw DistValueError("TDIST_TRANSPORTS=" + list + ": '" + name + "' is listed twice");
    // A path may be off in this process (TDIST_SHM=0 turns every use of
    // shared memory off, rings included).
    if (const DataPathFactory* f = find_data_path(name); f && f->off_reason) {
      const std::string why = f->off_reason();
      if (!why.empty()) {
        off_text += "; " + name + " is off by " + why;
        continue;
      }
    }
    order.push_back(name);
  }
  if (order.empty())
    throw DistValueError("TDIST_TRANSPORTS=" + list + " names no transport that can be used (known: " + known_text +
                         off_text + ")");
  return order;
}

}  // namespace tdist
