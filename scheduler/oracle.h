// Throughput oracles: iterations/s of a job on an allocation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/throughput.h"

namespace cellsched {

struct Cluster;
struct Placement;

// Iterations/s of a job on `workers` GPUs that are all of one type. Two
// sources implement it: a measured table (Gavel's JSON) and, later, the
// tuner's cell estimates.
class ThroughputOracle {
 public:
  virtual ~ThroughputOracle() = default;
  // Whole-job steps/s with `workers` GPUs of `gpu_type`; `consolidated` is
  // false when the workers span several nodes. 0 = the job cannot run so.
  virtual double throughput(const Job& job, const std::string& gpu_type, int workers,
                            bool consolidated) const = 0;
  // Where the figures come from (file name, "cells:<db>").
  virtual std::string source() const = 0;
  // The parallel plan behind throughput() ("dp=2,tp=2,pp=1,mb=8"), where the
  // source has one; empty otherwise.
  virtual std::string plan(const Job&, const std::string& /*gpu_type*/, int /*workers*/) const {
    return "";
  }
};

// Gavel's measured table. Lookups, in order: the exact (type, job type,
// workers) entry (`<type>_unconsolidated` first when not consolidated); else
// the largest measured scale factor below `workers`, scaled linearly; a
// catalogue type the table lacks falls back to its family ("v100-32" ->
// "v100"). A job type the table does not know yields 0.
class TableOracle final : public ThroughputOracle {
 public:
  explicit TableOracle(const ThroughputTable& table) : table_(table) {}
  double throughput(const Job& job, const std::string& gpu_type, int workers,
                    bool consolidated) const override;
  std::string source() const override { return table_.source; }

 private:
  static double lookup(const ThroughputTable::TypeIndex* type, const std::string& job_type, int workers);
  const ThroughputTable& table_;
};

// Wraps another oracle: a job whose `gpu_types` is not empty gets 0 on any
// other type (the trace restricted it, e.g. Alibaba's gpu_spec).
class TypeRestrictedOracle final : public ThroughputOracle {
 public:
  explicit TypeRestrictedOracle(std::unique_ptr<ThroughputOracle> inner) : inner_(std::move(inner)) {}
  double throughput(const Job& job, const std::string& gpu_type, int workers,
                    bool consolidated) const override;
  std::string source() const override { return inner_->source(); }
  std::string plan(const Job& job, const std::string& gpu_type, int workers) const override {
    return inner_->plan(job, gpu_type, workers);
  }

 private:
  std::unique_ptr<ThroughputOracle> inner_;
};

// DESIGN: a job spread over several GPU types runs at its slowest worker:
// W x min over used types of per-worker throughput. Consolidated when every
// worker sits on one node.
double allocation_throughput(const ThroughputOracle& oracle, const Job& job,
                             const Cluster& cluster, const std::vector<Placement>& workers);

}  // namespace cellsched
