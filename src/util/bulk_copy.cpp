#include "util/bulk_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "util/settings.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace tdist {

namespace {

constexpr size_t kMinBulkCopyBytes = size_t{1} << 20;
constexpr size_t kDefaultBulkCopyBytes = size_t{8} << 20;

// The last-level cache of CPU 0 as Linux describes it (sysfs), in bytes; 0 if
// unknown. Not sysconf: glibc takes the size from CPUID, which a VM may fill
// with the whole host's (384 MiB on the 2-core VM, whose sysfs says 32 MiB).
size_t last_level_cache_bytes() {
  size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), size_file(dir + "size"), type_file(dir + "type");
    int level = 0;
    std::string size, type;
    if (!(level_file >> level) || !(size_file >> size) || !(type_file >> type)) break;
    if (type == "Instruction" || level < best_level) continue;
    size_t value = std::strtoull(size.c_str(), nullptr, 10);
    if (size.back() == 'K') value <<= 10;
    if (size.back() == 'M') value <<= 20;
    best = value;
    best_level = level;
  }
  return best;
}

bool overlap(const char* d, const char* s, size_t n) { return d < s + n && s < d + n; }

#if defined(__x86_64__)
// Whole 64-byte lines with streaming stores (SSE2, every x86-64 has it); the
// bandwidth is memory's, wider vectors gain nothing. dst is line-aligned.
void stream_lines(char* dst, const char* src, size_t lines) {
  for (size_t i = 0; i < lines; ++i, dst += 64, src += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
  }
  // Streaming stores are weakly ordered: whatever the caller publishes next
  // (an arena flag, a completed Work) must not become visible before them.
  _mm_sfence();
}
#endif

}  // namespace

// Kept for the process's life: every copy asks for it, too often to read the
// environment (the tests that set it do so in a child process).
size_t bulk_copy_threshold() {
  static const size_t threshold = [] {
    if (auto v = settings::get<"TDIST_BULK_COPY_BYTES">()) return *v <= 0 ? SIZE_MAX : static_cast<size_t>(*v);
    size_t cache = last_level_cache_bytes();
    return std::max(kMinBulkCopyBytes, cache > 0 ? cache / 4 : kDefaultBulkCopyBytes);
  }();
  return threshold;
}

void stream_copy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
#if defined(__x86_64__)
  size_t head = std::min(n, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, head);
  size_t lines = (n - head) / 64;
  stream_lines(d + head, s + head, lines);
  size_t done = head + lines * 64;
  std::memcpy(d + done, s + done, n - done);
#else
  std::memcpy(d, s, n);
#endif
}

void bulk_copy(void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src) return;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (overlap(d, s, n)) {
    std::memmove(d, s, n);
    return;
  }
  if (n >= bulk_copy_threshold())
    stream_copy(d, s, n);
  else
    std::memcpy(d, s, n);
}

}  // namespace tdist
