#!/usr/bin/env bash
# tdist-bench against Open MPI on this machine, in one run, side by side.
#
#   bench/compare.sh [--quick] [options]
#
# Installs Open MPI (Debian: openmpi-bin libopenmpi-dev) and the build tools when
# they are missing (as root), builds tdist-bench and tdistrun (CMake, Release) and
# bench/mpi_bench.cpp (mpicxx -O2; it shares tools/tdist-bench's options, sweep,
# timing, checks and output, so both measure identically), then runs both on the
# same sizes for each scenario (one collective at a time, tdist then MPI, so that
# both meet the machine in the same state; with --repeat K each pair runs K
# times, alternating, and each cell is the median of the K) and prints one
# table per scenario:
#   a  2 ranks, default transports: tdist picks (shared memory within a host);
#      Open MPI's default (the vader shared-memory BTL)
#   b  4 ranks on this machine's cores (oversubscribed on a 2-core machine)
#   c  TCP only, 2 ranks: TDIST_SHM=0 against mpirun --mca btl tcp,self
#   mpi  2 ranks, tdist-bench --backend mpi under the same mpirun as the MPI
#      benchmark, both at MPI_THREAD_MULTIPLE (the level the backend asks
#      for): what tdist's mpi backend costs over calling MPI directly
#      (scenario a beside it compares the tdist backend with the same MPI)
# Nothing is pinned: tdistrun does not bind, and mpirun gets --bind-to none (Open
# MPI would otherwise bind each rank to a core when there are at most 2).
#
# Compared columns: all_reduce, broadcast and reduce in-place (tdist's API is
# in-place; MPI with MPI_IN_PLACE; MPI_Bcast is in-place by nature), the others
# out-of-place (separate send and receive buffers in both). Each library measures
# with the same sizes, warm-up, barrier and iterations; time is the slowest rank's
# mean per operation; busbw uses nccl-tests' factors. "t/M" columns are tdist
# divided by MPI: for busbw above 1 means tdist is faster, for time below 1.
#
# Open MPI's shared-memory single-copy path (CMA, process_vm_readv) needs ptrace
# permission between the ranks, which some containers deny. Before the shared-
# memory scenarios a 1 MiB ping-pong probes it; when it fails the MPI runs get
# --mca btl_vader_single_copy_mechanism none (and the header says so). Force
# either way with --mpi-cma yes|no.
#
# Options:
#   --quick               sizes 8,512,8K,64K,256K,1M,4M (default: -b 8 -e 256M -f 2)
#   -t, --colls LIST      collectives, comma-separated, or all [all]
#   -b, -e, -f SIZE/F     sweep (as tdist-bench: suffixes K, M, G)
#   --sizes LIST          explicit sizes, e.g. 8,64K,1M
#   -n, -w N              iterations and warm-up iterations [20, 5] (big sizes run
#                         fewer: size x iterations <= 1G, see tdist-bench --help)
#   -d TYPE, -o OP        datatype and reduction [float, sum]
#   --repeat K            run each tdist/MPI pair K times, alternating, and
#                         report per size the run with the median time (this
#                         machine's run-to-run spread is often 1.5x for both
#                         libraries: one run decides little) [3]
#   --scenarios LIST      any of a,b,c,mpi [a,b,c]
#   --np-many N           ranks of scenario b [4]
#   --check               also verify every result (#wrong must be 0)
#   --build-dir DIR       where tdist is built [build-compare]
#   --no-build            use the binaries already in --build-dir
#   --mpi-cma yes|no|auto Open MPI's single-copy mechanism [auto]
#   --out DIR             keep the raw CSV output there [DIR/compare-<time>]
#   --wait-quiet S        before each scenario wait up to S seconds for the CPUs to
#                         be at least 75% idle (other work on the machine skews
#                         every number; the idle share is printed either way) [0]
#   -h, --help            this text
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

quick=0
colls=all
sweep=(-b 8 -e 256M -f 2)
common=()
scenarios=a,b,c
np_many=4
check=()
build=build-compare
do_build=1
mpi_cma=auto
outdir=
wait_quiet=0
repeat=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1; sweep=(--sizes 8,512,8K,64K,256K,1M,4M) ;;
    -t|--colls) colls=$2; shift ;;
    -b|-e|-f) custom_sweep+=("$1" "$2"); shift ;;
    --sizes) sweep=(--sizes "$2"); shift ;;
    -n|-w|-d|-o) common+=("$1" "$2"); shift ;;
    --scenarios) scenarios=$2; shift ;;
    --np-many) np_many=$2; shift ;;
    --check|-c) check=(-c) ;;
    --build-dir) build=$2; shift ;;
    --no-build) do_build=0 ;;
    --mpi-cma) mpi_cma=$2; shift ;;
    --out) outdir=$2; shift ;;
    --wait-quiet) wait_quiet=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ -n ${custom_sweep+x} ]]; then
  # -b/-e/-f given: they replace the default sweep (or --quick's list).
  sweep=(-b 8 -e 256M -f 2)
  for ((i = 0; i < ${#custom_sweep[@]}; i += 2)); do
    case ${custom_sweep[i]} in
      -b) sweep[1]=${custom_sweep[i + 1]} ;;
      -e) sweep[3]=${custom_sweep[i + 1]} ;;
      -f) sweep[5]=${custom_sweep[i + 1]} ;;
    esac
  done
fi

[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --repeat needs a positive count, not '$repeat'" >&2; exit 2; }

say() { printf '%s\n' "$*"; }
# Percent of CPU time idle over the next second (from /proc/stat).
idle_pct() {
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  local idle=$(((b[4] + b[5]) - (a[4] + a[5]))) total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  echo $((total > 0 ? 100 * idle / total : 100))
}
# Waits up to $wait_quiet seconds for >= 75% idle; prints the last measurement.
quiet_point() {
  local start=$SECONDS pct
  pct=$(idle_pct)
  while [[ $pct -lt 75 && $((SECONDS - start)) -lt $wait_quiet ]]; do pct=$(idle_pct); done
  echo "$pct"
}
die() { printf 'compare.sh: %s\n' "$*" >&2; exit 1; }

# ---- dependencies -------------------------------------------------------------------------
missing=()
command -v mpicxx >/dev/null || missing+=(libopenmpi-dev)
command -v mpirun >/dev/null || missing+=(openmpi-bin)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v g++ >/dev/null || missing+=(g++)
if [[ ${#missing[@]} -gt 0 ]]; then
  [[ $(id -u) -eq 0 ]] || die "missing ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root"
  say "=== apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
fi

# ---- build -----------------------------------------------------------------------------------
mpi_bin=$build/mpi_bench/mpi_bench
core_sources=(tools/tdist-bench/{bench_types,buffers,driver,options,output,timing}.cpp)
if [[ $do_build -eq 1 ]]; then
  cfg=()
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cfg=(-G Ninja -DTDIST_BUILD_TESTS=OFF -DTDIST_BUILD_EXAMPLES=OFF)
  fi
  say "=== build tdist-bench and tdistrun in $build (Release)"
  cmake -S . -B "$build" ${cfg[@]+"${cfg[@]}"} -DCMAKE_BUILD_TYPE=Release >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; die "cmake configure failed"; }
  rm -f "$build.configure.log"
  cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target tdist-bench tdistrun >/dev/null 2>"$build.build.log" ||
    { cat "$build.build.log"; die "cmake build failed"; }
  rm -f "$build.build.log"
  mkdir -p "$build/mpi_bench"
  rebuild=0
  [[ -x $mpi_bin ]] || rebuild=1
  for f in bench/mpi_bench.cpp tools/tdist-bench/*.h "${core_sources[@]}"; do
    [[ $f -nt $mpi_bin ]] && rebuild=1
  done
  if [[ $rebuild -eq 1 ]]; then
    say "=== build $mpi_bin (mpicxx -O2)"
    mpicxx -O2 -std=c++20 -Wall -Wextra -Itools/tdist-bench bench/mpi_bench.cpp "${core_sources[@]}" -o "$mpi_bin" ||
      die "mpicxx failed"
  fi
fi
tdistrun=$build/bin/tdistrun
tbench=$build/bin/tdist-bench
for b in "$tdistrun" "$tbench" "$mpi_bin"; do [[ -x $b ]] || die "$b is missing (build it, or drop --no-build)"; done

# ---- running -------------------------------------------------------------------------------
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
mpirun_base=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
outdir=${outdir:-$build/compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$outdir"

all_colls=(all_reduce broadcast reduce all_gather reduce_scatter all_to_all sendrecv)
if [[ $colls == all ]]; then
  want=("${all_colls[@]}")
else
  IFS=, read -r -a want <<<"$colls"
fi
for c in "${want[@]}"; do
  case $c in
    all_reduce|broadcast|reduce|all_gather|reduce_scatter|all_to_all|sendrecv) ;;
    *) die "unknown collective $c" ;;
  esac
done

# merge_runs OUT CSV...: one row per (collective, size): the run whose time
# (of the placement measured) is the median, with #wrong the largest of any run.
merge_runs() {
  local out=$1
  shift
  awk -F, -v OFS=, '
    /^library,/ { next }
    {
      key = $2 SUBSEP $3; ti = ($15 != "") ? 15 : 11; wi = ti + 3
      if (!(key in cnt)) order[++n] = key
      c = ++cnt[key]; line[key, c] = $0; tm[key, c] = $ti + 0; col[key] = wi
      if ($wi ~ /^[0-9]+$/ && (!(key in wmax) || $wi + 0 > wmax[key])) wmax[key] = $wi + 0
    }
    END {
      for (i = 1; i <= n; i++) {
        key = order[i]; m = cnt[key]
        for (a = 1; a <= m; a++) idx[a] = a
        for (a = 2; a <= m; a++) {  # insertion sort by time: m is small
          v = idx[a]; b = a - 1
          while (b >= 1 && tm[key, idx[b]] > tm[key, v]) { idx[b + 1] = idx[b]; b-- }
          idx[b + 1] = v
        }
        $0 = line[key, idx[int((m + 1) / 2)]]
        if (key in wmax) $(col[key]) = wmax[key]
        print
      }
    }' "$@" >"$out"
}

# run_pair NAME NP TDIST_ENV MPI_ARGS...: both benchmarks into $outdir/NAME.{tdist,mpi}.csv,
# (TDIST_ENV "backend=mpi": tdist-bench --backend mpi under the MPI run's mpirun)
# one collective at a time, tdist then MPI ($repeat times), so that both see
# the machine in the same state.
run_pair() {
  local name=$1 np=$2 tenv=$3
  shift 3
  local mpi_extra=("$@") lib c place rep
  : >"$outdir/$name.tdist.csv"
  : >"$outdir/$name.mpi.csv"
  for c in "${want[@]}"; do
    case $c in all_reduce|broadcast|reduce) place=in ;; *) place=out ;; esac
    local args=(-t "$c" --place "$place" "${sweep[@]}" ${common[@]+"${common[@]}"} ${check[@]+"${check[@]}"} --csv)
    for ((rep = 1; rep <= repeat; rep++)); do
      for lib in tdist mpi; do
        local cmd
        if [[ $lib == tdist && $tenv == backend=mpi ]]; then
          cmd=("${mpirun_base[@]}" -np "$np" ${mpi_extra[@]+"${mpi_extra[@]}"} "$tbench" --backend mpi "${args[@]}")
        elif [[ $lib == tdist ]]; then
          cmd=(env $tenv "$tdistrun" --no-python --nproc-per-node "$np" --standalone --no-prefix "$tbench" "${args[@]}")
        else
          cmd=("${mpirun_base[@]}" -np "$np" ${mpi_extra[@]+"${mpi_extra[@]}"} "$mpi_bin" "${args[@]}")
        fi
        [[ $rep -eq 1 ]] && echo "${cmd[*]}" >>"$outdir/$name.commands"
        local base="$outdir/$name.$lib.$c.run$rep"
        "${cmd[@]}" >"$base.csv" 2>"$base.err"
        local rc=$?
        if [[ $rc -ne 0 ]]; then
          say "!!! $lib $c exited with status $rc: ${cmd[*]}"
          tail -n 15 "$base.err" | sed 's/^/!!!   /'
        fi
      done
    done
    for lib in tdist mpi; do
      merge_runs "$outdir/$name.$lib.$c.csv" "$outdir/$name.$lib.$c".run*.csv
      cat "$outdir/$name.$lib.$c.csv" >>"$outdir/$name.$lib.csv"
    done
  done
}

# print_table NAME: the side-by-side table and a summary per collective.
print_table() {
  awk -F, '
    # pick the measured placement of a row: in-place columns 15-18, out-of-place 11-14
    function load(line, arr,   f) {
      split(line, f, ",")
      if (f[15] != "") { arr["t"] = f[15]; arr["bw"] = f[17]; arr["w"] = f[18]; arr["p"] = "in" }
      else { arr["t"] = f[11]; arr["bw"] = f[13]; arr["w"] = f[14]; arr["p"] = "out" }
    }
    FILENAME == tfile { key = $2 SUBSEP $3; tline[key] = $0; if (!(key in seen)) { order[++n] = key; seen[key] = 1 }; next }
    { key = $2 SUBSEP $3; mline[key] = $0; if (!(key in seen)) { order[++n] = key; seen[key] = 1 } }
    END {
      printf "%-15s %10s %4s %10s %10s %8s %11s %11s %8s%s\n", "collective", "size(B)", "col", "tdist us", "MPI us",
             "t/M time", "tdist busbw", "MPI busbw", "t/M bw", (check ? "  #wrong t/M" : "")
      prev = ""
      for (i = 1; i <= n; i++) {
        split(order[i], k, SUBSEP); c = k[1]; s = k[2]
        delete T; delete M
        ht = (order[i] in tline); hm = (order[i] in mline)
        if (ht) load(tline[order[i]], T)
        if (hm) load(mline[order[i]], M)
        if (prev != "" && c != prev) print ""
        prev = c
        tt = ht ? sprintf("%10.2f", T["t"]) : sprintf("%10s", "-")
        mt = hm ? sprintf("%10.2f", M["t"]) : sprintf("%10s", "-")
        tb = ht ? sprintf("%11.3f", T["bw"]) : sprintf("%11s", "-")
        mb = hm ? sprintf("%11.3f", M["bw"]) : sprintf("%11s", "-")
        rt = (ht && hm && M["t"] > 0) ? sprintf("%8.2f", T["t"] / M["t"]) : sprintf("%8s", "-")
        rb = (ht && hm && M["bw"] > 0) ? sprintf("%8.2f", T["bw"] / M["bw"]) : sprintf("%8s", "-")
        place = ht ? T["p"] : (hm ? M["p"] : "?")
        wr = check ? sprintf("  %5s %5s", ht ? T["w"] : "-", hm ? M["w"] : "-") : ""
        printf "%-15s %10s %4s %s %s %s %s %s %s%s\n", c, s, place, tt, mt, rt, tb, mb, rb, wr
        if (ht && hm && M["bw"] > 0 && T["bw"] > 0 && s + 0 >= 65536 - 64) {  # sizes rounded to world_size chunks count too
          r = T["bw"] / M["bw"]; cnt[c]++; lsum[c] += log(r)
          if (!(c in mn) || r < mn[c]) mn[c] = r
          if (s + 0 >= 1048576 - 64) { if (!(c in mn1) || r < mn1[c]) mn1[c] = r }
        }
        # latency: the smallest non-empty size
        if (ht && hm && s + 0 > 0 && M["t"] > 0 && !(c in small)) small[c] = sprintf("%s B: tdist %.2f us, MPI %.2f us (time t/M %.2f)", s, T["t"], M["t"], T["t"] / M["t"])
        if (!(c in listed)) { listed[c] = 1; clist[++nc] = c }
      }
      print ""
      print "summary (t/M busbw: >1 tdist faster; t/M time: <1 tdist faster)"
      for (j = 1; j <= nc; j++) {
        c = clist[j]
        line = sprintf("  %-15s", c)
        if (cnt[c] > 0) line = line sprintf(" busbw t/M from 64K: min %.2f geomean %.2f", mn[c], exp(lsum[c] / cnt[c]))
        if (c in mn1) line = line sprintf("; from 1M: min %.2f", mn1[c])
        if (c in small) line = line "; " small[c]
        print line
      }
    }' check="${#check[@]}" tfile="$outdir/$1.tdist.csv" "$outdir/$1.tdist.csv" "$outdir/$1.mpi.csv"
}

# ---- header --------------------------------------------------------------------------------
cpu=$(awk -F: '/model name/ { sub(/^ +/, "", $2); print $2; exit }' /proc/cpuinfo 2>/dev/null)
ompi=$(mpirun --version 2>/dev/null | head -1)
rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(git -C "$repo" status --porcelain 2>/dev/null | head -1) ]]; then rev="$rev + local changes"; fi
say ""
say "=== tdist-bench vs Open MPI, $(date '+%Y-%m-%d %H:%M:%S %Z')"
say "host $(hostname), $(nproc) cores ($cpu), $(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) memory"
say "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $ompi; tdist $rev"
say "sizes: ${sweep[*]}; ${common[*]:-float sum, -w 5 -n 20}; raw CSV in $outdir"
say "each cell: the median of $repeat runs, tdist and MPI alternating"

# ---- CMA probe -----------------------------------------------------------------------------
shm_mpi=()
case $mpi_cma in
  no) shm_mpi=(--mca btl_vader_single_copy_mechanism none); say "Open MPI: single copy (CMA) off (--mpi-cma no)" ;;
  yes) say "Open MPI: single copy (CMA) left on (--mpi-cma yes)" ;;
  *)
    probe_out=$("${mpirun_base[@]}" -np 2 "$mpi_bin" -t sendrecv --sizes 1M -w 1 -n 2 -c --csv 2>&1)
    if [[ $? -ne 0 ]] || grep -qiE 'process_vm_readv|single.copy|CMA|Read -1' <<<"$probe_out"; then
      shm_mpi=(--mca btl_vader_single_copy_mechanism none)
      say "Open MPI: the CMA probe failed, so btl_vader_single_copy_mechanism none"
    else
      say "Open MPI: the CMA probe passed; vader's default single copy (CMA) stays on"
    fi
    ;;
esac

# ---- scenarios -----------------------------------------------------------------------------
status=0
IFS=, read -r -a scen <<<"$scenarios"
for s in "${scen[@]}"; do
  idle_before=$(quiet_point)
  case $s in
    a) title="(a) 2 ranks, default transports (tdist: its choice, shared memory on one host; Open MPI: vader)"
       run_pair a 2 "" ${shm_mpi[@]+"${shm_mpi[@]}"} ;;
    b) title="(b) $np_many ranks on $(nproc) cores, default transports"
       run_pair b "$np_many" "" ${shm_mpi[@]+"${shm_mpi[@]}"} ;;
    c) title="(c) TCP only, 2 ranks: TDIST_SHM=0 vs mpirun --mca btl tcp,self"
       run_pair c 2 "TDIST_SHM=0" --mca btl tcp,self ;;
    mpi) title="(mpi) 2 ranks: tdist-bench --backend mpi vs the MPI benchmark, both under mpirun with MPI_THREAD_MULTIPLE (the wrapper's cost)"
       run_pair mpi 2 "backend=mpi" ${shm_mpi[@]+"${shm_mpi[@]}"} -x MPI_BENCH_THREAD_LEVEL=multiple ;;
    *) die "unknown scenario $s (a, b, c, mpi)" ;;
  esac
  say ""
  say "=== $title"
  say "    CPU idle before the runs: ${idle_before}%; after: $(idle_pct)%"
  say "    commands: $outdir/$s.commands"
  print_table "$s"
  if [[ ${#check[@]} -gt 0 ]] && awk -F, '($11 != "" && $14 != "0") || ($15 != "" && $18 != "0")' "$outdir/$s.tdist.csv" "$outdir/$s.mpi.csv" | grep -q .; then
    say "!!! wrong results in scenario $s"
    status=1
  fi
done
say ""
say "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
