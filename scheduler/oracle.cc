#include "scheduler/oracle.h"

#include <algorithm>
#include <limits>

#include "core/cluster.h"
#include "scheduler/policy.h"

namespace cellsched {

double TableOracle::lookup(const ThroughputTable::TypeIndex* type, const std::string& job_type, int workers) {
  if (!type) return 0;
  const auto it = type->jobs.find(job_type);
  if (it == type->jobs.end()) return 0;
  // The figure at `workers`; between two measured scale factors, the straight
  // line between their figures; past the largest, that figure scaled linearly
  // (per-worker throughput held constant beyond what was measured). Scaling
  // the figure below up linearly where a larger one was measured made 3 GPUs
  // of LM on V100s 278.6 it/s against 126.7 measured at 4, and HadarE's
  // copies cut to 3 GPUs ran at it (2026-12-07 audit).
  int lo_sf = 0;
  double lo_v = 0;
  for (const auto& [sf, v] : it->second) {
    if (sf == workers) return v;
    if (sf > workers) {
      if (lo_sf == 0) return 0;  // below the smallest measured: not extrapolated down
      return lo_v + (v - lo_v) * (workers - lo_sf) / (sf - lo_sf);
    }
    lo_sf = sf;
    lo_v = v;
  }
  return lo_sf > 0 ? lo_v * workers / lo_sf : 0;
}

double TableOracle::throughput(const Job& job, const std::string& gpu_type, int workers,
                               bool consolidated) const {
  if (workers <= 0) return 0;
  const std::string& key = job.job_type.empty() ? job.model : job.job_type;
  auto by_type = [&](const ThroughputTable::TypeIndex* type) -> double {
    if (!type) return 0;
    const double packed = lookup(type, key, workers);
    if (!consolidated && workers > 1) {
      // Where the table knows the job on this type and says it cannot run
      // at this count (Gavel's 0.0: out of memory), spreading the gang does
      // not make it fit: K80s ran ResNet-50 (batch 128) spread, at the
      // 1-GPU unconsolidated figure scaled up (2026-12-07 audit).
      if (packed <= 0 && type->jobs.count(key)) return 0;
      const double v = lookup(type->unconsolidated, key, workers);
      if (v > 0) return v;
    }
    return packed;
  };
  const double v = by_type(table_.type_index(gpu_type));
  if (v > 0) return v;
  const auto dash = gpu_type.find('-');
  if (dash != std::string::npos) return by_type(table_.type_index(gpu_type.substr(0, dash)));
  return 0;
}

double TypeRestrictedOracle::throughput(const Job& job, const std::string& gpu_type, int workers,
                                        bool consolidated) const {
  if (!job.gpu_types.empty() &&
      std::find(job.gpu_types.begin(), job.gpu_types.end(), gpu_type) == job.gpu_types.end())
    return 0;
  return inner_->throughput(job, gpu_type, workers, consolidated);
}

double allocation_throughput(const ThroughputOracle& oracle, const Job& job,
                             const Cluster& cluster, const std::vector<Placement>& workers) {
  if (workers.empty()) return 0;
  int total = 0;
  for (const Placement& p : workers) total += p.gpus;
  if (total <= 0) return 0;
  bool consolidated = true;
  for (const Placement& p : workers) consolidated = consolidated && p.node == workers[0].node;
  // Per-worker throughput of each type used; the slowest sets the pace.
  double per_worker = std::numeric_limits<double>::infinity();
  std::vector<const std::string*> seen;
  for (const Placement& p : workers) {
    const std::string& type = cluster.nodes.at(p.node).gpu_type;
    if (std::any_of(seen.begin(), seen.end(), [&](const std::string* s) { return *s == type; }))
      continue;
    seen.push_back(&type);
    per_worker = std::min(per_worker, oracle.throughput(job, type, total, consolidated) / total);
  }
  return per_worker * total;
}

}  // namespace cellsched
