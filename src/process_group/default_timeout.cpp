#include "process_group/default_timeout.h"

#include <string>

#include "tdist/backend.h"
#include "tdist/errors.h"
#include "util/settings.h"

namespace tdist {

std::chrono::milliseconds resolve_timeout(std::chrono::milliseconds given) {
  if (given != kUnsetTimeout) return given;
  static_assert(*settings::info<"TDIST_TIMEOUT">().default_number * 1000 == kDefaultTimeout.count(),
                "the registry's default of TDIST_TIMEOUT is torch's, kDefaultTimeout");
  return settings::get<"TDIST_TIMEOUT">();
}

}  // namespace tdist
