// The cell tuner: the best parallel plan of a cell under the estimator's cost
// model, found by a dynamic program over contiguous layer partitions with
// Pareto labels, bounded by a lower bound on the remaining stage time.
#pragma once

#include <string>
#include <vector>

#include "estimator/estimator.h"

namespace cellsched::tuner {

struct TuneOptions {
  int global_batch = 64;                // samples per iteration
  std::vector<int> micro_batch_counts;  // empty: every power of two dividing global_batch
  int max_tp = 8;                       // tensor-parallel degrees 1, 2, 4 ... up to this
  int pareto_size = 4;                  // plans kept per cell (time vs memory)
  int labels_per_state = 16;            // cap on the DP's Pareto labels per (stage, layer)
  bool recompute = true;                // also plans with activation recomputation
};

struct TunedPlan {
  estimator::Plan plan;
  estimator::Estimate estimate;  // re-priced by estimator::estimate(): the same numbers
};

struct TuneResult {
  estimator::Cell cell;
  bool feasible = false;             // some plan fits in memory
  std::vector<TunedPlan> pareto;     // fastest first; every plan feasible; empty if none
  long labels = 0;                   // DP labels created (search effort)
  long shapes = 0;                   // (dp, tp) stage shapes that split the batch; 0: no plan can
  const TunedPlan& best() const { return pareto.front(); }
};

// Best plans of one cell (its stage count fixed). Infeasible cells come back
// with feasible = false. Throws InputError for impossible cells (stage count
// above the layers, GPUs not divisible by the stages, bad batch).
TuneResult tune_cell(const estimator::CostModel& cm, const estimator::Cell& cell,
                     const TuneOptions& options = {});

// Stage counts worth trying in a cell of `gpus` GPUs: every S dividing the GPU
// count (so each stage gets gpus / S GPUs) and at most the model's layers.
std::vector<int> stage_counts(const estimator::CostModel& cm, int gpus);

// Every stage count of a cell (cell.stages is ignored); the best cell.stages
// in the result. One TuneResult per stage count in `per_stage` when given.
TuneResult tune_auto(const estimator::CostModel& cm, estimator::Cell cell, const TuneOptions& options = {},
                     std::vector<TuneResult>* per_stage = nullptr);

// Every cell the scheduler may ask for: 1, 2, 4 ... max_gpus GPUs (hosts of
// at most max_gpus_per_host) times each feasible stage count.
std::vector<TuneResult> tune_all(const estimator::CostModel& cm, int max_gpus, int max_gpus_per_host,
                                 const TuneOptions& options = {});

// Reference: every plan of the tuner's space priced with estimator::estimate()
// (exponential; for small instances in tests and benchmarks).
TuneResult exhaustive(const estimator::CostModel& cm, const estimator::Cell& cell,
                      const TuneOptions& options = {});

// Plans and estimates as JSON text (what the cell store keeps).
std::string plan_json(const estimator::Plan& plan);
estimator::Plan plan_from_json(const std::string& json);
std::string breakdown_json(const estimator::Estimate& e);

}  // namespace cellsched::tuner
