#!/usr/bin/env bash
# Parallel worktrees that reuse this checkout's finished build (for helpers working side by side
# on a 2-core machine, where a fresh full build per worktree costs ~15 minutes each).
#
#   tools/worktree.sh add NAME         git worktree ../NAME on a new branch NAME from HEAD, its
#                                      sources dated in the past, this checkout's build/ copied in
#   tools/worktree.sh run NAME CMD...  runs CMD in ../NAME seen at this checkout's path (a private
#                                      mount namespace, needs root), with this checkout's .venv:
#                                      the copied build's absolute paths then hold, and ninja
#                                      rebuilds only what the worktree changed
#
# git does not work inside `run` (the worktree's .git file names the main checkout's path): run
# git in ../NAME directly. Build and test through `run`, e.g.
#   tools/worktree.sh run h1 bash scripts/build.sh lmtrain lmtrain_tests lmtrain_unit_tests
# Edit the worktree only after `add` has copied the build: an object copied after an edit is
# newer than the edited source, and ninja would keep it (seen 2026-11-28).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}; name=${2:-}
[[ -n "$cmd" && -n "$name" ]] || { sed -n 2,18p "$0" >&2; exit 2; }
wt=$(dirname "$root")/$name
case "$cmd" in
  add)
    git -C "$root" worktree add -b "$name" "$wt" HEAD
    (cd "$wt" && git ls-files -z | xargs -0 touch -h -d '2026-01-01 00:00')
    [[ -d "$root/build" ]] && cp -a "$root/build" "$wt/build"
    echo "worktree $wt ready (branch $name); build and test with: $0 run $name CMD..."
    ;;
  run)
    shift 2
    [[ -d "$wt" ]] || { echo "worktree.sh: no $wt" >&2; exit 2; }
    mkdir -p "$wt/.venv"
    inner=$(printf '%q ' "$@")
    exec unshare -m bash -c "mount --make-rprivate / && mount --bind '$root/.venv' '$wt/.venv' \
      && mount --rbind '$wt' '$root' && cd '$root' && $inner"
    ;;
  *) sed -n 2,18p "$0" >&2; exit 2 ;;
esac
