// The synthetic trace generator and trace summaries (core/trace_io.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/error.h"
#include "core/parse_util.h"
#include "core/trace_read.h"

namespace cellsched {

Trace generate_trace(const ThroughputTable& table, const GenerateOptions& options) {
  if (options.jobs < 0 || options.jobs > kMaxGeneratedJobs)
    throw InputError("number of jobs must be in [0, " + std::to_string(kMaxGeneratedJobs) + "]");
  // Up to 1e7 s (116 days) a gap: beyond it, a long trace's arrivals are no longer finite.
  if (!(options.mean_interarrival_s >= 0 && options.mean_interarrival_s <= 1e7))
    throw InputError("mean inter-arrival time must be a number of seconds in [0, 1e7]");
  const auto by_sf = detail::types_by_scale(table, options.reference_gpu);
  static const int kGpus[] = {1, 2, 4, 8};
  static const double kCum[] = {0.70, 0.80, 0.95, 1.0};
  for (int g : kGpus)
    if (!by_sf.count(g))
      throw InputError("throughput table" + (table.source.empty() ? "" : " " + table.source) +
                       " has no job type measured at " + std::to_string(g) + " GPU(s) on '" +
                       options.reference_gpu + "'");
  Trace t;
  t.name = "generated-" + std::to_string(options.jobs) + "-seed" + std::to_string(options.seed);
  t.source = "generated";
  t.format = "generated";
  detail::Rng rng(options.seed);
  double now = 0;
  for (long i = 0; i < options.jobs; ++i) {
    // Fixed draw order per job: gap, duration branch, duration exponent, GPUs, type.
    const double gap = rng.exponential(options.mean_interarrival_s);
    if (i > 0) now += gap;  // the first job arrives at t = 0
    const bool short_job = rng.uniform() < 0.8;
    const double exponent = short_job ? rng.uniform(1.5, 3.0) : rng.uniform(3.0, 4.0);
    const double duration_s = 60.0 * std::pow(10.0, exponent);
    const double u = rng.uniform();
    int gpus = 8;
    for (int k = 0; k < 4; ++k)
      if (u < kCum[k]) {
        gpus = kGpus[k];
        break;
      }
    const auto& types = by_sf.at(gpus);
    Job j;
    j.id = i;
    j.arrival_s = now;
    j.job_type = types[rng.below(types.size())];
    std::tie(j.model, j.batch_size) = split_job_type(j.job_type);
    j.gpus = gpus;
    const double tp = *table.get(options.reference_gpu, j.job_type, gpus);
    j.total_iterations = std::max(1.0, std::round(duration_s * tp));
    j.duration_hint_s = duration_s;
    t.jobs.push_back(std::move(j));
  }
  return t;
}

TraceSummary summarize(const Trace& trace) {
  TraceSummary s;
  s.jobs = static_cast<long>(trace.jobs.size());
  if (trace.jobs.empty()) return s;
  s.first_arrival_s = trace.jobs.front().arrival_s;
  s.last_arrival_s = trace.jobs.front().arrival_s;
  std::map<int, long> gpus;
  std::map<std::string, long> types;
  double dur_sum = 0;
  long dur_n = 0;
  for (const Job& j : trace.jobs) {
    s.first_arrival_s = std::min(s.first_arrival_s, j.arrival_s);
    s.last_arrival_s = std::max(s.last_arrival_s, j.arrival_s);
    s.total_gpu_iterations += j.total_iterations * j.gpus;
    ++gpus[j.gpus];
    ++types[j.job_type];
    if (j.duration_hint_s >= 0) {
      dur_sum += j.duration_hint_s;
      ++dur_n;
    }
  }
  if (s.jobs > 1) s.mean_interarrival_s = (s.last_arrival_s - s.first_arrival_s) / (s.jobs - 1);
  s.gpus_histogram.assign(gpus.begin(), gpus.end());
  s.job_types.assign(types.begin(), types.end());
  std::stable_sort(s.job_types.begin(), s.job_types.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (dur_n > 0) s.mean_duration_hint_s = dur_sum / dur_n;
  return s;
}

}  // namespace cellsched
