// Reading the environment (torchrun/MPI variables and TDIST_* settings): only
// names of the settings registry (util/settings.h), which also gives torch's
// name for a setting, read where ours is unset.
#pragma once

#include <optional>
#include <string>

namespace tdist {

std::optional<std::string> get_env(const char* name);
// Parses an integer variable; DistValueError naming the variable on garbage.
std::optional<long long> get_env_int(const char* name);
bool env_flag(const char* name, bool default_value);

}  // namespace tdist
