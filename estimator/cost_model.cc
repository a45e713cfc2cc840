#include "estimator/estimator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "core/error.h"
#include "core/gpu.h"
#include "estimator/opcost.h"

// CostModel: what one layer, collective and optimizer step costs on a GPU type
// (measured, transferred or modeled). Plans are priced in estimator.cc.

namespace cellsched::estimator {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Ring steps of a collective (latency term of the catalogue model).
int steps(const std::string& collective, int n) {
  if (collective == "all_reduce") return 2 * (n - 1);
  if (collective == "send_recv") return 1;
  return n - 1;
}

}  // namespace

const char* basis_name(Basis b) {
  switch (b) {
    case Basis::Measured: return "measured";
    case Basis::Extrapolated: return "extrapolated";
    case Basis::Transferred: return "transferred";
    case Basis::Modeled: return "modeled";
  }
  return "?";
}

CostModel::CostModel(ModelSpec model, const std::string& gpu_type, const ProfileRun& compute,
                     const ProfileRun* comm, Options options)
    : CostModel(std::move(model), gpu_type, &compute, comm, std::move(options)) {}

CostModel::CostModel(ModelSpec model, const std::string& gpu_type, const ProfileRun* compute,
                     const ProfileRun* comm, Options options)
    : options_(std::move(options)) {
  const GpuSpec* dst = find_gpu(gpu_type);
  if (!dst) gpu_type_ = canonical_gpu_name(gpu_type);  // throws, naming the alternatives
  gpu_type_ = dst->name;
  dst_ = dst;
  if (model.layers.empty()) throw InputError("model " + model.name + ": has no layers");
  if (!known_optimizer(options_.optimizer))
    throw InputError("unknown optimizer '" + options_.optimizer + "' (" + kOptimizers + ")");
  // Precision: the option, else the model's, else the type's default.
  const Precision asked = options_.precision != Precision::Default ? options_.precision : model.precision;
  model_ = with_precision(std::move(model), resolve_precision(asked, *dst));
  model_ = with_attention(std::move(model_), fused_attention(model_, *dst));
  for (const LayerSpec& l : model_.layers) param_tensors_ += layer_param_tensors(l);
  dst_peak_tflops_ = model_.bytes_per_value <= 2 ? dst->fp16_tflops : dst->fp32_tflops;
  dst_mem_gbps_ = dst->memory_gbps;
  dst_memory_gib_ = dst->memory_gib;
  same_host_gbps_ = dst->nvlink_gbps > 0 ? dst->nvlink_gbps : dst->pcie_gbps;
  // A ring over more GPUs than one NVLink domain joins has PCIe hops, which bound it.
  if (dst->nvlink_gbps > 0 && dst->nvlink_peers > 0) {
    pcie_gbps_ = dst->pcie_gbps;
    nvlink_peers_ = dst->nvlink_peers;
  }
  opt_mem_gbps_ = dst_mem_gbps_;
  if (options_.network_gbps <= 0) options_.network_gbps = dst->nic_gbps;
  const bool dst_cpu = dst->arch == "cpu";
  // Kepler has no fp16 arithmetic (the catalogue's fp16 peak is its fp32
  // one): asked for fp16 there, the math runs at the fp32 rate and only the
  // bytes moved halve; current PyTorch builds do not run on it at all.
  if (model_.precision == Precision::FP16 && !dst_cpu && dst->fp16_tflops <= dst->fp32_tflops)
    note(gpu_type_ + " has no fast fp16 arithmetic: fp16 math priced at the fp32 rate, only the bytes moved halve");
  if (compute) {
    const std::string prof = "profile run " + std::to_string(compute->id);
    if (compute->kind != "compute") throw InputError(prof + ": is a '" + compute->kind + "' run, not compute");
    if (!compute->model.empty() && compute->model != model_.name)
      throw InputError(prof + ": profiles model '" + compute->model + "', not '" + model_.name + "'");
    src_ = find_gpu(compute->device_type);
    if (!src_) throw InputError(prof + ": unknown device type '" + compute->device_type + "'");
  }
  if (!compute && dst_cpu)
    throw InputError("model " + model_.name + " on the CPU: no compute profile (run `cellsched profile compute`)");
  if (!compute || (src_->arch == "cpu" && !dst_cpu)) {
    // A CPU profile's times never price a GPU: the analytic model does.
    source_ = Source::Model;
    basis_ = Basis::Modeled;
    // compute_run_id() stays 0: a modeled estimate depends on no profile (the
    // cell store keys its cells by it, so cells priced otherwise are retuned).
    note(std::string("modeled: per-layer operator costs on ") + gpu_type_ + " at " +
         precision_name(model_.precision) + (model_.fused_attention ? ", fused attention" : "") +
         (compute ? " (the cpu profile's times are not used)" : ""));
  } else {
    load_profile(*compute);
  }
  // Communication: measured curves when profiled on this type.
  if (comm) {
    if (comm->kind != "comm")
      throw InputError("profile run " + std::to_string(comm->id) + ": is a '" + comm->kind + "' run, not comm");
    const GpuSpec* cdev = find_gpu(comm->device_type);
    if (cdev && cdev->name == gpu_type_) {
      comm_measured_ = true;
      comm_run_id_ = comm->id;
      std::map<std::tuple<std::string, int, bool>, std::vector<std::pair<double, double>>> cp;
      for (const CommProfile& c : comm->comms) {
        if (c.bytes <= 0 || !(c.time_us >= 0)) continue;
        cp[{c.collective, c.hosts * c.devices_per_host, c.link == "network"}].emplace_back(
            static_cast<double>(c.bytes), c.time_us);
      }
      for (auto& [k, v] : cp) comm_[k] = Curve(std::move(v));
    }
  }
  if (!comm_measured_) {
    if (basis_ == Basis::Measured) basis_ = Basis::Extrapolated;
    note(comm ? "links priced from the catalogue (comm profile run " + std::to_string(comm->id) +
                    " is from " + comm->device_type + ")"
              : "links priced from the catalogue (no comm profile)");
  }
  base_basis_ = basis_;
  base_notes_ = notes_;
}

void CostModel::load_profile(const ProfileRun& compute) {
  const std::string prof = "profile run " + std::to_string(compute.id);
  compute_run_id_ = compute.id;
  // Layer profiles by shape_key and tp degree, curves over the micro-batch.
  std::map<std::string, std::map<int, std::pair<std::vector<std::pair<double, double>>,
                                                std::vector<std::pair<double, double>>>>> pts;
  for (const LayerProfile& lp : compute.layers) {
    if (lp.micro_batch <= 0 || lp.tp_degree <= 0 || !(lp.fwd_ms >= 0) || !(lp.bwd_ms >= 0))
      throw InputError(prof + ": layer profile '" + lp.layer_name + "' has a bad micro-batch, tp or time");
    auto& p = pts[lp.shape_key][lp.tp_degree];
    p.first.emplace_back(lp.micro_batch, lp.fwd_ms);
    p.second.emplace_back(lp.micro_batch, lp.bwd_ms);
  }
  std::map<std::string, int> shape_index;
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    const LayerSpec& l = model_.layers[i];
    auto it = shape_index.find(l.shape_key);
    if (it == shape_index.end()) {
      const auto pit = pts.find(l.shape_key);
      if (pit == pts.end() || !pit->second.count(1))
        throw InputError(prof + ": no tp=1 profile of layer '" + l.name + "' (shape " + l.shape_key +
                         ") of model " + model_.name + "; profile the model first");
      Shape sh;
      for (auto& [tp, fb] : pit->second) sh.by_tp[tp] = {Curve(fb.first), Curve(fb.second)};
      it = shape_index.emplace(l.shape_key, static_cast<int>(shapes_.size())).first;
      shapes_.push_back(std::move(sh));
    }
    shape_of_layer_.push_back(it->second);
  }
  const GpuSpec* src = src_;
  const bool half = model_.bytes_per_value <= 2;
  src_peak_tflops_ = half ? src->fp16_tflops : src->fp32_tflops;
  src_mem_gbps_ = src->memory_gbps;
  // The optimizer step streams memory: at the profile's measured bandwidth,
  // scaled by the catalogue's ratio when this type was not the one profiled.
  if (compute.mem_gbps > 0) opt_mem_gbps_ = compute.mem_gbps * dst_mem_gbps_ / src_mem_gbps_;
  if (src->name == gpu_type_) {
    if (src->arch == "cpu") mem_streams_ = compute.mem_gbps_streams;
    return;
  }
  if (src->arch != "cpu" && dst_->arch != "cpu") {
    source_ = Source::Transfer;
    basis_ = Basis::Transferred;
    try {
      src_precision_ = resolve_precision(model_.precision, *src);
    } catch (const InputError&) {
      src_precision_ = default_precision(*src);
    }
    note("transferred from " + src->name + " (" + prof + ", taken as " + precision_name(src_precision_) +
         "): each layer's measured time x the analytic model's ratio " + gpu_type_ + " / " + src->name);
    return;
  }
  extrapolate_compute_ = true;
  basis_ = Basis::Extrapolated;
  note("compute extrapolated from " + src->name + " (" + prof +
       ") by per-layer roofline calibrated with its measured efficiency");
}

CostModel::Time CostModel::modeled_time(const GpuSpec& g, int layer, int tp, double mb, Precision p) const {
  // Layers are priced at the model's value size; another precision (a
  // transfer's source) only changes the peaks, which is what the ratio needs.
  const Efficiency& eff = efficiency_of(g);
  const LayerSpec& l = model_.layers[static_cast<size_t>(layer)];
  const std::vector<Op> ops = layer_ops(model_, l, mb, tp);
  double f = 0, b = 0, kernels = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    f += op_time_ms(g, p, op, false);
    b += op_time_ms(g, p, op, true);
    kernels += op.kernels;
    if (op.cls == OpClass::Gemm && unaligned_16bit(g, p, op) && &g == dst_) note_unaligned(l, op, i, mb, tp);
  }
  if (model_.bytes_per_value < 4 && l.kind != "embedding") {
    // Autocast casts each fp32 weight to 16 bits in every forward (read 4,
    // write 2 bytes) and each 16-bit weight gradient back to fp32 in backward
    // (read 2, write 4); the embedding's table is not on its cast list.
    const double cast_ms = layer_params(layer, tp) * 6 / (g.memory_gbps * 1e9 * eff.memory) * 1000.0;
    f += cast_ms;
    b += cast_ms;
    kernels += layer_param_tensors(l);
  }
  // The host issues kernels while the GPU runs earlier ones: a layer takes the
  // longer of the two (2 us of GPU-side gap per kernel).
  const double issue = kernels * eff.issue_us / 1000.0, gap = kernels * 2e-3;
  return {std::max(f + gap, issue), std::max(b + kBackwardFactor * gap, kBackwardFactor * issue)};
}

void CostModel::note(const std::string& n) const { notes_.insert(n); }

void CostModel::note_unaligned(const LayerSpec& l, const Op& op, size_t index, double mb, int tp) const {
  // Name the model's own size, so that the plans of every tensor-parallel
  // degree the tuner tries give one note; a size that only a shard leaves
  // unaligned is named with its degree.
  const auto odd = [](const Op& o) {
    std::string sizes;
    for (const double d : unaligned_sizes(o)) {
      char num[32];
      std::snprintf(num, sizeof num, "%s%g", sizes.empty() ? "" : ", ", d);
      sizes += num;
    }
    return sizes;
  };
  std::string sizes;
  if (tp > 1) {
    const std::vector<Op> whole = layer_ops(model_, l, mb, 1);
    if (index < whole.size()) sizes = odd(whole[index]);
    if (sizes.empty()) sizes = odd(op) + " per shard at tensor parallelism " + std::to_string(tp);
  } else {
    sizes = odd(op);
  }
  char buf[384];
  std::snprintf(buf, sizeof buf,
                "%s: a 16-bit GEMM size (%s) is not a multiple of 8: priced at %.2f of the aligned "
                "efficiency (padding it to a multiple of 8 or 64 avoids that)",
                l.name.c_str(), sizes.c_str(), kUnalignedShare);
  note(buf);
}

bool CostModel::has_tp_layers() const {
  return std::any_of(model_.layers.begin(), model_.layers.end(),
                     [](const LayerSpec& l) { return l.tensor_parallel; });
}

double CostModel::roofline_ratio(int layer, int tp, double mb) const {
  const LayerSpec& l = model_.layers[static_cast<size_t>(layer)];
  const double k = l.tensor_parallel ? tp : 1;
  const double flops = l.flops_per_sample * mb / k;
  const double bytes = l.params * model_.bytes_per_value / k + 2 * l.activation_bytes_per_sample * mb;
  const double src = std::max(flops / (src_peak_tflops_ * 1e12), bytes / (src_mem_gbps_ * 1e9));
  const double dst = std::max(flops / (dst_peak_tflops_ * 1e12), bytes / (dst_mem_gbps_ * 1e9));
  return src > 0 ? dst / src : 1.0;
}

CostModel::Time CostModel::layer_time(int layer, int tp, double mb) const {
  const LayerSpec& l = model_.layers[static_cast<size_t>(layer)];
  if (source_ == Source::Model) return modeled_time(*dst_, layer, l.tensor_parallel ? tp : 1, mb, model_.precision);
  const Shape& sh = shapes_[static_cast<size_t>(shape_of_layer_[static_cast<size_t>(layer)])];
  const int k = l.tensor_parallel ? tp : 1;
  Time t;
  auto it = sh.by_tp.find(k);
  if (it != sh.by_tp.end()) {
    t = {it->second.first(mb), it->second.second(mb)};
    if (!it->second.first.in_range(mb)) {
      note("micro-batch " + std::to_string(static_cast<int>(mb)) + " of " + l.shape_key +
           " beyond the profiled sizes: alpha-beta fit");
    }
  } else {
    const auto& whole = sh.by_tp.at(1);
    t = {whole.first(mb) / k, whole.second(mb) / k};
    if (basis_ == Basis::Measured) basis_ = Basis::Extrapolated;
    note("tp=" + std::to_string(k) + " shard of " + l.shape_key + " not profiled: whole layer / " +
         std::to_string(k));
  }
  if (source_ == Source::Transfer) {
    // Op class by op class through the analytic model: compute-bound ops by the
    // achieved-FLOP ratio, memory-bound ones by the bandwidth ratio.
    const Time d = modeled_time(*dst_, layer, k, mb, model_.precision);
    const Time s = modeled_time(*src_, layer, k, mb, src_precision_);
    t.fwd_ms *= s.fwd_ms > 0 ? d.fwd_ms / s.fwd_ms : 1.0;
    t.bwd_ms *= s.bwd_ms > 0 ? d.bwd_ms / s.bwd_ms : 1.0;
  }
  if (extrapolate_compute_) {
    const double r = roofline_ratio(layer, tp, mb);
    t.fwd_ms *= r;
    t.bwd_ms *= r;
  }
  return t;
}

double CostModel::collective_ms(const std::string& collective, int ranks, bool network, double bytes,
                                int nics) const {
  if (ranks <= 1 || bytes <= 0) return 0;
  if (comm_measured_) {
    auto exact = comm_.find({collective, ranks, network});
    if (exact != comm_.end()) return exact->second(bytes) / 1000.0;
    // Nearest measured rank count of the same collective and link, rescaled by
    // the bus-bandwidth factor (busbw is what stays constant across rank counts).
    const Curve* best = nullptr;
    int best_ranks = 0;
    for (const auto& [k, curve] : comm_) {
      if (std::get<0>(k) != collective || std::get<2>(k) != network) continue;
      const int r = std::get<1>(k);
      if (!best || std::abs(r - ranks) < std::abs(best_ranks - ranks)) {
        best = &curve;
        best_ranks = r;
      }
    }
    if (best) {
      note(collective + " over " + std::to_string(ranks) + " ranks rescaled from " +
           std::to_string(best_ranks) + " ranks by the bus-bandwidth factor");
      return (*best)(bytes) / 1000.0 * busbw_factor(collective, ranks) / busbw_factor(collective, best_ranks);
    }
    if (basis_ == Basis::Measured) basis_ = Basis::Extrapolated;
    note(collective + (network ? " over the network" : " inside a host") +
         " not profiled: catalogue bandwidth");
  }
  // A ring over k GPUs of one host: over more of them than one NVLink domain
  // joins, at PCIe speed. Between hosts the rings still cross each host's
  // GPUs (k = nics); capped by the bridge's NVLink instead, 2 hosts of 4 A40s
  // were priced 7 % faster than 1 of 8.
  const auto within_host_gbps = [&](int k) {
    return nvlink_peers_ > 0 && k > nvlink_peers_ ? pcie_gbps_ : same_host_gbps_;
  };
  const double gbps = network ? std::min(std::max(1, nics) * options_.network_gbps,
                                         std::max(options_.network_gbps, within_host_gbps(nics)))
                              : within_host_gbps(ranks);
  const double alpha = network ? options_.network_latency_us : options_.same_host_latency_us;
  return (alpha * steps(collective, ranks) + busbw_factor(collective, ranks) * bytes / (gbps * 1e3)) / 1000.0;
}

double CostModel::handoff_transfer_ms(bool network, double bytes) const {
  const double whole = collective_ms("send_recv", 2, network, bytes);
  if (whole <= 0) return 0;
  if (comm_measured_) {
    auto it = comm_.find({"send_recv", 2, network});
    if (it != comm_.end()) return std::min(whole, std::max(0.0, it->second.beta()) * bytes / 1000.0);
  }
  const double gbps = network ? options_.network_gbps : same_host_gbps_;
  return std::min(whole, bytes / (gbps * 1e3) / 1000.0);
}

// Megatron's tensor-parallel layers: a block all-reduces its output after
// attention and after the MLP, forward and backward (tp_allreduces_*). The
// vocabulary-parallel embedding sums its shards' lookups once, forward. The
// vocabulary-parallel head keeps the logits sharded: its input's gradient is
// all-reduced once in backward, and the cross-entropy all-reduces three
// fp32 values a token forward (the max, the sum of exponentials and the
// target's logit). Charging the head the block's four all-reduces of the
// whole logits priced gpt-1.3b's head at 38 ms a micro-batch at tp=8 on
// A100s, more than all its blocks (audit of 2026-12-07).
double CostModel::tp_comm_ms(int layer, int tp, double mb, bool network) const {
  const LayerSpec& l = model_.layers[static_cast<size_t>(layer)];
  if (tp <= 1 || !l.tensor_parallel) return 0;
  if (l.kind == "head") {
    const double seq = model_.seq > 0 ? model_.seq : 1;
    const double input = layer > 0 ? model_.layers[static_cast<size_t>(layer) - 1].activation_bytes_per_sample
                                   : seq * model_.hidden * model_.bytes_per_value;
    return collective_ms("all_reduce", tp, network, input * mb) +
           3 * collective_ms("all_reduce", tp, network, seq * 4 * mb);
  }
  const double bytes = l.activation_bytes_per_sample * mb;
  if (l.kind == "embedding") return collective_ms("all_reduce", tp, network, bytes);
  return (options_.tp_allreduces_fwd + options_.tp_allreduces_bwd) *
         collective_ms("all_reduce", tp, network, bytes);
}

double CostModel::optimizer_state_bytes_per_param() const {
  const double master = model_.bytes_per_value < 4 ? 4 : 0;  // fp32 master weights
  if (options_.optimizer == "adam" || options_.optimizer == "adam-fused") return 8 + master;
  if (options_.optimizer == "sgd-momentum") return 4 + master;
  return master;
}

double CostModel::step_bytes_per_param() const {
  // One fused kernel reads the weight and gradient, reads and writes the
  // state, writes the weight. The CPU profile's measured pass is priced with
  // that count too (its validation holds with it; docs/estimator.md).
  const double fused = 3 * model_.bytes_per_value + 2 * optimizer_state_bytes_per_param();
  if (options_.optimizer == "adam-fused" || dst_->arch == "cpu") return fused;
  // PyTorch's default (foreach, or one tensor at a time): each line of the
  // update is its own pass over fp32 tensors (autocast keeps the weights fp32).
  // Adam: lerp_ m (r m g, w m), mul_ v, addcmul_ v (r v g g, w v), sqrt, div_,
  // add_ eps (r, w a temporary each), addcdiv_ (r p m t, w p): 19 x 4 bytes.
  if (options_.optimizer == "adam") return 76;
  // SGD with momentum: mul_ buf, add_ grad (r buf g, w buf), add_ to the weight.
  if (options_.optimizer == "sgd-momentum") return 32;
  return 12;  // SGD: read weight and gradient, write weight
}

double CostModel::optimizer_ms(double params, int streams) const {
  return stream_ms(params, step_bytes_per_param(), streams);
}

double CostModel::shared_memory_factor(int streams) const {
  if (streams <= 1 || mem_streams_.size() < 2) return 1;
  const double alone = mem_streams_.front();
  double per_stream = 0;
  if (static_cast<size_t>(streams) <= mem_streams_.size()) {
    per_stream = mem_streams_[static_cast<size_t>(streams) - 1];
  } else {
    double total = 0;
    for (size_t k = 0; k < mem_streams_.size(); ++k) total = std::max(total, static_cast<double>(k + 1) * mem_streams_[k]);
    per_stream = total / streams;
  }
  return per_stream > 0 ? std::max(1.0, alone / per_stream) : 1;
}

double CostModel::stream_ms(double params, double bytes_per_param, int streams) const {
  if (source_ != Source::Profile) {
    const double total = model_.total_params();
    const double tensors = total > 0 ? param_tensors_ * params / total : 1;
    return optimizer_step_ms(*dst_, params, bytes_per_param, tensors);
  }
  return params * bytes_per_param / (opt_mem_gbps_ * 1e9) * 1000.0 * shared_memory_factor(streams);
}

double CostModel::accumulate_ms(double params, int dp, int micro_batches, int streams) const {
  const int adds = dp > 1 ? micro_batches : micro_batches - 1;
  // Gradients accumulate in fp32 under mixed precision (the weights' own
  // type under autocast, Megatron's main_grad).
  return stream_ms(params, 3 * std::max(4, model_.bytes_per_value), streams) * adds / micro_batches;
}

double CostModel::step_ms(double params, int dp, int streams) const {
  return optimizer_ms(params, streams) + (dp > 1 ? stream_ms(params, 2 * model_.bytes_per_value, streams) : 0);
}

double CostModel::grad_sync_ms(int dp, bool network, double bytes, double bwd_ms, int nics) const {
  const double whole = collective_ms("all_reduce", dp, network, bytes, nics);
  if (!options_.overlap_grad_sync || dst_->arch == "cpu" || whole <= 0) return whole;
  const double bucket = std::min(bytes, options_.bucket_mb * 1e6);
  const double last = collective_ms("all_reduce", dp, network, bucket, nics);
  return std::max(last, whole - bwd_ms);
}

double CostModel::layer_params(int layer, int tp) const {
  const LayerSpec& l = model_.layers[static_cast<size_t>(layer)];
  return l.tensor_parallel ? l.params / tp : l.params;
}

double CostModel::layer_saved_bytes(int layer, int tp) const {
  const LayerSpec& l = model_.layers[static_cast<size_t>(layer)];
  return l.tensor_parallel ? l.saved_bytes_per_sample / tp : l.saved_bytes_per_sample;
}

double CostModel::layer_input_bytes(int layer) const {
  return layer > 0 ? model_.layers[static_cast<size_t>(layer) - 1].activation_bytes_per_sample : 0;
}

double CostModel::memory_capacity_bytes() const {
  return dst_memory_gib_ * kGiB * options_.memory_fraction;
}

}  // namespace cellsched::estimator
