// Online throughput learning: observed iterations/s per job and GPU type
// replace the wrapped oracle's estimate in later rounds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "scheduler/oracle.h"

namespace cellsched::runner {

class LearnedOracle final : public ThroughputOracle {
 public:
  // `base` may be null; `prior_per_gpu` is used (x workers) for a job that
  // neither the base oracle nor an observation covers.
  LearnedOracle(const ThroughputOracle* base, double prior_per_gpu = 1.0)
      : base_(base), prior_(prior_per_gpu) {}

  // Observed whole-gang iterations/s of `job_id` on `gpus` GPUs of `gpu_type`;
  // kept per GPU, as an exponential moving average (the first one replaces
  // the estimate).
  void observe(int64_t job_id, const std::string& gpu_type, int gpus, double iterations_per_s);
  // Restores a learned figure (per GPU) from the store.
  void set(int64_t job_id, const std::string& gpu_type, double per_gpu, long samples);
  // nullopt-like: < 0 when nothing was observed.
  double per_gpu(int64_t job_id, const std::string& gpu_type) const;
  long samples(int64_t job_id, const std::string& gpu_type) const;

  double throughput(const Job& job, const std::string& gpu_type, int workers,
                    bool consolidated) const override;
  std::string source() const override;

 private:
  struct Seen {
    double per_gpu = 0;
    long samples = 0;
  };
  const ThroughputOracle* base_;
  double prior_;
  std::map<std::pair<int64_t, std::string>, Seen> seen_;
};

}  // namespace cellsched::runner
