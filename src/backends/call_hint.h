// Set by the free functions around a call that waits for its Work at once
// (async_op=false). A backend may then run the operation on the caller's
// thread when nothing else of the group is queued or running, which saves
// two thread hand-offs per collective (most of a small collective's latency).
#pragma once

namespace tdist {

class BlockingCallHint {
 public:
  explicit BlockingCallHint(bool blocking) : previous_(active_) { active_ = blocking; }
  ~BlockingCallHint() { active_ = previous_; }
  BlockingCallHint(const BlockingCallHint&) = delete;
  BlockingCallHint& operator=(const BlockingCallHint&) = delete;
  static bool active() { return active_; }

 private:
  bool previous_;
  static thread_local bool active_;
};

}  // namespace tdist
