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
// A rank's home is core LOCAL_RANK (counted among the CPUs it may use). A
// waiting thread that finds itself elsewhere moves back, at most once per
// 10 ms, so that it never fights the scheduler hard (another busy thread on
// the home core costs at most one move per 10 ms). Its affinity
// is left as it was: the move sets a one-core mask and restores the old one.
// No home (nothing ever moves) when LOCAL_RANK or LOCAL_WORLD_SIZE is unset,
// when the local ranks outnumber the CPUs, when the process was given fewer
// CPUs than the machine has (someone placed it: a launcher, taskset, a
// cpuset), or with TDIST_HOME_CPU=0.
#pragma once

namespace tdist {

// The calling process's home CPU, or -1 for none (decided once per process).
int home_cpu();

// Moves the calling thread to the home CPU if it is elsewhere (cheap when it
// is home, or when there is no home).
void return_home();

}  // namespace tdist
