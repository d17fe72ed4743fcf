// The two commands: the analysis of the dumps, and the merged timeline. Each returns the exit
// status (0 fine, 1 a problem found, 2 bad input) and writes to out and err.
#pragma once

#include <cstdio>

#include "options.h"

namespace ttrace {

int analyse_command(const Options& options, std::FILE* out, std::FILE* err);
int timeline_command(const Options& options, std::FILE* out, std::FILE* err);

}  // namespace ttrace
