// `cellsched validate`'s configurations and how one is run and measured:
// the worker processes of one configuration, and a trial's times from the
// ranks' (cli/validate_run.cc).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "validate/train.h"

namespace cellsched::cli {

// This executable's path (the workers are this binary's `validate worker`).
std::string self_exe();

struct RankTimes {
  std::vector<double> iteration, compute, sync, step;  // ms per timed iteration
  double param_checksum = 0;                           // sum of |weights| after training
};

// Runs the workers of one configuration in `dir` (created, then removed);
// returns each rank's times. Throws when a worker fails or diverges.
std::vector<RankTimes> run_config(const validate::WorkerArgs& base, const std::filesystem::path& dir);

struct Config {
  std::string mode;  // single, dp or pp
  int world, micro_batches, micro_batch_size;
};

std::string config_name(const Config& c);

// One trial of one configuration: per iteration the slowest rank's time, the
// phases each the largest over the ranks; medians over the iterations. The
// gradient all-reduce is split in two: the collective itself (the sync of the
// rank that arrived last, which waits for no one) and the wait of the rank
// that arrived first for the slower one.
struct Trial {
  double iteration_ms = 0, compute_ms = 0, sync_ms = 0, step_ms = 0, wait_ms = 0;
  std::vector<double> checksums;
};

// Data-parallel replicas must end with equal weights (else: throws).
Trial measure(const std::vector<RankTimes>& per_rank, const Config& c);

}  // namespace cellsched::cli
