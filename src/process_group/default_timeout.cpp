#include "process_group/default_timeout.h"

#include <cmath>
#include <string>

#include "tdist/backend.h"
#include "tdist/errors.h"
#include "util/env.h"

namespace tdist {

std::chrono::milliseconds resolve_timeout(std::chrono::milliseconds given) {
  if (given != kUnsetTimeout) return given;
  auto v = get_env("TDIST_TIMEOUT");
  if (!v) return kDefaultTimeout;
  size_t used = 0;
  double seconds = 0;
  try {
    seconds = std::stod(*v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // At least a millisecond: a timeout that rounds to 0 would fail every wait at once.
  if (used == 0 || used != v->size() || !std::isfinite(seconds) || seconds < 0.001 || seconds > 1e9)
    throw DistValueError("environment variable TDIST_TIMEOUT='" + *v +
                         "' is not a timeout: give a positive number of seconds (e.g. 60 or 0.5), or unset it "
                         "for the default of 1800 s (30 minutes)");
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

}  // namespace tdist
