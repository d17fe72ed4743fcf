// Who a process is, in a form another process of the same host can check:
// whether a rank that shares memory with this one is still alive, without a
// socket to it (pairs connect only when they first exchange a message).
#pragma once

#include <cstdint>

namespace tdist {

struct ProcessIdentity {
  int32_t pid = 0;
  uint64_t started = 0;  // the start time in /proc/<pid>/stat: a reused pid has another
  uint64_t pid_ns = 0;   // the inode of its pid namespace: pids mean nothing across namespaces
};

// This process.
ProcessIdentity this_process();

enum class Liveness { Alive, Gone, Unknown };
// Gone when the process has exited (or is a zombie, or its pid now belongs to
// another process); Unknown when it lives in another pid namespace or was
// never recorded (pid 0).
Liveness liveness(const ProcessIdentity& process);

}  // namespace tdist
