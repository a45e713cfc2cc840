#include "estimator/estimator.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "core/gpu.h"
#include "estimator/opcost.h"

namespace cellsched::estimator {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string where(const Cell& cell) {
  return "cell " + cell.model + " on " + std::to_string(cell.hosts) + "x" +
         std::to_string(cell.gpus_per_host) + " " + cell.gpu_type + ", " +
         std::to_string(cell.stages) + " stage(s)";
}

// Ring steps of a collective (latency term of the catalogue model).
int steps(const std::string& collective, int n) {
  if (collective == "all_reduce") return 2 * (n - 1);
  if (collective == "send_recv") return 1;
  return n - 1;
}

bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

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

double pipeline_form(const std::vector<double>& x, int micro_batches) {
  double mx = 0, sum = 0;
  for (double v : x) {
    mx = std::max(mx, v);
    sum += v;
  }
  return mx * (micro_batches - 1) + sum;
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
  if (options_.optimizer != "adam" && options_.optimizer != "sgd" &&
      options_.optimizer != "sgd-momentum")
    throw InputError("unknown optimizer '" + options_.optimizer + "' (adam, sgd, sgd-momentum)");
  // Precision: the option, else the model's, else the type's default.
  const Precision asked = options_.precision != Precision::Default ? options_.precision : model.precision;
  model_ = with_precision(std::move(model), resolve_precision(asked, *dst));
  model_ = with_attention(std::move(model_), fused_attention(model_, *dst));
  for (const LayerSpec& l : model_.layers) param_tensors_ += layer_param_tensors(l);
  dst_peak_tflops_ = model_.bytes_per_value <= 2 ? dst->fp16_tflops : dst->fp32_tflops;
  dst_mem_gbps_ = dst->memory_gbps;
  dst_memory_gib_ = dst->memory_gib;
  same_host_gbps_ = dst->nvlink_gbps > 0 ? dst->nvlink_gbps : dst->pcie_gbps;
  opt_mem_gbps_ = dst_mem_gbps_;
  if (options_.network_gbps <= 0) options_.network_gbps = dst->nic_gbps;
  const bool dst_cpu = dst->arch == "cpu";
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
  const std::vector<Op> ops = layer_ops(model_, model_.layers[static_cast<size_t>(layer)], mb, tp);
  double f = 0, b = 0, kernels = 0;
  for (const Op& op : ops) {
    f += op_time_ms(g, p, op, false);
    b += op_time_ms(g, p, op, true);
    kernels += op.kernels;
  }
  // The host issues kernels while the GPU runs earlier ones: a layer takes the
  // longer of the two (2 us of GPU-side gap per kernel).
  const double issue = kernels * eff.issue_us / 1000.0, gap = kernels * 2e-3;
  return {std::max(f + gap, issue), std::max(b + kBackwardFactor * gap, kBackwardFactor * issue)};
}

void CostModel::note(const std::string& n) const { notes_.insert(n); }

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

double CostModel::collective_ms(const std::string& collective, int ranks, bool network,
                                double bytes) const {
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
  const double gbps = network ? options_.network_gbps : same_host_gbps_;
  const double alpha = network ? options_.network_latency_us : options_.same_host_latency_us;
  return (alpha * steps(collective, ranks) + busbw_factor(collective, ranks) * bytes / (gbps * 1e3)) / 1000.0;
}

double CostModel::tp_comm_ms(int layer, int tp, double mb, bool network) const {
  const LayerSpec& l = model_.layers[static_cast<size_t>(layer)];
  if (tp <= 1 || !l.tensor_parallel) return 0;
  const double bytes = l.activation_bytes_per_sample * mb;
  return (options_.tp_allreduces_fwd + options_.tp_allreduces_bwd) *
         collective_ms("all_reduce", tp, network, bytes);
}

double CostModel::optimizer_state_bytes_per_param() const {
  const double master = model_.bytes_per_value < 4 ? 4 : 0;  // fp32 master weights
  if (options_.optimizer == "adam") return 8 + master;
  if (options_.optimizer == "sgd-momentum") return 4 + master;
  return master;
}

double CostModel::optimizer_ms(double params, int streams) const {
  // Bytes touched per parameter: read weight and gradient, read+write state, write weight.
  return stream_ms(params, 3 * model_.bytes_per_value + 2 * optimizer_state_bytes_per_param(), streams);
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
  return stream_ms(params, 3 * model_.bytes_per_value, streams) * adds / micro_batches;
}

double CostModel::step_ms(double params, int dp, int streams) const {
  return optimizer_ms(params, streams) + (dp > 1 ? stream_ms(params, 2 * model_.bytes_per_value, streams) : 0);
}

double CostModel::grad_sync_ms(int dp, bool network, double bytes, double bwd_ms) const {
  const double whole = collective_ms("all_reduce", dp, network, bytes);
  if (!options_.overlap_grad_sync || dst_->arch == "cpu" || whole <= 0) return whole;
  const double bucket = std::min(bytes, options_.bucket_mb * 1e6);
  const double last = collective_ms("all_reduce", dp, network, bucket);
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

void check_plan(const CostModel& cm, const Cell& cell, const Plan& plan) {
  const std::string w = where(cell);
  if (cell.hosts < 1 || cell.gpus_per_host < 1) throw InputError(w + ": hosts and GPUs per host must be >= 1");
  if (cell.stages < 1) throw InputError(w + ": stages must be >= 1");
  if (cell.model != cm.model().name)
    throw InputError(w + ": the cost model is for " + cm.model().name);
  if (static_cast<int>(plan.stages.size()) != cell.stages)
    throw InputError(w + ": the plan has " + std::to_string(plan.stages.size()) + " stage(s)");
  if (cell.stages > cm.num_layers())
    throw InputError(w + ": more stages than the model's " + std::to_string(cm.num_layers()) + " layers");
  if (plan.micro_batches < 1) throw InputError(w + ": micro-batch count must be >= 1");
  if (plan.micro_batch_size < 1) throw InputError(w + ": micro-batch size must be >= 1");
  int next = 0, gpus = 0;
  for (size_t j = 0; j < plan.stages.size(); ++j) {
    const StagePlan& s = plan.stages[j];
    const std::string sw = w + ": stage " + std::to_string(j) + ": ";
    if (s.first_layer != next || s.num_layers < 1)
      throw InputError(sw + "layers must be contiguous, at least one per stage (starts at " +
                       std::to_string(s.first_layer) + ", expected " + std::to_string(next) + ")");
    next += s.num_layers;
    if (s.dp < 1 || s.tp < 1) throw InputError(sw + "dp and tp must be >= 1");
    if (!is_pow2(s.tp)) throw InputError(sw + "tp=" + std::to_string(s.tp) + " is not a power of two");
    if (s.tp > cell.gpus_per_host)
      throw InputError(sw + "tp=" + std::to_string(s.tp) + " spans more than one host (" +
                       std::to_string(cell.gpus_per_host) + " GPUs per host)");
    if (s.tp > 1 && !cm.has_tp_layers())
      throw InputError(sw + "tp=" + std::to_string(s.tp) + " but model " + cm.model().name +
                       " has no tensor-parallel layers");
    if (plan.micro_batch_size % s.dp != 0)
      throw InputError(sw + "micro-batch size " + std::to_string(plan.micro_batch_size) +
                       " is not divisible by dp=" + std::to_string(s.dp));
    gpus += s.gpus();
  }
  if (next != cm.num_layers())
    throw InputError(w + ": the stages cover " + std::to_string(next) + " of " +
                     std::to_string(cm.num_layers()) + " layers");
  if (gpus != cell.gpus())
    throw InputError(w + ": the plan uses " + std::to_string(gpus) + " GPUs, the cell has " +
                     std::to_string(cell.gpus()));
}

// The co-location factor a stage's compute pays: all of it where the stage's
// own replicas or shards compute together; where the stage is one process,
// only the share of its work done while another stage of its host computes
// too. In a GPipe schedule with B >= 2 micro-batches the first and the last
// stage each compute alone for one of their B micro-batches (the first one's
// forward and the last one's backward, or the reverse), the middle stages
// never; with one micro-batch the stages take turns and no work overlaps.
// And a stage slower than the busiest other stage of its host overlaps only
// that one's work: with per-micro-batch times a < b, the two stages compute
// together (B - 1) a of the slower one's B b. `own_ms` and `other_ms` are
// those per-micro-batch times without the factor.
namespace {
double stage_colocation(double factor, int stage_gpus, int j, int stages, int micro_batches, double own_ms,
                        double other_ms) {
  if (factor == 1.0 || stage_gpus > 1) return factor;
  if (stages == 1 || micro_batches == 1 || !(other_ms > 0)) return 1.0;
  const bool end = j == 0 || j == stages - 1;
  double shared = end ? static_cast<double>(micro_batches - 1) / micro_batches : 1.0;
  if (own_ms > other_ms) shared *= other_ms / own_ms;
  return 1.0 + (factor - 1.0) * shared;
}

// Each stage's compute per micro-batch without the co-location factor
// (`raw`), and for each stage the largest of the other stages that have a GPU
// on one of its hosts (`other`).
void stage_overlap_times(const CostModel& cm, const Cell& cell, const Plan& plan, std::vector<double>& raw,
                         std::vector<double>& other) {
  const auto host_of = [&](int gpu) { return gpu / cell.gpus_per_host; };
  std::vector<std::pair<int, int>> hosts;  // first and last host of each stage
  int first = 0;
  for (size_t j = 0; j < plan.stages.size(); ++j) {
    const StagePlan& sp = plan.stages[j];
    const double m = static_cast<double>(plan.micro_batch_size) / sp.dp;
    for (int l = sp.first_layer; l < sp.first_layer + sp.num_layers; ++l) {
      const auto t = cm.layer_time(l, sp.tp, m);
      raw[j] += t.fwd_ms + t.bwd_ms;
    }
    hosts.emplace_back(host_of(first), host_of(first + sp.gpus() - 1));
    first += sp.gpus();
  }
  for (size_t j = 0; j < hosts.size(); ++j)
    for (size_t k = 0; k < hosts.size(); ++k)
      if (k != j && hosts[k].first <= hosts[j].second && hosts[j].first <= hosts[k].second)
        other[j] = std::max(other[j], raw[k]);
}
}  // namespace

Estimate estimate(const CostModel& cm, const Cell& cell, const Plan& plan) {
  check_plan(cm, cell, plan);
  Estimate e;
  const int S = cell.stages, B = plan.micro_batches;
  const double bpv = cm.model().bytes_per_value;
  const auto host_of = [&](int gpu) { return gpu / cell.gpus_per_host; };
  std::vector<double> s(S), c(S > 1 ? S - 1 : 0);
  const double coloc = cell.gpus_per_host > 1 ? cm.options().colocated_compute_factor : 1.0;
  // Every process of a host accumulates gradients during its backward, at
  // about the same time as the others; the step runs at once only on a
  // stage's own processes (its replicas and shards step together after the
  // all-reduce; pipeline stages step as each finishes its last backward).
  const int streams = cell.gpus_per_host;
  std::vector<double> raw(S, 0.0), other(S, 0.0);
  if (coloc != 1.0) stage_overlap_times(cm, cell, plan, raw, other);
  int offset = 0;
  for (int j = 0; j < S; ++j) {
    const StagePlan& sp = plan.stages[static_cast<size_t>(j)];
    StageEstimate st;
    st.first_layer = sp.first_layer;
    st.num_layers = sp.num_layers;
    st.dp = sp.dp;
    st.tp = sp.tp;
    const double m = static_cast<double>(plan.micro_batch_size) / sp.dp;
    st.replica_micro_batch = m;
    const double f =
        stage_colocation(coloc, sp.gpus(), j, S, B, raw[static_cast<size_t>(j)], other[static_cast<size_t>(j)]);
    const int first_gpu = offset, last_gpu = offset + sp.gpus() - 1;
    const bool stage_network = host_of(first_gpu) != host_of(last_gpu);
    double params = 0, saved = 0, max_act = 0, inputs = 0, max_saved = 0;
    for (int l = sp.first_layer; l < sp.first_layer + sp.num_layers; ++l) {
      const auto t = cm.layer_time(l, sp.tp, m);
      st.fwd_ms += f * t.fwd_ms;
      st.bwd_ms += f * t.bwd_ms;
      st.tp_comm_ms += cm.tp_comm_ms(l, sp.tp, m, false);
      params += cm.layer_params(l, sp.tp);
      saved += cm.layer_saved_bytes(l, sp.tp);
      inputs += cm.layer_input_bytes(l);
      max_saved = std::max(max_saved, cm.layer_saved_bytes(l, sp.tp));
      max_act = std::max(max_act, cm.model().layers[static_cast<size_t>(l)].activation_bytes_per_sample * m);
    }
    if (plan.recompute) st.recompute_ms = recompute_ms(st.fwd_ms, st.tp_comm_ms);
    s[static_cast<size_t>(j)] = st.fwd_ms + st.bwd_ms + st.tp_comm_ms + st.recompute_ms;
    if (j + 1 < S) {
      const int last = sp.first_layer + sp.num_layers - 1;
      st.network_send = host_of(last_gpu) != host_of(last_gpu + 1);
      const double bytes = cm.model().layers[static_cast<size_t>(last)].activation_bytes_per_sample * m;
      st.send_ms = cm.collective_ms("send_recv", 2, st.network_send, bytes);
      c[static_cast<size_t>(j)] = st.send_ms;
    }
    st.network_grad_sync = sp.dp > 1 && stage_network;
    st.grad_sync_total_ms = cm.collective_ms("all_reduce", sp.dp, stage_network, params * bpv);
    st.grad_sync_ms = cm.grad_sync_ms(sp.dp, stage_network, params * bpv, st.bwd_ms);
    st.optimizer_ms = cm.step_ms(params, sp.dp, std::min(streams, sp.gpus()));
    st.accumulate_ms = cm.accumulate_ms(params, sp.dp, B, streams);
    s[static_cast<size_t>(j)] += st.accumulate_ms;
    st.params_bytes = params * bpv;
    st.grads_bytes = params * bpv;
    st.optimizer_bytes = params * cm.optimizer_state_bytes_per_param();
    st.in_flight = std::min(B, S - j);
    st.activation_bytes = held_activation_bytes(plan.recompute, saved, inputs, max_saved, m, st.in_flight, max_act);
    e.stages.push_back(st);
    offset += sp.gpus();
  }
  e.memory_capacity_bytes = cm.memory_capacity_bytes();
  for (auto& st : e.stages) {
    st.memory_bytes = st.params_bytes + st.grads_bytes + st.optimizer_bytes + st.activation_bytes;
    e.memory_bytes = std::max(e.memory_bytes, st.memory_bytes);
    e.sync_ms = std::max(e.sync_ms, st.grad_sync_ms + st.optimizer_ms);
  }
  e.pipeline_compute_ms = pipeline_form(s, B);
  // On the critical path: each micro-batch's hand-off into the slowest
  // boundary, the first one's through every boundary (the fill), and the last
  // one's gradients back through every boundary (the drain); the other
  // gradients go back while the later stage works on the next micro-batch.
  e.pipeline_comm_ms = c.empty() ? 0 : pipeline_form(c, B) + std::accumulate(c.begin(), c.end(), 0.0);
  e.iteration_ms = e.pipeline_compute_ms + e.pipeline_comm_ms + e.sync_ms;
  e.samples_per_s = plan.global_batch() / (e.iteration_ms / 1000.0);
  if (e.memory_bytes > e.memory_capacity_bytes) {
    e.feasible = false;
    std::ostringstream os;
    os.precision(3);
    os << "needs " << e.memory_bytes / kGiB << " GiB per GPU, " << cell.gpu_type << " offers "
       << e.memory_capacity_bytes / kGiB << " GiB usable";
    e.infeasible_reason = os.str();
  }
  e.basis = cm.basis();
  e.precision = cm.precision();
  e.notes = cm.notes();
  if (const double f = cm.shared_memory_factor(streams); f != 1.0) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "memory-bound steps x%.3f: %d processes share the host's memory (measured)",
                  f, streams);
    e.notes.push_back(buf);
  }
  if (coloc != 1.0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "layer compute x%.3f: processes sharing a host (measured co-location)", coloc);
    e.notes.push_back(buf);
  }
  return e;
}

namespace {

std::vector<int> stage_values(const std::string& key, const std::string& v, int stages) {
  std::vector<int> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ':')) {
    char* end = nullptr;
    const long x = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || x < 1 || x > 1 << 20)
      throw InputError("--plan: " + key + "=" + v + ": '" + item + "' is not a positive integer");
    out.push_back(static_cast<int>(x));
  }
  if (out.size() == 1) out.assign(static_cast<size_t>(stages), out[0]);
  if (static_cast<int>(out.size()) != stages)
    throw InputError("--plan: " + key + "=" + v + " gives " + std::to_string(out.size()) +
                     " values for " + std::to_string(stages) + " stages");
  return out;
}

}  // namespace

Plan parse_plan(const std::string& spec, const CostModel& cm, const Cell& cell, int global_batch) {
  if (cell.stages < 1) throw InputError(where(cell) + ": stages must be >= 1");
  const int S = cell.stages;
  std::vector<int> dp, tp, layers;
  int mb = 1, mbs = 0;
  bool recompute = false;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw InputError("--plan: '" + item + "' is not key=value");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "dp") dp = stage_values(k, v, S);
    else if (k == "tp") tp = stage_values(k, v, S);
    else if (k == "layers") layers = stage_values(k, v, S);
    else if (k == "mb") mb = stage_values(k, v, 1)[0];
    else if (k == "mbs") mbs = stage_values(k, v, 1)[0];
    else if (k == "recompute" && (v == "0" || v == "1")) recompute = v == "1";
    else if (k == "recompute") throw InputError("--plan: recompute=" + v + ": 0 or 1");
    else throw InputError("--plan: unknown key '" + k + "' (dp, tp, mb, mbs, layers, recompute)");
  }
  const int per_stage = cell.gpus() / S;
  if (dp.empty() || tp.empty()) {
    if (cell.gpus() % S != 0)
      throw InputError(where(cell) + ": " + std::to_string(cell.gpus()) +
                       " GPUs do not split evenly over the stages; give dp and tp per stage");
    if (tp.empty() && dp.empty()) tp.assign(static_cast<size_t>(S), 1);
    if (tp.empty()) {
      for (int d : dp) tp.push_back(per_stage % d == 0 ? per_stage / d : 0);
      if (std::count(tp.begin(), tp.end(), 0)) throw InputError("--plan: dp does not divide the " +
                                                                std::to_string(per_stage) + " GPUs of a stage");
    }
    if (dp.empty()) {
      for (int t : tp) dp.push_back(per_stage % t == 0 ? per_stage / t : 0);
      if (std::count(dp.begin(), dp.end(), 0)) throw InputError("--plan: tp does not divide the " +
                                                                std::to_string(per_stage) + " GPUs of a stage");
    }
  }
  const int L = cm.num_layers();
  if (layers.empty()) {
    if (S > L) throw InputError(where(cell) + ": more stages than the model's " + std::to_string(L) + " layers");
    for (int j = 0; j < S; ++j) layers.push_back(L * (j + 1) / S - L * j / S);
  }
  Plan p;
  p.micro_batches = mb;
  p.recompute = recompute;
  if (mbs == 0) {
    if (global_batch < 1 || global_batch % mb != 0)
      throw InputError("--plan: global batch " + std::to_string(global_batch) +
                       " is not divisible by mb=" + std::to_string(mb));
    mbs = global_batch / mb;
  }
  p.micro_batch_size = mbs;
  int first = 0;
  for (int j = 0; j < S; ++j) {
    p.stages.push_back({first, layers[static_cast<size_t>(j)], dp[static_cast<size_t>(j)],
                        tp[static_cast<size_t>(j)]});
    first += layers[static_cast<size_t>(j)];
  }
  check_plan(cm, cell, p);
  return p;
}

Cell make_cell(const std::string& model, const std::string& gpu_type, int gpus, int stages,
               int max_gpus_per_host) {
  if (gpus < 1) throw InputError("--gpus must be >= 1");
  if (max_gpus_per_host < 1) throw InputError("--gpus-per-host must be >= 1");
  Cell c;
  c.model = model;
  c.gpu_type = gpu_type;
  c.stages = stages;
  if (gpus <= max_gpus_per_host) {
    c.hosts = 1;
    c.gpus_per_host = gpus;
  } else {
    if (gpus % max_gpus_per_host != 0)
      throw InputError("--gpus " + std::to_string(gpus) + " is not a multiple of " +
                       std::to_string(max_gpus_per_host) + " GPUs per host");
    c.hosts = gpus / max_gpus_per_host;
    c.gpus_per_host = max_gpus_per_host;
  }
  return c;
}

}  // namespace cellsched::estimator
