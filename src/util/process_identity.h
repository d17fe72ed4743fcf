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

// Whether the process has certainly exited, for removing what it left behind
// in a place other processes share (/dev/shm): no pid (ESRCH), a zombie with
// no thread left, or its pid now held by a process that started at another
// time. Stricter than liveness(): false whenever /proc cannot tell (hidden,
// or the process is in another pid namespace), and for a process whose main
// thread exited while others run (its entry reads as a zombie too).
// `started` 0 means unknown: then only the first two prove an exit.
bool provably_exited(const ProcessIdentity& process);

}  // namespace tdist
