#include "trace/timeline.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "tdist/errors.h"
#include "tdist/trace.h"
#include "trace/json_writer.h"
#include "trace/recorder_registry.h"
#include "util/host_id.h"
#include "util/logging.h"
#include "util/settings.h"

namespace tdist::trace {

namespace {

// Lines are buffered and written out at most this long after they were made:
// a killed rank loses at most that much, and a busy rank makes no write per operation.
constexpr auto kFlushInterval = std::chrono::milliseconds(100);

struct Timeline {
  std::mutex mu;
  std::string dir;
  std::FILE* file = nullptr;
  bool failed = false;  // could not open: said once, then silent
  std::chrono::steady_clock::time_point last_flush{};
};

Timeline& timeline() {
  static Timeline* t = new Timeline;  // observers may run during static destruction
  return *t;
}

// Opened at the first line, when the process knows its rank.
bool open_locked(Timeline& t) {
  if (t.file) return true;
  if (t.failed) return false;
  const Identity who = identity();
  const std::string path = t.dir + "/tdist_trace_" + std::to_string(who.rank) + ".jsonl";
  t.file = std::fopen(path.c_str(), "w");
  if (!t.file) {
    t.failed = true;
    TDIST_LOG(LogLevel::Error, "TDIST_TRACE: cannot write " << path << ": " << std::strerror(errno)
                                                           << "; no timeline for this rank");
    return false;
  }
  JsonWriter w;
  w.begin_object();
  w.key("version").value(1);
  w.key("rank").value(who.rank);
  w.key("world_size").value(who.world_size);
  w.key("host").value(hostname());
  w.key("pid").value(static_cast<int64_t>(getpid()));
  w.key("clock_offset_us").value(who.clock_offset_us);
  if (who.clock_error_us >= 0) w.key("clock_error_us").value(who.clock_error_us);
  w.end_object();
  std::string line = w.take();
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), t.file);
  return true;
}

void append(std::string line) {
  line.push_back('\n');
  Timeline& t = timeline();
  std::lock_guard<std::mutex> lock(t.mu);
  if (!open_locked(t)) return;
  std::fwrite(line.data(), 1, line.size(), t.file);
  const auto now = std::chrono::steady_clock::now();
  if (now - t.last_flush >= kFlushInterval) {
    std::fflush(t.file);
    t.last_flush = now;
  }
}

void write_line(const OpEvent& e) {
  JsonWriter w;
  write_event(w, e, /*with_group=*/true);
  append(w.take());
}

// 0 on the thread that runs an operation; a helper that runs steps beside it
// (a pipeline's) says which it is, so that a reader draws overlapping steps apart.
thread_local int t_step_thread = 0;

}  // namespace

bool timeline_on() { return settings::get<"TDIST_TRACE">().has_value(); }

void write_step_line(const StepLine& s) {
  JsonWriter w;
  w.begin_object();
  w.key("step").value(s.where);
  w.key("group").value(s.group);
  w.key("seq").value(s.seq);
  w.key("part").value(static_cast<uint64_t>(s.part));
  w.key("op").value(s.op);
  w.key("engine").value(s.engine);
  w.key("bytes").value(s.bytes);
  w.key("thread").value(t_step_thread);
  w.key("state").value(s.error ? "failed" : "completed");
  if (s.error) w.key("error").value(s.error);
  w.key("started_us").value(s.started_us);
  w.key("ended_us").value(s.ended_us);
  w.end_object();
  append(w.take());
}

void set_step_thread(int helper) { t_step_thread = helper; }

void flush_timeline() {
  Timeline& t = timeline();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.file) std::fflush(t.file);
}

void start_timeline_from_env() {
  auto dir = settings::get<"TDIST_TRACE">();
  if (!dir) return;
  timeline().dir = *dir;
  add_op_observer(write_line);
  std::atexit(flush_timeline);
}

}  // namespace tdist::trace
