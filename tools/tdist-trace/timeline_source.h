// Where the timeline's operations (and their steps) come from: a rank's timeline file
// (tdist_trace_<rank>.jsonl), or a rank's flight recorder dump. Each can be walked more than once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "records.h"

namespace ttrace {

// One operation of a rank; unfinished: it had not ended when the dump was taken (end_us is then
// the dump's time).
struct TimelineOp {
  const std::string* group = nullptr;
  const Entry* entry = nullptr;
  bool unfinished = false;
  int64_t end_us = 0;  // the rank's clock
};

class TimelineSource {
 public:
  virtual ~TimelineSource() = default;
  virtual const RankInfo& info() const = 0;
  virtual const std::string& path() const = 0;
  // Calls on_op for every operation and on_step (when set) for every step line, in the file's
  // order. A dump has no steps.
  virtual void for_each(const std::function<void(const TimelineOp&)>& on_op,
                        const std::function<void(const Step&)>& on_step) = 0;
  // Lines skipped as unparsable on the last walk ("FILE:LINE: why"), and how many.
  virtual const std::vector<std::string>& skipped() const = 0;
  virtual size_t skipped_count() const = 0;
};

inline constexpr size_t kMaxTraceLine = size_t{1} << 20;

// A timeline file; reads its header now. Throws InputError when the header is unusable or names
// another rank than expected_rank (-1: any).
std::unique_ptr<TimelineSource> open_trace_file(const std::string& path, int expected_rank);

// A dump already read.
std::unique_ptr<TimelineSource> dump_source(Dump dump);

}  // namespace ttrace
