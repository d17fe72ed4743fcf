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
// here: 288 MiB threshold), so glibc's memcpy never streams at collective sizes
// (docs/tuning_log.md: Copies).
#pragma once

#include <cstddef>

namespace tdist {

// memmove semantics. From bulk_copy_threshold() bytes on (x86-64), with
// streaming stores when the ranges do not overlap; else memcpy/memmove.
void bulk_copy(void* dst, const void* src, size_t n);

// TDIST_BULK_COPY_BYTES (0: never stream), else a quarter of the last-level
// cache, at least 1 MiB (8 MiB when the cache is unknown). A smaller copy may
// stay in cache with the rest of the collective's buffers from one call to the
// next, and then ordinary stores win (docs/tuning_log.md: Copies).
size_t bulk_copy_threshold();

// Streaming stores whatever the size, for ranges that do not overlap (x86-64;
// elsewhere memcpy): the lines go to memory, not into this core's cache.
void stream_copy(void* dst, const void* src, size_t n);

}  // namespace tdist
