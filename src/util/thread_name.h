// Names for the threads tdist starts ("tdist-progress", "tdist-accept", ...),
// so that `top -H`, `ps -L`, gdb and perf show whose thread is whose.
#pragma once

namespace tdist {

// Names the calling thread. Linux keeps 15 characters; longer names are cut
// there. Failing to name a thread changes nothing else, so it is ignored.
void name_this_thread(const char* name);

}  // namespace tdist
