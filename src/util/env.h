// Reading the environment (torchrun/MPI variables and TDIST_* settings): only
// names of the settings registry (util/settings.h), which also gives torch's
// name for a setting, read where ours is unset.
#pragma once

#include <optional>
#include <string>

namespace tdist {

// The value as util/settings.h's parse_setting gives it (a bool as "1" or
// "0"); a bad value is a DistValueError naming the variable.
std::optional<std::string> get_env(const char* name);
// Reads every registered setting that is set, so that a bad value of any of
// them fails init_process_group at once rather than whatever first reads it.
void check_environment();
// Parses an integer variable; DistValueError naming the variable on garbage.
std::optional<long long> get_env_int(const char* name);
bool env_flag(const char* name, bool default_value);

}  // namespace tdist
