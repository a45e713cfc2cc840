#!/bin/sh
# A test trainer that speaks the runner contract without PyTorch: its
# "checkpoint" is a text file holding the iterations trained so far.
# Optional: TRAINER_STEP (seconds per iteration, default 0.05), TRAINER_LOG
# (start/end lines, to check that no job ever runs twice at once),
# TRAINER_ARGS (its arguments, one per line), TRAINER_FAIL (exit 3 at once),
# TRAINER_DIE_AT=N with TRAINER_DIE_ONCE=FILE (once, while FILE does not
# exist: create it and SIGKILL itself between the commit of its N-th save and
# the rename), TRAINER_FAIL_RANK=R (rank R exits 3 after 0.5 s),
# TRAINER_NO_CKPT (progress lines without the checkpoint they commit),
# TRAINER_LEAK (leaves a `sleep 300` behind, its pid in $CELLSCHED_PROGRESS.leak),
# TRAINER_EXIT_DELAY (seconds between its last save and its exit, as an
# interpreter takes to shut down).
set -u
if [ -n "${TRAINER_LEAK:-}" ] && [ "$RANK" = 0 ]; then
  sleep 300 &
  echo $! > "$CELLSCHED_PROGRESS.leak"
fi
[ -n "${TRAINER_FAIL:-}" ] && exit 3
if [ "${TRAINER_FAIL_RANK:-x}" = "$RANK" ]; then sleep 0.5; exit 3; fi
if [ -n "${TRAINER_ARGS:-}" ]; then
  for a in "$@"; do printf '%s\n' "$a"; done > "$TRAINER_ARGS"
fi
step=${TRAINER_STEP:-0.05}
start=0
if [ -n "$CELLSCHED_CKPT_IN" ] && [ -f "$CELLSCHED_CKPT_IN" ]; then start=$(cat "$CELLSCHED_CKPT_IN"); fi
log=${TRAINER_LOG:-}
[ "$RANK" = 0 ] || log=
stop=0
trap 'stop=1' TERM HUP INT
# Times from /proc/uptime through builtins only: a child (`date`, even a
# $(...) subshell) would die of a SIGTERM sent to the group and leave a line
# without its time.
read -r up _ < /proc/uptime
[ -n "$log" ] && echo "start $CELLSCHED_JOB_ID $CELLSCHED_COPY $$ $up" >> "$log"
n=0
while [ "$stop" = 0 ] && [ "$n" -lt "$CELLSCHED_ITERATIONS" ]; do
  sleep "$step"
  n=$((n + 1))
  if [ "$RANK" = 0 ]; then
    # The contract's commit order: checkpoint to OUT.N.tmp, progress line (the
    # commit), rename. A SIGTERM to the group can kill `mv` after or before
    # its rename; the runner finishes a committed rename itself.
    if [ -n "${TRAINER_NO_CKPT:-}" ]; then echo "iterations=$n" >> "$CELLSCHED_PROGRESS"; continue; fi
    echo $((start + n)) > "$CELLSCHED_CKPT_OUT.$n.tmp" && echo "iterations=$n" >> "$CELLSCHED_PROGRESS" || continue
    if [ "$n" = "${TRAINER_DIE_AT:-}" ] && [ ! -e "$TRAINER_DIE_ONCE" ]; then
      : > "$TRAINER_DIE_ONCE" && kill -KILL $$
    fi
    mv "$CELLSCHED_CKPT_OUT.$n.tmp" "$CELLSCHED_CKPT_OUT"
  fi
done
[ "$stop" = 0 ] && sleep "${TRAINER_EXIT_DELAY:-0}"
read -r up _ < /proc/uptime
[ -n "$log" ] && echo "end $CELLSCHED_JOB_ID $CELLSCHED_COPY $$ $up" >> "$log"
exit 0
