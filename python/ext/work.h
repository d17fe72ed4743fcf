// Work and Future handles for Python. A C++ operation reads and writes the
// memory of Python arrays; these handles keep those arrays alive until it is
// over, even when the caller drops the handle early (a dropped pending Work
// parks its arrays in a list that is pruned as operations complete).
#pragma once

#include <memory>

#include <tdist/distributed.h>
#include <tdist/work.h>

#include "common.h"

namespace tdist_py {

// What an operation needs from Python while it runs, and what its future yields.
struct Keep {
  py::list owners;   // objects whose memory the operation uses
  py::list outputs;  // the value of work.get_future() / work.result()
};

class PyWork {
 public:
  // `group`: the operation's group (null: the default group), failed when Ctrl-C interrupts a wait.
  PyWork(std::shared_ptr<tdist::Work> work, Keep keep, tdist::Group group)
      : work_(std::move(work)), keep_(std::move(keep)), group_(std::move(group)) {}
  ~PyWork();
  PyWork(const PyWork&) = delete;
  PyWork& operator=(const PyWork&) = delete;

  const std::shared_ptr<tdist::Work>& work() const { return work_; }
  const Keep& keep() const { return keep_; }
  const tdist::Group& group() const { return group_; }

 private:
  std::shared_ptr<tdist::Work> work_;
  Keep keep_;
  tdist::Group group_;
};

// The result of an operation of `group` for Python: a Work when async_op,
// else None after waiting (GIL released) for it.
py::object finish(std::shared_ptr<tdist::Work> work, bool async_op, Keep keep, const tdist::Group& group);

// Waits (GIL held on entry, released while waiting) for `work` of `group`
// (null: the default group) up to `timeout`; DistBackendError naming it when
// not done by then. Ctrl-C (a signal handler's exception) ends the wait: the
// group is failed (interruptible_wait.h) and the exception raised; the
// arrays of `keep` stay alive until the operation has ended.
void wait_for(const std::shared_ptr<tdist::Work>& work, const tdist::Group& group, const Keep* keep,
              std::chrono::milliseconds timeout = tdist::kNoTimeout);

// Drops parked arrays of operations that have completed (GIL held).
void prune_parked();
// Drops all of them (after destroy_process_group: every operation is over).
void clear_parked();

}  // namespace tdist_py
