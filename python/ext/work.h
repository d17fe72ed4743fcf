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

// What an operation needs from Python while it runs (the objects whose memory
// it uses) and what its future yields (work.get_future() / work.result(): its
// outputs, in order). The first two of each are held in place and lists made
// only when asked for: most calls have one or two arrays, and two lists made
// and freed per call cost a small call 5-8% of its time (docs/performance.md).
class Keep {
 public:
  void own(py::object owner) { add(owners_, more_owners_, owned_, std::move(owner)); }
  void output(py::handle value) {
    add(outputs_, more_outputs_, output_count_, py::reinterpret_borrow<py::object>(value));
  }
  bool owns_nothing() const { return owned_ == 0; }
  py::list owners() const { return as_list(owners_, more_owners_, owned_); }
  py::list outputs() const { return as_list(outputs_, more_outputs_, output_count_); }

 private:
  static constexpr int kInPlace = 2;
  using InPlace = py::object[kInPlace];
  static void add(InPlace& first, py::object& more, int& count, py::object o) {
    if (count < kInPlace) {
      first[count] = std::move(o);
    } else {
      if (!more) more = py::list();
      py::reinterpret_borrow<py::list>(more).append(std::move(o));
    }
    ++count;
  }
  static py::list as_list(const InPlace& first, const py::object& more, int count) {
    py::list out;
    for (int i = 0; i < count && i < kInPlace; ++i) out.append(first[i]);
    if (more)
      for (py::handle h : more) out.append(h);
    return out;
  }
  InPlace owners_, outputs_;
  py::object more_owners_, more_outputs_;  // null, or a list of those past the first two
  int owned_ = 0, output_count_ = 0;
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

// The Python Work of an operation (work_object.cpp: its type, tdist.Work).
py::object make_work_object(std::shared_ptr<tdist::Work> work, Keep keep, tdist::Group group);
// Adds the type to `m` as "Work" (after bind_work's Future, whose objects its get_future makes).
void bind_work_type(py::module_& m);
// What Work.get_future() and Work.get_future_result() return (work.cpp): a Future.
py::object work_get_future(const PyWork& self);
py::object work_get_future_result(const PyWork& self);

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
