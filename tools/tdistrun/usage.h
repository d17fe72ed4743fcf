// tdistrun --help and --version texts.
#pragma once

#include <string>

namespace tdistrun {

std::string help_text();
std::string version_text();

}  // namespace tdistrun
