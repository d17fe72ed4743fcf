// The command line of tdist-trace, and its --help.
#pragma once

#include <string>
#include <vector>

#include "input_files.h"

namespace ttrace {

enum class Mode { kAnalyse, kTimeline, kHelp, kVersion, kUsageError };

struct Options {
  Mode mode = Mode::kAnalyse;
  std::string dir;          // DIR, or "" when only --prefix was given
  std::string prefix;       // --prefix, or ""
  bool json = false;        // --json
  double slow_ms = 1.0;     // --slow-ms
  std::string output;       // -o (timeline)
  bool queued = false;      // --queued (timeline)
  std::string error;        // kUsageError: why

  // Where the files are: DIR with --prefix (or default_prefix), or --prefix as a path prefix.
  FileSet files(const std::string& default_prefix) const;
};

Options parse_options(const std::vector<std::string>& args);
std::string help_text();

inline constexpr const char* kAnalysisPrefix = "tdist_fr_";
inline constexpr const char* kTimelinePrefix = "tdist_trace_";

}  // namespace ttrace
