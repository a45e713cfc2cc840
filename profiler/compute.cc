#include "profiler/compute.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/stats.h"

namespace cellsched::profiler {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

bool can_split(const ModelSpec& m, const LayerSpec& l, int tp) {
  if (tp == 1) return true;
  if (!l.tensor_parallel || tp < 1) return false;
  if (l.kind == "decoder" || l.kind == "moe_decoder") return m.heads % tp == 0 && (4 * m.hidden) % tp == 0;
  if (l.kind == "embedding" || l.kind == "head") return m.vocab >= tp;  // last shard takes the rest
  return false;
}

std::vector<PlannedMeasurement> plan_compute(const ModelSpec& model, const ComputeOptions& opt) {
  std::vector<PlannedMeasurement> plan;
  std::set<std::string> seen;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    if (!seen.insert(model.layers[i].shape_key).second) continue;  // profiled once per shape
    for (int tp : opt.tp_degrees) {
      if (!can_split(model, model.layers[i], tp)) continue;
      for (int mb : opt.micro_batches) plan.push_back({i, tp, mb});
    }
  }
  return plan;
}

namespace {

void check_options(const ComputeOptions& opt) {
  auto bad = [](const std::string& what) { throw InputError(what); };
  if (opt.micro_batches.empty()) bad("--micro-batches: give at least one size");
  for (int mb : opt.micro_batches)
    if (mb < 1 || mb > 4096) bad("--micro-batches: " + std::to_string(mb) + " is not in 1..4096");
  if (opt.tp_degrees.empty()) bad("--tp: give at least one degree");
  for (int tp : opt.tp_degrees)
    if (tp != 1 && tp != 2 && tp != 4 && tp != 8) bad("--tp: " + std::to_string(tp) + " is not 1, 2, 4 or 8");
  if (opt.repetitions < 1 || opt.repetitions > 100000) bad("--reps must be in 1..100000");
  if (opt.warmup < 0 || opt.warmup > 100000) bad("--warmup must be in 0..100000");
  if (opt.passes < 1 || opt.passes > opt.repetitions) bad("--passes must be in 1..--reps");
  if (opt.extra_passes < 0 || opt.extra_passes > 1000) bad("extra passes must be in 0..1000");
  if (!(opt.settled_spread > 0) || !std::isfinite(opt.settled_spread)) bad("the settled spread must be positive");
  if (opt.threads < 0 || opt.threads > 4096) bad("--threads must be in 0..4096");
  if (opt.cache_flush_bytes < -1 || opt.cache_flush_bytes > (int64_t{64} << 30))
    bad("--cache-flush-mib must be in 0..65536 (or auto)");
}

// Scales a whole layer's analytic figures to one of `tp` shards: the split
// matrices shrink by tp (Megatron: attention heads, MLP width, vocabulary);
// layer norms and the activations passed on stay whole.
LayerProfile describe(const ModelSpec& m, size_t index, int tp, int mb) {
  const LayerSpec& l = m.layers[index];
  LayerProfile p;
  p.layer_index = static_cast<int>(index);
  p.layer_name = l.name;
  p.shape_key = l.shape_key;
  p.tp_degree = tp;
  p.micro_batch = mb;
  p.param_bytes = l.params / tp * m.bytes_per_value;
  p.flops = l.flops_per_sample * mb / tp;
  p.activation_bytes = l.activation_bytes_per_sample * mb;
  if (l.kind == "head") p.activation_bytes /= tp;  // vocabulary-parallel logits
  return p;
}

}  // namespace

int64_t cache_flush_for(const ModelSpec& model, int64_t cache_bytes) {
  if (cache_bytes <= 0) cache_bytes = int64_t{32} << 20;
  const double working_set = 2 * model.total_params() * model.bytes_per_value;  // weights and gradients
  if (working_set <= static_cast<double>(cache_bytes)) return 0;
  return std::max<int64_t>(int64_t{64} << 20, 4 * cache_bytes);
}

ProfileRun profile_compute(ComputeBackend& backend, ModelSpec& model, const ComputeOptions& opt) {
  check_options(opt);
  backend.expand(model);
  if (model.layers.empty()) throw InputError(model.name + ": the model has no layers to profile");
  const auto plan = plan_compute(model, opt);
  ProfileRun run;
  run.kind = "compute";
  run.model = model.name;
  run.device = opt.device;
  run.device_type = !opt.device_type.empty() ? opt.device_type : backend.detected_device_type();
  if (run.device_type.empty()) run.device_type = opt.device == "cpu" ? "cpu" : "unknown";
  run.host = host_name();
  run.timer = backend.timer();
  run.threads = backend.threads();
  run.repetitions = opt.repetitions;
  run.versions = backend.versions();
  run.cache_flush_bytes =
      opt.cache_flush_bytes >= 0 ? opt.cache_flush_bytes : cache_flush_for(model, backend.cache_bytes());
  backend.set_cache_flush(run.cache_flush_bytes);
  if (opt.progress) opt.progress(0, plan.size() * opt.passes, "memory bandwidth");
  run.mem_gbps = backend.memory_gbps();
  // On a CPU, processes of one host share its memory: how much one process's
  // bandwidth drops while others stream (up to 4, as many as the CPUs allow).
  if (opt.device == "cpu") {
    const int cpus = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
    const int streams = std::min(4, cpus / std::max(1, run.threads));
    if (streams > 1) run.mem_gbps_streams = backend.memory_gbps_shared(streams);
  }
  // Pass p takes repetitions p, p + passes, ... of every measurement.
  std::vector<LayerSamples> samples(plan.size());
  std::vector<std::vector<double>> pass_ms(plan.size());  // per measurement, each pass's median fwd + bwd
  auto measure = [&](size_t k, int reps) {
    const PlannedMeasurement& pm = plan[k];
    const LayerSamples s = backend.time_layer(model, pm.layer_index, pm.tp, pm.micro_batch, opt.warmup, reps);
    samples[k].fwd_ms.insert(samples[k].fwd_ms.end(), s.fwd_ms.begin(), s.fwd_ms.end());
    samples[k].bwd_ms.insert(samples[k].bwd_ms.end(), s.bwd_ms.begin(), s.bwd_ms.end());
    pass_ms[k].push_back(median(s.fwd_ms) + median(s.bwd_ms));
  };
  for (int pass = 0; pass < opt.passes; ++pass) {
    const int reps = (opt.repetitions - pass + opt.passes - 1) / opt.passes;
    for (size_t k = 0; k < plan.size(); ++k) {
      const PlannedMeasurement& pm = plan[k];
      if (opt.progress)
        opt.progress(pass * plan.size() + k, plan.size() * opt.passes,
                     model.layers[pm.layer_index].name + " tp" + std::to_string(pm.tp) + " mb" +
                         std::to_string(pm.micro_batch));
      measure(k, reps);
    }
    if (opt.between_passes && pass + 1 < opt.passes) opt.between_passes(pass);
  }
  const int extra_reps = (opt.repetitions + opt.passes - 1) / opt.passes;
  for (int extra = 0; extra < opt.extra_passes; ++extra) {
    std::vector<size_t> again;
    for (size_t k = 0; k < plan.size(); ++k)
      if (median_far_above_fastest(pass_ms[k], opt.settled_spread)) again.push_back(k);
    if (again.empty()) break;
    // Not straight after the pass that disagreed: a slow phase of the host
    // that hit it is likely to last a while longer.
    if (opt.between_passes) opt.between_passes(opt.passes - 1 + extra);
    for (const size_t k : again) measure(k, extra_reps);
  }
  for (size_t k = 0; k < plan.size(); ++k) {
    const PlannedMeasurement& pm = plan[k];
    const LayerSamples& s = samples[k];
    LayerProfile p = describe(model, pm.layer_index, pm.tp, pm.micro_batch);
    p.fwd_ms = median(s.fwd_ms);
    p.bwd_ms = median(s.bwd_ms);
    p.fwd_spread_ms = iqr(s.fwd_ms);
    p.bwd_spread_ms = iqr(s.bwd_ms);
    p.repetitions = static_cast<int>(s.fwd_ms.size());
    run.layers.push_back(std::move(p));
  }
  if (opt.progress) opt.progress(plan.size() * opt.passes, plan.size() * opt.passes, "");
  return run;
}

}  // namespace cellsched::profiler
