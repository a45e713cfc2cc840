// The runner's side of the training-process contract (README "The runner
// contract"): the progress file, the checkpoint commit, and the job tracker's
// split of a job's remaining iterations over its gangs.
#pragma once

#include <string>
#include <vector>

#include "core/fork.h"

namespace cellsched::runner {

// The last complete `iterations=N` line of a progress file (-1 when none; a
// line still being written is ignored).
double read_progress(const std::string& path);

// Finishes a trainer's checkpoint commit. A trainer saves by writing
// `<ckpt_out>.<N>.tmp` in full, appending `iterations=N` to its progress file
// (the commit), then renaming the temporary to `ckpt_out`. For a launch whose
// processes are gone and whose last progress line is `iterations`, a committed
// temporary (`<ckpt_out>.<iterations>.tmp`) is renamed into place and every
// other `<ckpt_out>.<K>.tmp` (never committed) is removed, so the checkpoint
// holds exactly the counted iterations. Idempotent.
void commit_checkpoint(const std::string& ckpt_out, double iterations);

// Job tracker: the iterations each gang of a job is launched for in a round.
// Gangs that all train for the same time run in proportion to their expected
// `rates` (one per gang, the main gang first; a rate <= 0 counts as the
// smallest positive one, all <= 0 as equal). The targets are that time's
// iterations, the time chosen so that what the gangs are worth together
// (core/fork.h, `model`) is the job's `remaining` iterations: a job whose
// gangs all reach their targets is done, not short by what its copies'
// averaging loses. Rounded by largest remainders, then up where needed, so
// the targets are worth at least `remaining` and exceed it by under one
// iteration a gang; with copies that count in full (linear, efficiency 1) they
// sum to `remaining` exactly. While remaining >= gangs every gang gets at
// least one. Throws std::invalid_argument for remaining < 0 or no gangs.
std::vector<long long> split_iterations(long long remaining, const std::vector<double>& rates,
                                        const ForkModel& model = {1.0, ForkScaling::linear});

}  // namespace cellsched::runner
