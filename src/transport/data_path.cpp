#include "transport/data_path.h"

#include <algorithm>
#include <cctype>

#include "tdist/errors.h"
#include "util/settings.h"
#include "util/shm_segment.h"

namespace tdist {

std::vector<std::string> data_path_order() {
  static const char* const kKnown[] = {"shm", "tcp"};
  const std::string list = settings::text<"TDIST_TRANSPORTS">();  // for the messages
  std::vector<std::string> order;
  for (std::string name : settings::get<"TDIST_TRANSPORTS">()) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (std::find(std::begin(kKnown), std::end(kKnown), name) == std::end(kKnown))
      throw DistValueError("TDIST_TRANSPORTS=" + list + ": unknown transport '" + name + "' (known: shm, tcp)");
    if (std::find(order.begin(), order.end(), name) != order.end())
      throw DistValueError("TDIST_TRANSPORTS=" + list + ": '" + name + "' is listed twice");
    // TDIST_SHM=0 turns every use of shared memory off, rings included.
    if (name == "shm" && !shm_enabled()) continue;
    order.push_back(name);
  }
  if (order.empty())
    throw DistValueError("TDIST_TRANSPORTS=" + list + " names no transport that can be used (known: shm, tcp" +
                         std::string(shm_enabled() ? "" : "; shm is off by TDIST_SHM=0") + ")");
  return order;
}

}  // namespace tdist
