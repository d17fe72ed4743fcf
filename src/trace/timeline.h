// TDIST_TRACE=DIR: every finished operation of this process as a line of
// DIR/tdist_trace_<rank>.jsonl (docs/trace_format.md), for
// `tdist-trace --timeline` to merge into one Chrome trace.
#pragma once

#include <cstdint>
#include <string>

namespace tdist::trace {

// One step of an operation that an engine runs in steps (the hierarchical
// engine: inside the host, among hosts), as a step line of the timeline.
struct StepLine {
  const std::string& group;
  uint64_t seq;          // the operation's, modulo 2^20 (what its tags carry)
  uint32_t part;         // the step's number within the operation
  const char* where;     // "inside host", "among hosts"
  const char* op;        // the collective the step ran
  const char* engine;    // the engine that ran it
  uint64_t bytes;        // what this rank put in
  int64_t started_us = 0, ended_us = 0;  // the system clock, as operation lines
  const char* error = nullptr;           // why it failed; null: it completed
};

// Starts the writer (an operation observer) when TDIST_TRACE is set.
void start_timeline_from_env();
// Whether TDIST_TRACE is set: only then do engines trace their steps.
bool timeline_on();
void write_step_line(const StepLine& step);
// The "thread" of this thread's step lines: 0 (the default) on the thread
// that runs the operation, 1 on a helper that runs some of its steps beside it.
void set_step_thread(int helper);
// Writes out what is buffered (before a dump, at exit).
void flush_timeline();

}  // namespace tdist::trace
