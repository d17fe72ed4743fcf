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

std::optional<long long> get_env_int(const char* name) {
  auto v = get_env(name);
  if (!v) return std::nullopt;
  size_t used = 0;
  long long out = 0;
  try {
    out = std::stoll(*v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v->size())
    throw DistValueError(std::string("environment variable ") + name + "='" + *v + "' is not an integer");
  return out;
}

bool env_flag(const char* name, bool default_value) {
  auto v = get_env(name);
  if (!v) return default_value;
  return *v == "1";  // the registry's spelling of a bool (parse_setting)
}

}  // namespace tdist
