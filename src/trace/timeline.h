// TDIST_TRACE=DIR: every finished operation of this process as a line of
// DIR/tdist_trace_<rank>.jsonl (docs/trace_format.md), for
// `tdist-trace --timeline` to merge into one Chrome trace.
#pragma once

namespace tdist::trace {

// Starts the writer (an operation observer) when TDIST_TRACE is set.
void start_timeline_from_env();
// Writes out what is buffered (before a dump, at exit).
void flush_timeline();

}  // namespace tdist::trace
