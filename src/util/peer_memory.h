// Reading another process's memory on this host in one copy (Linux's
// cross-memory attach, process_vm_readv): how ranks that share a host move
// large blocks without copying them through a shared segment twice. The
// kernel allows it between processes of one user that may trace each other.
#pragma once

#include <cstddef>
#include <string>

namespace tdist {

// Lets processes of this user read this process's memory where Yama's
// ptrace_scope 1 would allow only its ancestors (prctl PR_SET_PTRACER): the
// ranks of a job are siblings. Once per process; nothing where Yama is absent.
void allow_reads_by_peers();

// Copies `n` bytes at `remote` in process `pid` (of this pid namespace) to
// `local`. Returns "" once all arrived, else why not ("process_vm_readv from
// pid 1234: Operation not permitted").
std::string read_peer_memory(int pid, const void* remote, void* local, size_t n);

// The other way: copies `n` bytes at `local` to `remote` in process `pid`
// (process_vm_writev). Returns "" once all arrived, else why not.
std::string write_peer_memory(int pid, const void* local, void* remote, size_t n);

}  // namespace tdist
