#include "trace/recorder_registry.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "tdist/errors.h"
#include "trace/flight_recorder.h"
#include "trace/folders.h"
#include "trace/signal_dump.h"
#include "trace/json_writer.h"
#include "util/tick_clock.h"
#include "trace/timeline.h"
#include "util/host_id.h"
#include "util/logging.h"
#include "util/settings.h"

namespace tdist::trace {

namespace {

constexpr size_t kTimelineOnlyCapacity = 64;

using Observers = std::vector<std::pair<int, std::shared_ptr<const OpObserver>>>;

struct Registry {
  std::mutex mu;  // everything below
  Identity who;
  bool identity_set = false;
  std::vector<FlightRecorder*> recorders;
  std::shared_ptr<const Observers> observers = std::make_shared<Observers>();
  int next_handle = 1;
  bool started = false;  // the first recorder set up the timeline and the signal
  std::mutex dump_mu;    // one dump at a time (they share a file)
  bool failure_dumped = false;  // under dump_mu: a failure's dump is written
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: recorders may outlive static destruction
  return *r;
}

std::string dump_document(const std::string& reason, const std::string& detail) {
  Registry& r = registry();
  TickConversion clock;
  JsonWriter w;
  std::lock_guard<std::mutex> lock(r.mu);  // no recorder goes away meanwhile
  w.begin_object();
  w.key("version").value(1);
  w.key("rank").value(r.who.rank);
  w.key("world_size").value(r.who.world_size);
  w.key("host").value(hostname());
  w.key("pid").value(static_cast<int64_t>(getpid()));
  w.key("reason").value(reason);
  w.key("detail").value(detail);
  w.key("dump_time_us").value(realtime_us_now());
  w.key("clock_offset_us").value(r.who.clock_offset_us);
  if (r.who.clock_error_us >= 0) w.key("clock_error_us").value(r.who.clock_error_us);
  w.key("groups").begin_array();
  for (FlightRecorder* rec : r.recorders) w.raw(rec->dump_json(clock));
  w.end_array();
  w.end_object();
  std::string out = w.take();
  out.push_back('\n');
  return out;
}

}  // namespace

size_t recorder_capacity() {
  // The registry holds its default (torch's, 2000) and its range.
  const long long n = settings::get<"TDIST_FLIGHT_RECORDER_ENTRIES">();
  // The timeline is written from the recorder's entries: it keeps a few (the
  // operations in flight) even where the recorder is off.
  if (n == 0 && settings::get<"TDIST_TRACE">()) return kTimelineOnlyCapacity;
  return static_cast<size_t>(n);
}

void set_identity(int rank, int world_size) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.who.rank = rank;
  r.who.world_size = world_size;
  r.identity_set = true;
}

bool identity_set() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.identity_set;
}

void set_clock_offset(int64_t offset_us, int64_t error_us) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.who.clock_offset_us = offset_us;
  r.who.clock_error_us = error_us;
}

Identity identity() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.who;
}

void register_recorder(FlightRecorder* recorder) {
  Registry& r = registry();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.recorders.push_back(recorder);
    first = !std::exchange(r.started, true);
  }
  if (!first) return;
  install_signal_dumps();
  start_timeline_from_env();
}

void unregister_recorder(FlightRecorder* recorder) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.recorders.erase(std::remove(r.recorders.begin(), r.recorders.end(), recorder), r.recorders.end());
}

void notify_observers(const OpEvent& event) {
  std::shared_ptr<const Observers> observers;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    observers = r.observers;
  }
  for (const auto& [handle, fn] : *observers) {
    try {
      (*fn)(event);
    } catch (const std::exception& e) {
      TDIST_LOG(LogLevel::Error, "an operation observer threw (ignored): " << e.what());
    } catch (...) {
      TDIST_LOG(LogLevel::Error, "an operation observer threw (ignored)");
    }
  }
}

std::string dump_destination(int rank) {
  if (auto prefix = settings::get<"TORCH_FR_DUMP_TEMP_FILE">())
    return *prefix + std::to_string(rank) + ".json";
  if (auto dir = settings::get<"TDIST_FLIGHT_RECORDER_DIR">())
    return *dir + "/tdist_fr_" + std::to_string(rank) + ".json";
  return "";
}

namespace {

// Writes a dump; the caller holds dump_mu.
std::string write_dump_locked(const std::string& path, const std::string& reason, const std::string& detail) {
  const std::string document = dump_document(reason, detail);
  // Readers never see half a file: a temporary name, then a rename.
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) throw DistError("flight recorder: cannot write " + tmp + ": " + std::strerror(errno));
  const bool ok = std::fwrite(document.data(), 1, document.size(), f) == document.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw DistError("flight recorder: cannot write " + path + ": " + why);
  }
  return path;
}

}  // namespace

std::string write_dump(const std::string& path, const std::string& reason, const std::string& detail) {
  std::lock_guard<std::mutex> dump_lock(registry().dump_mu);
  return write_dump_locked(path, reason, detail);
}

bool write_dump_unless_failure_dumped(const std::string& path, const std::string& reason, const std::string& detail) {
  Registry& r = registry();
  std::lock_guard<std::mutex> dump_lock(r.dump_mu);  // a failure's dump under way is finished first
  if (r.failure_dumped) return false;
  write_dump_locked(path, reason, detail);
  return true;
}

void prepare_process() {
  prepare_folders_from_env();
  install_signal_dumps();
}

void dump_after_failure(const std::string& reason, const std::string& detail) {
  const std::string path = dump_destination(identity().rank);
  if (path.empty()) return;
  try {
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> dump_lock(r.dump_mu);
      write_dump_locked(path, reason, detail);
      r.failure_dumped = true;
    }
    TDIST_LOG(LogLevel::Warn, "flight recorder: dumped after a " << reason << " to " << path
                                                                 << " (tdist-trace reads it)");
  } catch (const std::exception& e) {
    TDIST_LOG(LogLevel::Error, "flight recorder: the dump after a " << reason << " failed: " << e.what());
  }
}

}  // namespace tdist::trace

namespace tdist {

int add_op_observer(OpObserver observer) {
  if (!observer) throw DistValueError("add_op_observer: no function given");
  auto& r = trace::registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto next = std::make_shared<trace::Observers>(*r.observers);
  const int handle = r.next_handle++;
  next->emplace_back(handle, std::make_shared<const OpObserver>(std::move(observer)));
  r.observers = std::move(next);
  trace::g_observed.store(true, std::memory_order_relaxed);
  return handle;
}

void remove_op_observer(int handle) {
  auto& r = trace::registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto next = std::make_shared<trace::Observers>(*r.observers);
  next->erase(std::remove_if(next->begin(), next->end(), [&](const auto& o) { return o.first == handle; }),
              next->end());
  trace::g_observed.store(!next->empty(), std::memory_order_relaxed);
  r.observers = std::move(next);
}

std::string dump_flight_recorder(const std::string& path) {
  std::string where = path.empty() ? trace::dump_destination(trace::identity().rank) : path;
  if (where.empty())
    throw DistValueError("dump_flight_recorder: no path given, and neither TDIST_FLIGHT_RECORDER_DIR nor "
                         "TORCH_FR_DUMP_TEMP_FILE says where dumps go");
  return trace::write_dump(where, "request", "");
}

std::string flight_recorder_json(const std::string& reason) { return trace::dump_document(reason, ""); }

}  // namespace tdist
