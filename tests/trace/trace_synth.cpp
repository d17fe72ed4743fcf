// trace_synth SCENARIO DIR: writes a synthetic job's flight recorder dumps (or timeline files)
// into DIR, to look at tdist-trace's output by hand (see synthetic.h for the scenarios).
#include <cstdio>
#include <exception>

#include "synthetic.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: trace_synth SCENARIO DIR\n");
    return 2;
  }
  try {
    if (!trace_test::write_scenario(argv[1], argv[2])) {
      std::fprintf(stderr, "trace_synth: unknown scenario '%s'\n", argv[1]);
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_synth: %s\n", e.what());
    return 1;
  }
  return 0;
}
