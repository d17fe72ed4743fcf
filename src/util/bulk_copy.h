// Copying a large buffer that nobody reads again soon: a rank's own block into
// a collective's output (all_gather, all_to_all, gather, scatter), which the
// caller reads only after the collective.
//
// Such a copy with ordinary stores first reads every destination line into the
// cache (to own it), then writes it back: three memory transfers per line, and
// the lines evict the data the rest of the collective works on. Streaming
// (non-temporal) stores write whole lines straight to memory: two transfers.
// glibc switches to them only above its non-temporal threshold, three quarters
// of the shared cache it is told about; VMs often report huge caches (384 MiB
// here: 288 MiB threshold), so glibc's memcpy never streams at collective sizes.
// Measured on the 2-core EPYC VM, both cores copying at once (the case in a
// collective, every rank copies its block), best of 3: 2 MiB 112-140 vs 93-98
// us, 4 MiB 248-259 vs 188-209 us, 16 MiB 0.9-2.3 vs 0.73-0.96 ms.
#pragma once

#include <cstddef>

namespace tdist {

// memmove semantics. From bulk_copy_threshold() bytes on (x86-64), with
// streaming stores when the ranges do not overlap; else memcpy/memmove.
void bulk_copy(void* dst, const void* src, size_t n);

// TDIST_BULK_COPY_BYTES (0: never stream), else a quarter of the last-level
// cache, at least 1 MiB (8 MiB when the cache is unknown). A smaller copy may
// stay in cache with the rest of the collective's buffers from one call to the
// next, and then ordinary stores win: shared-memory all_gather, 2 ranks, 32 MiB
// L3, streaming against not: 4 MiB 215 vs 153 us, 8 MiB 453 vs 377, 16 MiB
// (an 8 MiB block, a quarter of the cache) 1231 vs 1464.
size_t bulk_copy_threshold();

}  // namespace tdist
