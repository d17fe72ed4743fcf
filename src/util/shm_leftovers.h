// What a process that died between creating a shared-memory segment and
// unlinking its name leaves in /dev/shm, and who removes it: a segment's name
// says who created it (pid, its start time, pid namespace, boot), so that any
// later process of the host can prove the creator dead and remove the name,
// and never the name of a live creator. Mappings are not affected: processes
// that mapped the segment keep it until they unmap it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "util/process_identity.h"

namespace tdist {

// A new name for a segment this process creates:
// "/tdist-<tag>-<pid>.<start time>.<boot>-<pid namespace>-<counter>-<salt>",
// where <boot> is the first 8 hex digits of the kernel's boot id ("0": not
// known) and <tag> is [a-z0-9]+. Names before this form were
// "/tdist-<tag>-<pid>-<pid namespace>-<counter>-<salt>".
std::string fresh_segment_name(const std::string& tag);

// Who created a segment, from its name as readdir gives it (without '/').
struct SegmentCreator {
  ProcessIdentity process;  // started: 0 where the name is of the older form
  std::string boot;         // "" where the name is of the older form, "0" where the creator did not know
};
// nullopt: not a name of either form.
std::optional<SegmentCreator> creator_of_segment(std::string_view name);

// Removes the names of tdist segments in /dev/shm that this user owns and
// whose creator has provably exited (util/process_identity.h: no such pid, a
// zombie, or the pid now held by a process with another start time); a name
// of another pid namespace is never touched, nor one of another boot unless it
// is older than this boot. Returns how many it removed. Run by a process's
// first ShmSegment::create, by a group whose shared-memory set-up failed, and
// by tdistrun when it starts and when it exits.
size_t remove_segments_of_dead_processes();

}  // namespace tdist
