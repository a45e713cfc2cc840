#include "runner/learned_oracle.h"

namespace cellsched::runner {

void LearnedOracle::observe(int64_t job_id, const std::string& gpu_type, int gpus, double rate) {
  if (gpus <= 0 || !(rate > 0)) return;
  Seen& s = seen_[{job_id, gpu_type}];
  const double per = rate / gpus;
  s.per_gpu = s.samples == 0 ? per : 0.5 * s.per_gpu + 0.5 * per;
  ++s.samples;
}

void LearnedOracle::set(int64_t job_id, const std::string& gpu_type, double per_gpu, long samples) {
  seen_[{job_id, gpu_type}] = Seen{per_gpu, samples};
}

double LearnedOracle::per_gpu(int64_t job_id, const std::string& gpu_type) const {
  const auto it = seen_.find({job_id, gpu_type});
  return it == seen_.end() ? -1 : it->second.per_gpu;
}

long LearnedOracle::samples(int64_t job_id, const std::string& gpu_type) const {
  const auto it = seen_.find({job_id, gpu_type});
  return it == seen_.end() ? 0 : it->second.samples;
}

double LearnedOracle::throughput(const Job& job, const std::string& gpu_type, int workers,
                                 bool consolidated) const {
  const auto it = seen_.find({job.id, gpu_type});
  if (it != seen_.end()) return it->second.per_gpu * workers;
  const double base = base_ ? base_->throughput(job, gpu_type, workers, consolidated) : 0;
  // Observed on another type only: carry the observation over, scaled by the
  // base oracle's ratio between the two types when it knows both.
  for (auto o = seen_.lower_bound({job.id, std::string()}); o != seen_.end() && o->first.first == job.id; ++o) {
    const double there = base_ ? base_->throughput(job, o->first.second, workers, consolidated) : 0;
    const double ratio = base > 0 && there > 0 ? base / there : 1.0;
    return o->second.per_gpu * workers * ratio;
  }
  return base > 0 ? base : prior_ * workers;
}

std::string LearnedOracle::source() const {
  return "learned" + (base_ ? "+" + base_->source() : std::string());
}

}  // namespace cellsched::runner
