#!/bin/bash
# docs_commands.sh SOURCE_DIR BUILD_DIR: runs every mpirun command of README.md and docs/*.md
# (lines of fenced code blocks whose command, after VAR=value words, is mpirun) word for word,
# as a reader would from the repository's root: `build/` is BUILD_DIR (a link in a temporary
# folder). Open MPI's variables that would excuse a missing --allow-run-as-root or
# --oversubscribe are cleared, so a command that fails as root, or with more ranks than cores,
# fails here. Exit 0: every command ran and exited 0.
set -uo pipefail
src=$1
build=$2

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdist-docs-mpirun.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ln -s "$build" "$tmp/build"

commands=()
for doc in "$src/README.md" "$src"/docs/*.md; do
  while IFS= read -r line; do
    commands+=("${doc#"$src"/}"$'\t'"$line")
  done < <(awk '/^```/ { inside = !inside; next }
                inside && /^([A-Za-z_][A-Za-z0-9_]*=[^ ]* +)*mpirun / { print }' "$doc")
done
[[ ${#commands[@]} -gt 0 ]] || { echo "docs_commands: no mpirun command found in README.md and docs/" >&2; exit 1; }

failed=0
for entry in "${commands[@]}"; do
  doc=${entry%%$'\t'*}
  cmd=${entry#*$'\t'}
  if [[ $cmd == *build/python* ]] && ! compgen -G "$build/python/tdist/_tdist.*so" >/dev/null; then
    echo "docs_commands: skipped (no Python module in this build): $cmd"
    continue
  fi
  echo "docs_commands: $doc: $cmd"
  out=$(cd "$tmp" && env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
          -u OMPI_MCA_rmaps_base_oversubscribe timeout --kill-after=10 120 bash -c "$cmd" 2>&1)
  rc=$?
  if [[ $rc -ne 0 ]]; then
    printf '%s\n' "$out" | tail -n 15
    echo "docs_commands: FAILED (exit $rc): $doc: $cmd" >&2
    failed=1
  fi
done
exit $failed
