// Dumps on signals, written by a thread that a handler wakes (a handler may
// only write to a pipe):
// - SIGUSR1 asks for a dump and never ends the process: to the configured
//   destination, else to default_dump_folder() (trace/folders.h), with one
//   log line saying where;
// - SIGTERM, where a destination is set: a launcher (tdistrun, torchrun,
//   spawn) stops the other ranks with it when one fails, often before they
//   reach their own failure's dump; each writes its record first (unless its
//   failure's dump is written), then dies of the signal as it would have.
// A handler of the program's own is never replaced.
#pragma once

namespace tdist::trace {

// Once per process (again in a forked child, whose parent's thread is not
// its own): the thread and the handlers. SIGUSR1 is taken over from its
// default action and from SIG_IGN (tdistrun starts its workers so, to cover
// them until here); SIGTERM from its default action only, and only while a
// dump destination is set.
void install_signal_dumps();

}  // namespace tdist::trace
