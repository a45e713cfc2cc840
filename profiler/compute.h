// Compute profiling: forward and backward time of each distinct layer shape
// of a model, per micro-batch size and tensor-parallel degree. The timing
// backend (LibTorch on the CPU, LibTorch + CUPTI / CUDA events on a GPU) sits
// behind ComputeBackend; this header includes neither LibTorch nor CUDA.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/profile.h"

namespace cellsched::profiler {

// Progress: `done` of `total` measurements finished, `what` the next one.
using Progress = std::function<void(size_t done, size_t total, const std::string& what)>;

struct ComputeOptions {
  std::string device = "cpu";        // "cpu" or "cuda:N"
  std::string device_type;           // catalogue name; "" = "cpu" or the detected GPU
  std::vector<int> micro_batches = {1, 2};
  std::vector<int> tp_degrees = {1, 2, 4, 8};  // degrees a layer cannot split by are skipped
  int repetitions = 3;               // timed repetitions per measurement (median, IQR)
  int warmup = 1;                    // untimed repetitions before them
  // Interleaved passes over all measurements: each pass takes its share of
  // the repetitions of every measurement in turn, so a slow phase of the host
  // spreads over all layers instead of landing on one. 1 = all repetitions of
  // a measurement back to back.
  int passes = 1;
  // Optional: called after pass p of every pass but the last (validate runs
  // its trial rounds there, so profile and runs see the same host phases),
  // and before each extra pass (below) with p = the passes done so far - 1,
  // so that an extra pass does not follow the slow one straight away.
  std::function<void(int pass)> between_passes;
  // Up to this many more passes, after the planned ones, over the
  // measurements whose passes disagree: the median of their passes' medians,
  // forward plus backward, more than `settled_spread` above the fastest pass
  // (median_far_above_fastest in core/stats.h), as when a slow phase of the
  // host hit two of three passes. Each extra pass takes a planned pass's
  // share of repetitions. 0 = none.
  int extra_passes = 0;
  double settled_spread = 0.10;
  int threads = 0;                   // CPU threads (LibTorch and BLAS pools); 0 = their defaults
  std::string timer = "auto";        // cuda: "cupti", "cuda_events" or "auto" (CUPTI, else events)
  // Bytes rewritten before each timed forward and backward so that every
  // layer starts from cold caches, as it does inside a model whose weights
  // and gradients do not fit in the cache (nvbench flushes the L2 the same
  // way). -1 = auto (cache_flush_for), 0 = off (warm caches).
  int64_t cache_flush_bytes = -1;
  Progress progress;                 // optional
};

// Raw samples of one measurement: one entry per timed repetition.
struct LayerSamples {
  std::vector<double> fwd_ms, bwd_ms;
};

// A device that can run one layer (or one tensor-parallel shard of it).
class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  // "steady_clock", "cupti", "cuda_events".
  virtual std::string timer() const = 0;
  virtual int threads() const = 0;
  // Library versions for provenance ("libtorch" -> "1.13.1", ...).
  virtual std::map<std::string, std::string> versions() const = 0;
  // Catalogue name of the device when it can tell ("h100"); "" otherwise.
  virtual std::string detected_device_type() const = 0;
  // The device's last-level cache (CPU) or L2 (GPU) in bytes; 0 = unknown.
  virtual int64_t cache_bytes() const = 0;
  // Rewrite `bytes` before each timed region from now on (0 = none).
  virtual void set_cache_flush(int64_t bytes) = 0;
  // The device's memory bandwidth in GB/s, measured as a += b x s over
  // buffers far larger than the caches (3 x the buffer's bytes move).
  virtual double memory_gbps() = 0;
  // The same pass on a CPU while k - 1 other threads stream buffers of their
  // own, for k = 1..max_streams: each stream's GB/s, element k-1 (how far
  // processes sharing the host's memory slow each other's memory-bound steps).
  virtual std::vector<double> memory_gbps_shared(int max_streams) = 0;
  // Fills a TorchScript model's layers (its top-level children); others: no-op.
  virtual void expand(ModelSpec& model) = 0;
  // Times forward and backward of `layer` split `tp` ways at `micro_batch`.
  virtual LayerSamples time_layer(const ModelSpec& model, size_t layer_index, int tp,
                                  int micro_batch, int warmup, int repetitions) = 0;
};

// Whether `layer` of `model` can be split `tp` ways (heads, FFN width,
// vocabulary or experts divisible by tp; never for non-TP layers unless tp = 1).
bool can_split(const ModelSpec& model, const LayerSpec& layer, int tp);

// The measurements profile() makes: one per (distinct shape, tp, micro-batch).
struct PlannedMeasurement {
  size_t layer_index;  // first layer with this shape
  int tp, micro_batch;
};
std::vector<PlannedMeasurement> plan_compute(const ModelSpec& model, const ComputeOptions& opt);

// The auto cache flush: none when the model's weights and gradients fit in
// the cache (training keeps them there), else max(64 MiB, 4 x the cache);
// an unknown cache size (0) counts as 32 MiB.
int64_t cache_flush_for(const ModelSpec& model, int64_t cache_bytes);

// Profiles `model` on `backend`: validates options (InputError), expands
// TorchScript models, measures every planned shape and fills a ProfileRun
// (kind "compute"; host, versions, threads, timer set; not stored).
ProfileRun profile_compute(ComputeBackend& backend, ModelSpec& model, const ComputeOptions& opt);

// The backend for opt.device from those compiled in (LibTorch CPU; LibTorch
// on CUDA with a CUPTI or CUDA-events timer). Throws InputError when the
// device is malformed or this build or machine cannot run it.
std::unique_ptr<ComputeBackend> make_compute_backend(const ComputeOptions& opt);

// Which optional backends this build has: "libtorch", "cuda", "cupti", "nccl", "gloo".
std::vector<std::string> compiled_backends();

std::string host_name();

}  // namespace cellsched::profiler
