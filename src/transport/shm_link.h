// The shared-memory data path between two ranks of one host: one segment per
// pair holding a ring in each direction. The pair's TCP socket stays open for
// doorbells, abort notices and noticing that the peer is gone.
#pragma once

#include <cstddef>

#include "transport/shm_ring.h"
#include "util/shm_segment.h"

namespace tdist {

struct ShmLink {
  ShmSegment segment;
  ShmRing tx;  // this rank -> peer
  ShmRing rx;  // peer -> this rank

  // Segment layout: control(low->high), control(high->low), data(low->high), data(high->low).
  static size_t segment_bytes(size_t ring_bytes) { return 2 * sizeof(ShmRingControl) + 2 * ring_bytes; }
  // The creator sets up both rings' controls before offering the segment.
  static void init_controls(ShmSegment& seg);
  // Views both rings; `is_low` says whether this rank is the lower of the pair.
  ShmLink(ShmSegment seg, size_t ring_bytes, bool is_low);
};

// Ring capacity per direction: TDIST_SHM_RING_BYTES or 512 KiB.
size_t shm_ring_bytes();

}  // namespace tdist
