// Keeping a rank's waiting thread on a core of its own.
//
// With no more local ranks than cores, the kernel still sometimes leaves two
// ranks on one core while another core idles: a wake-up places the woken rank
// next to its waker, and the load balancer does not move a thread that ran a
// moment ago, which a rank that polls always did. Both then poll on one core
// for the rest of the run, at about twice the time per call
// (docs/tuning_log.md: Placement). Open MPI's ranks never sleep, so the
// kernel never places them this way.
//
// A rank's home is core LOCAL_RANK (counted among the CPUs it may use; under
// mpirun, where LOCAL_RANK is unset, the MPI launcher's local rank:
// util/local_placement.h). A
// waiting thread that finds itself elsewhere moves back, at most once per
// 10 ms, so that it never fights the scheduler hard (another busy thread on
// the home core costs at most one move per 10 ms). Its affinity
// is left as it was: the move sets a one-core mask and restores the old one.
// No home (nothing ever moves) when no launcher said the local rank and size,
// when the local ranks outnumber the CPUs, when the process was given fewer
// CPUs than the machine has (someone placed it: a launcher, taskset, a
// cpuset), or with TDIST_HOME_CPU=0.
//
// Hosts as the ranks see them may share one machine (network namespaces,
// containers): each host's local rank 0 would then call the same core home,
// and two ranks that could each have a core would share one, at about three
// times the time per small call (docs/tuning_log.md: Placement). A
// transport that finds the job's ranks on this machine spread over several
// hosts places this rank among all of them instead (place_on_machine).
#pragma once

#include <vector>

namespace tdist {

// The calling process's home CPU, or -1 for none (decided once per process,
// unless place_on_machine changes it).
int home_cpu();

// This rank is the `index`-th of `count` ranks of the job on this machine,
// which lie on several hosts as the ranks see them: its home becomes the
// index-th allowed CPU, or none where the ranks outnumber the CPUs. Under
// the same conditions as the home itself (TDIST_HOME_CPU, a launcher's local
// rank and size, nobody restricted the process); the first call wins
// (the default group's transport, made first, sees the most ranks).
void place_on_machine(int index, int count);

// The count place_on_machine was given (whether or not it gave a home), else
// 0: the ranks that share this machine's cores, for the waits that spin only
// while every rank can have a core (with 2 emulated hosts of 2 ranks on 2
// cores, each host alone would count 2).
int ranks_on_machine();

// The rule both follow: the `index`-th of `allowed` CPUs for a rank among
// `count`, or -1 where the ranks outnumber them or the process was given
// fewer than the `online` CPUs (someone placed it).
int pick_home(long long index, long long count, const std::vector<int>& allowed, long online);

// Moves the calling thread to the home CPU if it is elsewhere (cheap when it
// is home, or when there is no home). Returns the CPU the thread is on then,
// as sched_getcpu() (a caller that wants it too asks once).
int return_home();

}  // namespace tdist
