#!/bin/sh
# A test trainer that speaks the runner contract without PyTorch: its
# "checkpoint" is a text file holding the iterations trained so far.
# Optional: TRAINER_STEP (seconds per iteration, default 0.05), TRAINER_LOG
# (start/end lines, to check that no job ever runs twice at once),
# TRAINER_ARGS (its arguments, one per line), TRAINER_FAIL (exit 3 at once).
set -u
[ -n "${TRAINER_FAIL:-}" ] && exit 3
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
[ -n "$log" ] && echo "start $CELLSCHED_JOB_ID $CELLSCHED_COPY $$ $(date +%s.%N)" >> "$log"
n=0
while [ "$stop" = 0 ] && [ "$n" -lt "$CELLSCHED_ITERATIONS" ]; do
  sleep "$step"
  n=$((n + 1))
  if [ "$RANK" = 0 ]; then
    echo $((start + n)) > "$CELLSCHED_CKPT_OUT.tmp" && mv "$CELLSCHED_CKPT_OUT.tmp" "$CELLSCHED_CKPT_OUT" &&
      echo "iterations=$n" >> "$CELLSCHED_PROGRESS"
  fi
done
[ -n "$log" ] && echo "end $CELLSCHED_JOB_ID $CELLSCHED_COPY $$ $(date +%s.%N)" >> "$log"
exit 0
