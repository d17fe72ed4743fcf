// A group's engines: their part in the group's failure and shutdown.
#include "engines/group_engines.h"

#include "shm_engine/host_segment.h"
#include "tdist/errors.h"

namespace tdist {

GroupEngines::~GroupEngines() = default;

bool GroupEngines::process_gone(int r) const {
  if (r < 0 || r >= size_) return false;
  if (segment_) return segment_->process_gone(r);
  if (host_segment_)
    for (size_t i = 0; i < host_members_.size(); ++i)
      if (host_members_[i] == r) return host_segment_->process_gone(static_cast<int>(i));
  return false;
}

void GroupEngines::abort_segments(const std::string& why) {
  if (segment_) segment_->abort(why);
  if (host_segment_) host_segment_->abort(why);
}

void GroupEngines::abort(const std::string& why) {
  abort_segments(why);  // a second abort of a segment changes nothing: the first reason stays
  // The hierarchical engine's communicators fail with the group (alone, as
  // it does), so that a step of it under way ends too.
  if (local_ || cross_) {
    auto cause = std::make_exception_ptr(DistBackendError(why));
    if (local_) local_->abort(cause);
    if (cross_) cross_->abort(cause);
  }
}

void GroupEngines::wake_all() {
  if (segment_) segment_->wake_all();
  if (host_segment_) host_segment_->wake_all();
}

void GroupEngines::close(const std::exception_ptr& why) {
  if (local_) local_->close(why);
  if (cross_) cross_->close(why);
}

// A peer waiting in a segment for this rank fails at once, naming it as gone
// (the transport's goodbye reaches only the peers this rank has a socket
// to); a wait of this process notices at its next check, woken for it now.
void GroupEngines::leave() {
  for (shm_engine::HostSegment* segment : {segment_.get(), host_segment_.get()}) {
    if (!segment) continue;
    segment->leave();
    segment->wake_all();
  }
}

}  // namespace tdist
