// tdist-trace: what went wrong, from every rank's flight recorder dump; and one timeline of
// every rank's operations. Reads files only (it does not link libtdist). See docs/tdist-trace.md.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "options.h"

int main(int argc, char** argv) {
  using namespace ttrace;
  const Options options = parse_options(std::vector<std::string>(argv + 1, argv + argc));
  switch (options.mode) {
    case Mode::kHelp:
      std::fputs(help_text().c_str(), stdout);
      return 0;
    case Mode::kVersion:
      std::printf("tdist-trace %s (reads flight recorder dumps and timeline files of version 1)\n", TDIST_TRACE_VERSION);
      return 0;
    case Mode::kUsageError:
      std::fprintf(stderr, "tdist-trace: %s\n", options.error.c_str());
      return 2;
    case Mode::kTimeline:
      return timeline_command(options, stdout, stderr);
    case Mode::kAnalyse:
      break;
  }
  return analyse_command(options, stdout, stderr);
}
