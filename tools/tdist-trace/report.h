// The analysis for a terminal (short, the most important finding first) or as JSON.
#pragma once

#include <string>

#include "analysis.h"

namespace ttrace {

std::string report_text(const Report& r);
std::string report_json(const Report& r);

}  // namespace ttrace
