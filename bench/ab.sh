#!/usr/bin/env bash
# Two builds of tdist against each other, in one session: did a change make
# anything slower?
#
#   bench/ab.sh --before DIR --after DIR [options]
#
# DIR is a build directory holding bin/tdist-bench and bin/tdistrun (build both
# the same way, e.g. -DCMAKE_BUILD_TYPE=Release). For each scenario, each
# repeat runs every collective with the before build and at once with the
# after build on the same sizes (so both meet the machine in the same state);
# each cell is the median over the repeats of after/before of such a pair:
# above 1 is slower. Cells more than --limit slower are marked "<-" and
# counted at the end.
#
# Scenarios (as bench/compare.sh):
#   a  2 ranks, default transports (shared memory within the host)
#   b  4 ranks (oversubscribed on a 2-core machine)
#   c  TCP only, 2 ranks (TDIST_SHM=0)
#
# Options:
#   --quick            sizes 8,512,8K,64K,256K,1M,4M (default: 8 to 64M, x4)
#   -t, --colls LIST   collectives [all_reduce,broadcast,reduce,all_gather,reduce_scatter,all_to_all,sendrecv]
#   --sizes LIST       explicit sizes
#   --repeat K         runs per build and scenario, alternating [3]
#   --scenarios LIST   any of a,b,c [a,b,c]
#   --limit F          the slowdown that counts as a regression [1.05]
#   -n, -w N           timed and warm-up iterations per size, as tdist-bench [20000, 200]
#   -C, --cap SIZE     sizes x iterations stay under SIZE (tdist-bench -C) [1G]: a
#                      larger cap gives large sizes more iterations, and less noise
#                      (tdist-bench's own default of 20 leaves one context switch
#                      in a small size's mean: runs of one build then differ by 2x)
#   -h, --help         this text
set -uo pipefail

iters=20000 warmup=200 cap=1G before="" after="" sizes="8,512,8K,64K,1M,4M,16M,64M" repeat=3 scenarios="a,b,c" limit=1.05
colls="all_reduce,broadcast,reduce,all_gather,reduce_scatter,all_to_all,sendrecv"
while [ $# -gt 0 ]; do
  case "$1" in
    --before) before=$2; shift 2 ;;
    --after) after=$2; shift 2 ;;
    --quick) sizes="8,512,8K,64K,256K,1M,4M"; shift ;;
    -t|--colls) colls=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --scenarios) scenarios=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -C|--cap) cap=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for d in "$before" "$after"; do
  if [ -z "$d" ] || [ ! -x "$d/bin/tdist-bench" ] || [ ! -x "$d/bin/tdistrun" ]; then
    echo "bench/ab.sh: --before and --after must name build directories with bin/tdist-bench and bin/tdistrun" >&2
    exit 2
  fi
done

out=$(mktemp -d /tmp/tdist-ab.XXXXXX)
echo "before: $before   after: $after   repeats: $repeat   raw CSV: $out"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

run_one() {  # label build scenario repeat collective
  local label=$1 dir=$2 sc=$3 k=$4 coll=$5 np=2 env=()
  case "$sc" in
    a) ;;
    b) np=4 ;;
    c) env=(TDIST_SHM=0) ;;
  esac
  local name="$out/$sc-$label-$k-$coll"
  env "${env[@]}" timeout 900 "$dir/bin/tdistrun" --no-python --no-prefix --nproc-per-node "$np" "$dir/bin/tdist-bench" \
    -t "$coll" --sizes "$sizes" -n "$iters" -w "$warmup" -C "$cap" --place both --csv > "$name.csv" 2> "$name.err"
}

# One collective at a time, the before build then the after build: the two
# runs of a pair are seconds apart, so the machine's slow swings (a 2-core VM's
# small-size times drift by 2x over minutes) hit both alike.
for sc in ${scenarios//,/ }; do
  for k in $(seq 1 "$repeat"); do
    for coll in ${colls//,/ }; do
      run_one before "$before" "$sc" "$k" "$coll" || echo "scenario $sc, repeat $k, $coll: the before build failed (see $out)"
      run_one after "$after" "$sc" "$k" "$coll" || echo "scenario $sc, repeat $k, $coll: the after build failed (see $out)"
    done
  done
done

/usr/bin/python3 - "$out" "$before" "$after" "$scenarios" "$limit" <<'EOF'
import csv, glob, os, statistics, sys
out, before, after, scenarios, limit = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(','), float(sys.argv[5])
names = {'a': '2 ranks, shared memory', 'b': '4 ranks', 'c': '2 ranks, TCP only'}
def load(sc, build):
    # (collective, size) -> {repeat: time}
    cells = {}
    for f in glob.glob(os.path.join(out, f'{sc}-{build}-*.csv')):
        k = os.path.basename(f)[len(f'{sc}-{build}-'):].split('-')[0]
        for row in csv.DictReader(open(f)):
            t = row.get('ip_time_us') or row.get('oop_time_us')
            if t:
                cells.setdefault((row['collective'], int(row['size'])), {})[k] = float(t)
    return cells
def ratio(b, a):
    # The median of the pairs' ratios: each pair ran back to back.
    pairs = [a[k] / b[k] for k in b if k in a and b[k] > 0]
    return statistics.median(pairs) if pairs else None
slower = total = 0
worst = (0, None)
for sc in scenarios:
    b, a = load(sc, 'before'), load(sc, 'after')
    colls = sorted({c for c, _ in b} | {c for c, _ in a})
    sizes = sorted({s for _, s in b} | {s for _, s in a})
    print(f'\nscenario {sc}: {names.get(sc, sc)}: after/before time, median of the pairs (above 1: slower)')
    print('size'.rjust(10) + ''.join(c[:14].rjust(15) for c in colls))
    for s in sizes:
        line = str(s).rjust(10)
        for c in colls:
            r = ratio(b[(c, s)], a[(c, s)]) if (c, s) in b and (c, s) in a else None
            if r is not None:
                total += 1
                mark = ' <-' if r > limit else '   '
                slower += r > limit
                if r > worst[0]: worst = (r, f'{sc} {c} {s} B')
                line += f'{r:12.3f}{mark}'
            else:
                line += 'n/a'.rjust(15)
        print(line)
print(f'\n{slower} of {total} cells more than {limit:.2f}x slower; worst {worst[0]:.3f} ({worst[1]})')
EOF
