// The estimator: a cell and a parallel plan in, iteration time, throughput,
// memory per GPU and the breakdown out, priced from stored layer and comm
// profiles (or extrapolated from a profiled device through the catalogue).
// Plain C++; no LibTorch, no CUDA.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/model.h"
#include "core/profile.h"
#include "estimator/interpolate.h"

namespace cellsched::estimator {

struct Op;  // estimator/opcost.h

// (model, GPU type, hosts x GPUs per host, pipeline stages).
struct Cell {
  std::string model;         // ModelSpec::name
  std::string gpu_type;      // catalogue name
  int hosts = 1;
  int gpus_per_host = 1;
  int stages = 1;
  int gpus() const { return hosts * gpus_per_host; }
};

// One pipeline stage: a contiguous layer range and its data x tensor shape.
// It occupies dp x tp GPUs, tensor-parallel ranks innermost.
struct StagePlan {
  int first_layer = 0;
  int num_layers = 0;
  int dp = 1;
  int tp = 1;
  int gpus() const { return dp * tp; }
};

// A plan: stages in order, B micro-batches of `micro_batch_size` samples per
// iteration (global batch = B x size). Each data-parallel replica of stage j
// processes micro_batch_size / dp_j samples of every micro-batch.
struct Plan {
  std::vector<StagePlan> stages;
  int micro_batches = 1;
  int micro_batch_size = 1;
  // Activation recomputation (checkpointing every layer): a layer keeps only
  // its input for backward, and backward runs its forward again.
  bool recompute = false;
  int global_batch() const { return micro_batches * micro_batch_size; }
};

// measured: layer profiles of this GPU type (extrapolated: the same, with some
// shard, size or link priced from the catalogue); transferred: a profile of
// another GPU type moved layer by layer with the analytic model's ratio of the
// two types; modeled: no profile of a GPU (estimator/opcost.h).
enum class Basis { Measured, Extrapolated, Transferred, Modeled };
const char* basis_name(Basis b);  // "measured", "extrapolated", "transferred", "modeled"

// Optimizers priced: "adam", "sgd" and "sgd-momentum" as PyTorch runs them by
// default (foreach, one pass per line of the update), "adam-fused" as one
// kernel (torch fused=True, apex FusedAdam/FusedLAMB, DeepSpeed).
inline constexpr const char* kOptimizers = "adam, adam-fused, sgd or sgd-momentum";
inline bool known_optimizer(const std::string& o) {
  return o == "adam" || o == "adam-fused" || o == "sgd" || o == "sgd-momentum";
}

struct Options {
  std::string optimizer = "adam";    // one of kOptimizers: state and step traffic
  double memory_fraction = 0.9;      // usable share of the device memory
  double network_gbps = 0;           // between hosts when no network profile exists; 0 = the type's NIC default
  Precision precision = Precision::Default;  // overrides the model's own; Default = the model's, else the type's
  bool overlap_grad_sync = true;     // GPU types: DDP-style buckets all-reduced during the last backward
  double bucket_mb = 25;             // DDP bucket size, MB
  double same_host_latency_us = 5;   // alpha per step of a catalogue-priced collective
  double network_latency_us = 20;
  int tp_allreduces_fwd = 2;         // per tensor-parallel layer (Megatron: attention + MLP)
  int tp_allreduces_bwd = 2;
  // Processes that share one host's CPUs and memory (the CPU type) run their
  // layers this much slower than the single-process profile, and a step waits
  // for the slower one: measured by validate's co-location probe. It scales
  // the layers' compute of cells with more than one GPU (process) per host:
  // all of a stage's where its replicas compute together, only the share of
  // a one-process pipeline stage's that overlaps another stage's (GPipe).
  double colocated_compute_factor = 1;
};

struct StageEstimate {
  int first_layer = 0, num_layers = 0, dp = 1, tp = 1;
  double replica_micro_batch = 0;    // samples per micro-batch per replica
  double fwd_ms = 0, bwd_ms = 0;     // compute, one micro-batch
  double tp_comm_ms = 0;             // tensor-parallel all-reduces, one micro-batch (fwd + bwd)
  double send_ms = 0;                // one hand-off to the next stage (activations out, or their gradients back), one micro-batch (0 for the last)
  double send_transfer_ms = 0;       // the part of send_ms that grows with its size (without the latency)
  double grad_sync_ms = 0;           // data-parallel all-reduce of the stage's gradients, the part not hidden by backward
  double grad_sync_total_ms = 0;     // the whole all-reduce (overlapped or not)
  double optimizer_ms = 0;            // the step, and zeroing the gradients where they are kept
  double accumulate_ms = 0;          // adding a micro-batch's gradients to those held, per micro-batch
  double recompute_ms = 0;           // the forward again in backward (recomputation), one micro-batch
  double params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0, activation_bytes = 0;
  int in_flight = 0;                 // micro-batches whose activations are held (1F1B)
  double memory_bytes = 0;           // per GPU
  bool network_grad_sync = false, network_send = false;
};

struct Estimate {
  bool feasible = true;
  std::string infeasible_reason;       // set when !feasible (memory)
  Basis basis = Basis::Measured;
  Precision precision = Precision::FP32;  // resolved training precision
  std::vector<std::string> notes;      // what was extrapolated, and how
  double iteration_ms = 0;
  double samples_per_s = 0;
  double memory_bytes = 0;             // the largest per-GPU footprint over the stages
  double memory_capacity_bytes = 0;    // usable per GPU
  // Breakdown: iteration_ms = pipeline_compute_ms + pipeline_comm_ms + sync_ms.
  double pipeline_compute_ms = 0;      // max_j(s_j)(B-1) + sum_j s_j, s = compute + TP comm + accumulation + recompute
  double pipeline_comm_ms = 0;         // the inter-stage hand-offs on the critical path (estimate())
  double sync_ms = 0;                  // max_j(gradient all-reduce + optimizer step)
  std::vector<StageEstimate> stages;
};

// Recomputation runs a stage's forward, and half its tensor-parallel
// all-reduces, again during backward: the extra time per micro-batch.
inline double recompute_ms(double fwd_ms, double tp_comm_ms) { return fwd_ms + tp_comm_ms / 2; }
// NICs a host gives each data-parallel group of a stage that spans hosts:
// with tp shards side by side, a host of g GPUs holds g / tp replicas of a
// shard, each with its own NIC (collective_ms).
inline int dp_nics(int dp, int tp, int gpus_per_host) {
  const int per_host = gpus_per_host / (tp > 0 ? tp : 1);
  return per_host < 1 ? 1 : (dp < per_host ? dp : per_host);
}
// Activation bytes one GPU of a stage holds (per-sample sums over its layers;
// `m` samples per micro-batch, `in_flight` micro-batches under 1F1B): the
// saved activations of every micro-batch in flight, or under recomputation
// only its layers' inputs plus one layer's saved set in backward; plus the
// working buffers, twice the largest activation (`max_act`, already x m).
inline double held_activation_bytes(bool recompute, double saved, double inputs, double max_saved, double m,
                                    int in_flight, double max_act) {
  return (recompute ? inputs * m * in_flight + max_saved * m : saved * m * in_flight) + 2 * max_act;
}
// The 1F1B form max_j(x_j)(B-1) + sum_j x_j.
double pipeline_form(const std::vector<double>& x, int micro_batches);

// Prices layers and collectives of one model on one GPU type. Built once,
// queried many times (the tuner precomputes its tables from it).
class CostModel {
 public:
  // `compute` holds the model's layer profiles (on gpu_type, or on another
  // device to extrapolate from); `comm` may be null (links priced from the
  // catalogue) or profiled on another type (likewise). Throws InputError when
  // the profiles do not cover the model or the types are unknown.
  CostModel(ModelSpec model, const std::string& gpu_type, const ProfileRun& compute,
            const ProfileRun* comm, Options options = {});
  // `compute` may be null: a GPU type is then modeled (a CPU type needs a profile).
  CostModel(ModelSpec model, const std::string& gpu_type, const ProfileRun* compute,
            const ProfileRun* comm, Options options = {});

  const ModelSpec& model() const { return model_; }
  const std::string& gpu_type() const { return gpu_type_; }
  const Options& options() const { return options_; }
  int num_layers() const { return static_cast<int>(model_.layers.size()); }
  bool has_tp_layers() const;
  int64_t compute_run_id() const { return compute_run_id_; }
  int64_t comm_run_id() const { return comm_run_id_; }

  struct Time {
    double fwd_ms = 0, bwd_ms = 0;
  };
  // One layer (one tensor-parallel shard when the layer is tensor-parallel
  // and tp > 1) at `micro_batch` samples.
  Time layer_time(int layer, int tp, double micro_batch) const;
  // Tensor-parallel all-reduces of one layer per micro-batch, fwd + bwd (0 when tp == 1
  // or the layer is not tensor-parallel).
  double tp_comm_ms(int layer, int tp, double micro_batch, bool network) const;
  // A collective over `ranks` ranks of `bytes` per rank; 0 for one rank.
  // `nics`: inter-host links each host gives the collective. NCCL runs one
  // ring per NIC, so between hosts a collective whose group has n GPUs on a
  // host moves data over n NICs at once (the catalogue's figure is per GPU),
  // up to the host's own link (NVLink or PCIe). Measured curves include it.
  double collective_ms(const std::string& collective, int ranks, bool network, double bytes, int nics = 1) const;
  // The part of a hand-off between two stages (send_recv over 2 ranks of
  // `bytes`) that grows with its size: the measured curve's fitted slope x
  // bytes, or bytes / the catalogue's link; never more than the whole hand-off.
  double handoff_transfer_ms(bool network, double bytes) const;
  // The optimizer step over `params` parameters: memory-bound, at the compute
  // profile's measured bandwidth (scaled through the catalogue to another
  // type), else at the catalogue's.
  // `streams`: processes of one host doing it at once (see shared_memory_factor).
  double optimizer_ms(double params, int streams = 1) const;
  // A memory-bound pass over `params` parameters touching `bytes_per_param`
  // each, priced as the optimizer step is (gradient accumulation, zeroing).
  double stream_ms(double params, double bytes_per_param, int streams = 1) const;
  // How much slower a memory-bound pass runs while `streams` processes of a
  // host stream at once: the CPU profile's bandwidth alone over its bandwidth
  // per process at that count (measured up to 4; beyond, the largest measured
  // total shared out). 1 where not measured, and for GPU types, whose
  // processes each have their own memory.
  double shared_memory_factor(int streams) const;
  // Up to how many streams the profile measured side by side (0: none).
  int measured_streams() const { return static_cast<int>(mem_streams_.size()); }
  // Backward adding a micro-batch's gradients to those a stage replica holds
  // (`params` of them; read both, write the sum), per micro-batch of
  // `micro_batches`: every add but the first when the step releases the
  // gradients (dp = 1), every add when data-parallel replicas keep them as
  // views into the all-reduce buffer (DDP's gradient_as_bucket_view).
  double accumulate_ms(double params, int dp, int micro_batches, int streams = 1) const;
  // The optimizer step over `params`, plus zeroing the all-reduce buffer
  // (a write, with its read for ownership) when dp > 1.
  double step_ms(double params, int dp, int streams = 1) const;
  // The exposed part of a data-parallel gradient all-reduce of `bytes` over dp
  // ranks: on GPU types (overlap on) buckets of bucket_mb are reduced while the
  // last micro-batch's backward (`bwd_ms`) runs, so only what exceeds it and
  // the last bucket remain; otherwise the whole all-reduce.
  double grad_sync_ms(int dp, bool network, double bytes, double bwd_ms, int nics = 1) const;
  Precision precision() const { return model_.precision; }
  // Optimizer state bytes per parameter.
  double optimizer_state_bytes_per_param() const;
  // Bytes the optimizer step moves per parameter (see kOptimizers).
  double step_bytes_per_param() const;
  // Parameters of `layer` held by one GPU of a tp-way stage.
  double layer_params(int layer, int tp) const;
  // Saved activation bytes of `layer` per sample on one GPU of a tp-way stage.
  double layer_saved_bytes(int layer, int tp) const;
  // What `layer` keeps per sample under recomputation: its input (the
  // previous layer's output; whole on every tensor-parallel rank), 0 for the first.
  double layer_input_bytes(int layer) const;
  double memory_capacity_bytes() const;

  // Measured when compute (and comm, if used) were profiled on gpu_type and
  // every shard and size came from its own profile; notes say why not.
  Basis basis() const { return basis_; }
  std::vector<std::string> notes() const { return {notes_.begin(), notes_.end()}; }
  // Forgets what pricing earlier plans noted (a shard or size not profiled,
  // an unaligned GEMM), keeping what the construction noted: estimate() calls
  // it, so a tuned plan carries its own notes, not its rejected rivals'.
  void begin_plan() const {
    notes_ = base_notes_;
    basis_ = base_basis_;
  }

 private:
  struct Shape {
    std::map<int, std::pair<Curve, Curve>> by_tp;  // tp -> (fwd, bwd) over micro-batch
  };
  double roofline_ratio(int layer, int tp, double micro_batch) const;
  Time modeled_time(const GpuSpec& g, int layer, int tp, double micro_batch, Precision p) const;
  void note(const std::string& n) const;
  void note_unaligned(const LayerSpec& l, const Op& op, size_t index, double micro_batch, int tp) const;
  void load_profile(const ProfileRun& compute);

  ModelSpec model_;
  std::string gpu_type_;
  Options options_;
  std::vector<int> shape_of_layer_;
  std::vector<Shape> shapes_;
  bool extrapolate_compute_ = false;
  enum class Source { Profile, Transfer, Model } source_ = Source::Profile;
  const GpuSpec* dst_ = nullptr;
  const GpuSpec* src_ = nullptr;
  Precision src_precision_ = Precision::FP32;
  double param_tensors_ = 0;
  double src_peak_tflops_ = 0, src_mem_gbps_ = 0, dst_peak_tflops_ = 0, dst_mem_gbps_ = 0;
  double dst_memory_gib_ = 0, same_host_gbps_ = 0;
  double pcie_gbps_ = 0;  // inside a host, for rings wider than nvlink_peers_ (0: NVLink spans the host)
  int nvlink_peers_ = 0;
  double opt_mem_gbps_ = 0;  // prices the optimizer step
  std::vector<double> mem_streams_;  // the CPU profile's mem_gbps_streams (this CPU only)
  bool comm_measured_ = false;
  std::map<std::tuple<std::string, int, bool>, Curve> comm_;  // (collective, ranks, network) -> us
  int64_t compute_run_id_ = 0, comm_run_id_ = 0;
  mutable Basis basis_ = Basis::Measured;
  mutable std::set<std::string> notes_;
  Basis base_basis_ = Basis::Measured;  // as constructed
  std::set<std::string> base_notes_;
};

// Checks a plan against the cell and the model; throws InputError naming the
// problem (stage count, layer ranges, GPU counts, tp beyond a host, sizes).
void check_plan(const CostModel& cm, const Cell& cell, const Plan& plan);

// Prices a checked plan. Infeasible plans (memory) come back with feasible = false.
Estimate estimate(const CostModel& cm, const Cell& cell, const Plan& plan);

// `dp=2,tp=2,mb=8[,mbs=4][,layers=12:13]`; per-stage values separated by ':'
// (one value applies to every stage). dp defaults to gpus/stages/tp, tp to 1,
// layers to a balanced split, mbs to global_batch / mb. Throws InputError.
Plan parse_plan(const std::string& spec, const CostModel& cm, const Cell& cell, int global_batch);

// The cell for N GPUs: one host when N <= max_gpus_per_host, otherwise
// N / max_gpus_per_host hosts (InputError when it does not divide).
Cell make_cell(const std::string& model, const std::string& gpu_type, int gpus, int stages,
               int max_gpus_per_host);

}  // namespace cellsched::estimator
