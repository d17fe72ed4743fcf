// Reading the environment by a name only known at run time (the registry's
// checks of every setting, TDIST_ALGO_<COLLECTIVE>, tests). A reader that knows
// its setting's name asks util/settings.h for the typed value instead.
#pragma once

#include <optional>
#include <string>

namespace tdist {

// The value as util/settings.h's parse_setting gives it (a bool as "1" or
// "0", a choice in the registry's spelling); a bad value is a DistValueError
// naming the variable, a name not in the registry a DistError.
std::optional<std::string> get_env(const char* name);
// Reads every registered setting that is set, so that a bad value of any of
// them fails init_process_group at once rather than whatever first reads it.
void check_environment();

}  // namespace tdist
