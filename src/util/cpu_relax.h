// One pause in a polling loop: tells the CPU that we spin (saves power, frees
// the sibling hyperthread) without giving the core away.
#pragma once

namespace tdist {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace tdist
