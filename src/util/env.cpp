#include "util/env.h"

#include <cstdlib>
#include <string>

#include "tdist/errors.h"
#include "util/settings.h"

namespace tdist {

std::optional<std::string> get_env(const char* name) {
  const SettingInfo* setting = find_setting(name);
  // A name missing from the registry is a bug of tdist's, caught by its tests.
  if (setting == nullptr)
    throw DistError(std::string("internal error: environment variable ") + name +
                    " is read but not in the settings registry (src/util/settings_table.h)");
  const char* read_as = name;
  const char* v = std::getenv(name);
  if (v == nullptr && setting->torch_name != nullptr) v = std::getenv(read_as = setting->torch_name);
  if (v == nullptr) return std::nullopt;
  return parse_setting(*setting, read_as, v);
}

void check_environment() {
  for (const SettingInfo& s : all_settings()) get_env(s.name);
}

}  // namespace tdist
