#!/bin/bash
# tdist-bench against Open MPI (with and without its hierarchical HAN
# component) and Gloo (torch 2.x, scripts/torch_venv.sh) on one emulated cluster (scripts/cluster.sh:
# hosts as network namespaces with their own hostnames, links shaped with tc),
# in one run: for each collective and repeat, each library in turn, so that
# all meet the machine in the same state; each cell is the median of the
# repeats. The table gives time, busbw, the link limit and how many buffers
# each host put on its link per operation.
#
#   bench/cluster.sh [--hosts H] [--per-host N] [--rate RATE] [-t COLLS] [--sizes LIST]
#                    [--peers LIST] [--repeat K] [-n ITERS] [-w WARMUP] [--build-dir DIR]
#
#   --hosts H, --per-host N   the cluster: H hosts of N ranks [2, 2]
#   --rate RATE               each host's link, both ways (tc tbf) [2gbit]
#   -t COLLS                  all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,reduce [all_reduce]
#   --sizes LIST              [8,64K,1M,16M]
#   --peers LIST              any of tdist,ompi,han,gloo [tdist,ompi,han,gloo]
#   --repeat K                runs of each library, alternating [3]
#   -n, -w                    iterations and warm-up per size [20, 3] (capped at 2 GiB per size)
#   --build-dir DIR           holds bin/tdist-bench, bin/tdistrun and mpi_bench/mpi_bench
#                             (bench/compare.sh builds all three there) [build-compare]
#
# Open MPI: shared memory (vader) within a host, TCP across, one mpirun in host
# 0's namespace that starts the other hosts' daemons through this script's
# agent; "han" adds --mca coll_han_priority 100. Gloo: GLOO_SOCKET_IFNAME=eth0.
#
# Bytes per host link: each library runs each size again with 5 and then 25
# iterations; the difference of what the busiest host sent on its link,
# divided by 20, is one operation's (start-up traffic cancels out). The
# optimum per operation, in buffers of `size`: all_reduce 2(H-1)/H,
# all_gather and reduce_scatter (H-1)/H, broadcast and reduce 1, all_to_all
# N(H-1)/H. The link limit is that many bytes at the link's rate.
# Needs root (network namespaces).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
cluster=$repo/scripts/cluster.sh

hosts=2 per_host=2 rate=2gbit colls=all_reduce sizes=8,64K,1M,16M peers=tdist,ompi,han,gloo repeat=3
iters=20 warmup=3 build=build-compare
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --per-host) per_host=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    -t) colls=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "bench/cluster.sh: $*" >&2; exit 2; }
why=$("$cluster" check) || die "$why"
# Absolute, so that a --build-dir given either way reaches every host's shell alike.
[[ $build == /* ]] || build=$repo/$build
tbench=$build/bin/tdist-bench tdistrun=$build/bin/tdistrun mpi_bin=$build/mpi_bench/mpi_bench
[ -x "$tbench" ] && [ -x "$tdistrun" ] || die "no $tbench or $tdistrun (bench/compare.sh --quick builds them)"
if [[ ,$peers, =~ ,(ompi|han), ]]; then
  [ -x "$mpi_bin" ] || die "no $mpi_bin (bench/compare.sh builds it), or leave ompi and han out of --peers"
fi

name=b$$
out=$(mktemp -d /tmp/tdist-cluster-bench.XXXXXX)
agent=$out/agent.sh
cleanup() { "$cluster" down "$name"; }
trap cleanup EXIT
"$cluster" up "$name" "$hosts" --rate "$rate" || die "could not make the cluster"
master=$("$cluster" addr "$name" 0)
# Every tdist job of the run proves itself with one token (nodes launched apart must share one).
TDIST_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export TDIST_JOB_TOKEN
n=$((hosts * per_host))

# Open MPI starts a host's daemon with "AGENT <address> <command>": run it in that host.
cat >"$agent" <<EOF
#!/bin/bash
host=\$1; shift
while [ "\${1:-}" != "\${1#-}" ]; do shift; done  # options meant for ssh
exec "$cluster" exec "$name" \$(( \${host##*.} - 1 )) sh -c "\$*"
EOF
chmod +x "$agent"
hostfile=$out/hostfile
for ((h = 0; h < hosts; h++)); do echo "$("$cluster" addr "$name" $h) slots=$per_host"; done >"$hostfile"

# run PEER COLL SIZES ITERS WARMUP: rank 0's CSV on stdout.
run() {
  # Below the kernel's ephemeral ports (32768 up): a port that an earlier connection
  # of this host still holds as its local end cannot be listened on.
  local peer=$1 coll=$2 szs=$3 it=$4 wu=$5 port=$((20000 + RANDOM % 12000)) h
  local place=out
  case $coll in all_reduce|broadcast|reduce) place=in ;; esac
  local args=(-t "$coll" --sizes "$szs" -n "$it" -w "$wu")
  case $peer in
    tdist)
      for ((h = hosts - 1; h >= 0; h--)); do
        local cmd=("$cluster" exec "$name" $h env TDIST_SOCKET_IFNAME=eth0 "$tdistrun" --no-python --nnodes "$hosts"
          --node-rank $h --nproc-per-node "$per_host" --master-addr "$master" --master-port $port --no-prefix
          "$tbench" "${args[@]}" --place "$place" -C 2G --csv)
        if ((h > 0)); then "${cmd[@]}" >/dev/null 2>>"$out/errors" & else "${cmd[@]}" 2>>"$out/errors"; fi
      done
      wait
      ;;
    ompi|han)
      local extra=()
      [ "$peer" = han ] && extra=(--mca coll_han_priority 100)
      "$cluster" exec "$name" 0 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun \
        --allow-run-as-root --oversubscribe --bind-to none -np $n --hostfile "$hostfile" --map-by slot \
        --mca plm_rsh_agent "$agent" --mca btl self,vader,tcp --mca mpi_yield_when_idle 1 \
        --mca btl_vader_single_copy_mechanism none --mca btl_tcp_if_include eth0 \
        --mca oob_tcp_if_include eth0 ${extra[@]+"${extra[@]}"} "$mpi_bin" "${args[@]}" --place "$place" \
        -C 2G --csv 2>>"$out/errors"
      ;;
    gloo)
      : "${torch_python:=$(bash "$repo/scripts/torch_venv.sh" | tail -n 1)}"
      for ((r = n - 1; r >= 0; r--)); do
        local cmd=("$cluster" exec "$name" $((r / per_host)) env RANK=$r WORLD_SIZE=$n MASTER_ADDR="$master"
          MASTER_PORT=$port GLOO_SOCKET_IFNAME=eth0 "$torch_python" "$repo/bench/gloo_bench.py" "${args[@]}" --cap 2G)
        if ((r > 0)); then "${cmd[@]}" >/dev/null 2>>"$out/errors" & else "${cmd[@]}" 2>>"$out/errors"; fi
      done
      wait
      ;;
  esac
}

# What each host has sent on its link so far, one number per host.
sent_by_host() {
  local h
  for ((h = 0; h < hosts; h++)); do ip netns exec "tdc-$name-h$h" cat /sys/class/net/eth0/statistics/tx_bytes; done
}
# What the busiest host sent during `run ARGS...`.
busiest_during() {
  local -a before after
  mapfile -t before < <(sent_by_host)
  run "$@" >/dev/null
  mapfile -t after < <(sent_by_host)
  local h most=0
  for ((h = 0; h < hosts; h++)); do ((after[h] - before[h] > most)) && most=$((after[h] - before[h])); done
  echo "$most"
}
# Bytes per operation on the busiest host's link.
bytes_per_op() {  # PEER COLL SIZE
  local short long
  short=$(busiest_during "$1" "$2" "$3" 5 0)
  long=$(busiest_during "$1" "$2" "$3" 25 0)
  echo $(((long - short) / 20))
}

echo "cluster: $hosts hosts x $per_host ranks, links of $rate; peers $peers; $repeat repeats; raw output in $out"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for coll in ${colls//,/ }; do
  for ((k = 1; k <= repeat; k++)); do
    for peer in ${peers//,/ }; do run "$peer" "$coll" "$sizes" "$iters" "$warmup" >"$out/$coll.$peer.$k.csv"; done
  done
  for peer in ${peers//,/ }; do
    for s in ${sizes//,/ }; do echo "$peer,$s,$(bytes_per_op "$peer" "$coll" "$s")"; done
  done >"$out/$coll.bytes.csv"
done

/usr/bin/python3 - "$out" "$colls" "$peers" "$repeat" "$hosts" "$per_host" "$rate" <<'EOF'
import csv, statistics, sys
out, colls, peers, repeat, H, N, rate = sys.argv[1:]
H, N, repeat, peers = int(H), int(N), int(repeat), peers.split(',')
units = {'k': 1e3, 'm': 1e6, 'g': 1e9}
r = rate.lower().replace('bit', '')
link = float(r[:-1]) * units[r[-1]] / 8 if r[-1] in units else float(r) / 8  # bytes/s
optimum = {'all_reduce': 2 * (H - 1) / H, 'all_gather': (H - 1) / H, 'reduce_scatter': (H - 1) / H,
           'broadcast': 1, 'reduce': 1, 'all_to_all': N * (H - 1) / H}
def size_text(b):
    for u, f in (('G', 1 << 30), ('M', 1 << 20), ('K', 1 << 10)):
        if b >= f and b % f == 0: return f'{b // f}{u}'
    return str(b)
def parse_size(t):
    f = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}
    return int(t[:-1]) * f[t[-1]] if t[-1] in f else int(t)
for coll in colls.split(','):
    times = {}
    for p in peers:
        for k in range(1, repeat + 1):
            try:
                for row in csv.DictReader(open(f'{out}/{coll}.{p}.{k}.csv')):
                    t = row['ip_time_us'] or row['oop_time_us']
                    if t: times.setdefault((p, int(row['size'])), []).append(float(t))
            except (FileNotFoundError, KeyError):
                pass
    sent = {}
    for line in open(f'{out}/{coll}.bytes.csv'):
        p, s, b = line.strip().split(',')
        size = parse_size(s)
        if coll in ('all_gather', 'reduce_scatter', 'all_to_all'):
            size -= size % (4 * H * N)  # as tdist-bench rounds: whole float32 elements per rank
        sent[(p, size)] = int(b)
    print(f'\n{coll} on {H} hosts x {N} ranks, {rate} links: median time (us) of {repeat}; '
          f'"limit": the optimal {optimum[coll]:g} buffers per host link at the link rate; '
          f'"sent": buffers the busiest host put on its link per operation')
    head = f'{"size":>6} {"limit":>9}'
    for p in peers: head += f' {p:>9} {p + "/lim":>9} {"sent":>5}'
    print(head)
    for size in sorted({s for (_, s) in times} | {s for (_, s) in sent}):
        lim = optimum[coll] * size / link * 1e6
        line = f'{size_text(size):>6} {lim:9.1f}'
        for p in peers:
            v = times.get((p, size))
            med = statistics.median(v) if v else None
            line += f' {med:9.1f}' if med else f' {"-":>9}'
            line += f' {med / lim:9.2f}' if med and lim > 0 else f' {"-":>9}'
            b = sent.get((p, size))
            line += f' {b / size:5.2f}' if b is not None and size > 0 else f' {"-":>5}'
        print(line)
EOF
