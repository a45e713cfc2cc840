// Tuned cells as the scheduler sees them: a throughput oracle backed by the
// cell store, tuning missing cells on demand. Joins tuner/ and db/ (the
// library cellsched_cells); the scheduler only sees ThroughputOracle.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "core/cluster.h"
#include "db/cell_store.h"
#include "scheduler/oracle.h"
#include "tuner/tuner.h"

namespace cellsched {

// The store's record of a tuned cell (stages_key 0 = the tuner chose).
db::CellRecord cell_record(const tuner::TuneResult& r, int stages_key, int global_batch,
                           int64_t profile_run_id);

// "pp=2 [0-5 dp2 tp1 | 6-11 dp1 tp2] mb 8x4": stages (layers, dp, tp), then
// micro-batches x micro-batch size.
std::string plan_summary(const estimator::Plan& plan);

class CellOracle final : public ThroughputOracle {
 public:
  // The cost model of a model on a GPU type (profiles chosen by the caller);
  // nullptr when the model cannot be priced there (the job cannot run).
  using CostModelFactory = std::function<std::shared_ptr<const estimator::CostModel>(
      const std::string& model, const std::string& gpu_type)>;

  // `cluster` gives the GPUs per host of each type (a spread allocation is
  // priced as hosts x GPUs per host); `options.global_batch` is used for jobs
  // without a batch size.
  CellOracle(db::CellStore& store, CostModelFactory factory, const Cluster& cluster,
             tuner::TuneOptions options = {}, std::string source = "cells");

  // Iterations/s = the best plan's samples/s / global batch, over every stage
  // count. A job's model is Job::model, its global batch Job::batch_size.
  double throughput(const Job& job, const std::string& gpu_type, int workers,
                    bool consolidated) const override;
  std::string plan(const Job& job, const std::string& gpu_type, int workers) const override;
  std::string source() const override { return source_; }

  long store_hits() const { return store_hits_; }  // cells answered by the store
  long tuned() const { return tuned_; }            // cells tuned (and stored) on demand

 private:
  struct Entry {
    double iterations_per_s = 0;
    std::string plan;
  };
  const Entry& lookup(const Job& job, const std::string& gpu_type, int workers,
                      bool consolidated) const;

  db::CellStore& store_;
  CostModelFactory factory_;
  std::map<std::string, int> per_host_;  // GPUs per host by type (largest node)
  tuner::TuneOptions options_;
  std::string source_;
  using Key = std::tuple<std::string, int, std::string, int, int>;  // model, batch, type, hosts, gph
  mutable std::map<Key, Entry> cache_;
  mutable std::map<std::pair<std::string, std::string>, std::shared_ptr<const estimator::CostModel>> models_;
  mutable long store_hits_ = 0, tuned_ = 0;
};

}  // namespace cellsched
