#include "estimator/estimator.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace cellsched::estimator {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string where(const Cell& cell) {
  return "cell " + cell.model + " on " + std::to_string(cell.hosts) + "x" +
         std::to_string(cell.gpus_per_host) + " " + cell.gpu_type + ", " +
         std::to_string(cell.stages) + " stage(s)";
}

bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace

double pipeline_form(const std::vector<double>& x, int micro_batches) {
  double mx = 0, sum = 0;
  for (double v : x) {
    mx = std::max(mx, v);
    sum += v;
  }
  return mx * (micro_batches - 1) + sum;
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
    // Tensor-parallel groups (tp innermost, consecutive GPUs) stay inside a
    // host, as Megatron places them: their all-reduces are priced on NVLink/PCIe.
    for (int k = 0; k < s.dp && s.tp > 1; ++k) {
      const int a = gpus + k * s.tp, b = a + s.tp - 1;
      if (a / cell.gpus_per_host != b / cell.gpus_per_host)
        throw InputError(sw + "its tp group on GPUs " + std::to_string(a) + "-" + std::to_string(b) +
                         " spans two hosts of " + std::to_string(cell.gpus_per_host) +
                         " GPUs; tensor parallelism stays inside a host");
    }
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

// Each stage's forward and backward compute per micro-batch, summed over
// its layers, before the co-location factor.
struct StageCompute {
  double fwd_ms = 0, bwd_ms = 0;
};

std::vector<StageCompute> stage_compute(const CostModel& cm, const Plan& plan) {
  std::vector<StageCompute> out;
  for (const StagePlan& sp : plan.stages) {
    StageCompute sc;
    const double m = static_cast<double>(plan.micro_batch_size) / sp.dp;
    for (int l = sp.first_layer; l < sp.first_layer + sp.num_layers; ++l) {
      const auto t = cm.layer_time(l, sp.tp, m);
      sc.fwd_ms += t.fwd_ms;
      sc.bwd_ms += t.bwd_ms;
    }
    out.push_back(sc);
  }
  return out;
}

// For each stage, the largest per-micro-batch compute among the other stages
// that have a GPU on one of its hosts (0 when none has).
std::vector<double> busiest_neighbour_ms(const Cell& cell, const Plan& plan, const std::vector<StageCompute>& raw) {
  const auto host_of = [&](int gpu) { return gpu / cell.gpus_per_host; };
  std::vector<std::pair<int, int>> hosts;  // first and last host of each stage
  int first = 0;
  for (const StagePlan& sp : plan.stages) {
    hosts.emplace_back(host_of(first), host_of(first + sp.gpus() - 1));
    first += sp.gpus();
  }
  std::vector<double> other(hosts.size(), 0.0);
  for (size_t j = 0; j < hosts.size(); ++j)
    for (size_t k = 0; k < hosts.size(); ++k)
      if (k != j && hosts[k].first <= hosts[j].second && hosts[j].first <= hosts[k].second)
        other[j] = std::max(other[j], raw[k].fwd_ms + raw[k].bwd_ms);
  return other;
}

// Stage `j` of the plan, whose first GPU is `first_gpu`: its times per
// micro-batch and per iteration, and its memory (but not memory_bytes, the
// sum, which the caller fills). `f` is its co-location factor.
StageEstimate price_stage(const CostModel& cm, const Cell& cell, const Plan& plan, size_t j, int first_gpu,
                          const StageCompute& raw, double f) {
  const StagePlan& sp = plan.stages[j];
  const int S = cell.stages, B = plan.micro_batches;
  const double bpv = cm.model().bytes_per_value;
  const auto host_of = [&](int gpu) { return gpu / cell.gpus_per_host; };
  // Every process of a host accumulates gradients during its backward, at
  // about the same time as the others; the step runs at once only on a
  // stage's own processes (its replicas and shards step together after the
  // all-reduce; pipeline stages step as each finishes its last backward).
  const int streams = cell.gpus_per_host;
  StageEstimate st;
  st.first_layer = sp.first_layer;
  st.num_layers = sp.num_layers;
  st.dp = sp.dp;
  st.tp = sp.tp;
  const double m = static_cast<double>(plan.micro_batch_size) / sp.dp;
  st.replica_micro_batch = m;
  st.fwd_ms = f * raw.fwd_ms;
  st.bwd_ms = f * raw.bwd_ms;
  const int last_gpu = first_gpu + sp.gpus() - 1;
  double params = 0, saved = 0, max_act = 0, inputs = 0, max_saved = 0;
  for (int l = sp.first_layer; l < sp.first_layer + sp.num_layers; ++l) {
    st.tp_comm_ms += cm.tp_comm_ms(l, sp.tp, m, false);
    params += cm.layer_params(l, sp.tp);
    saved += cm.layer_saved_bytes(l, sp.tp);
    inputs += cm.layer_input_bytes(l);
    max_saved = std::max(max_saved, cm.layer_saved_bytes(l, sp.tp));
    max_act = std::max(max_act, cm.model().layers[static_cast<size_t>(l)].activation_bytes_per_sample * m);
  }
  if (plan.recompute) st.recompute_ms = recompute_ms(st.fwd_ms, st.tp_comm_ms);
  if (static_cast<int>(j) + 1 < S) {
    const int last = sp.first_layer + sp.num_layers - 1;
    st.network_send = host_of(last_gpu) != host_of(last_gpu + 1);
    const double bytes = cm.model().layers[static_cast<size_t>(last)].activation_bytes_per_sample * m;
    st.send_ms = cm.collective_ms("send_recv", 2, st.network_send, bytes);
    st.send_transfer_ms = cm.handoff_transfer_ms(st.network_send, bytes);
  }
  const bool stage_network = host_of(first_gpu) != host_of(last_gpu);
  st.network_grad_sync = sp.dp > 1 && stage_network;
  const int nics = dp_nics(sp.dp, sp.tp, cell.gpus_per_host);
  st.grad_sync_total_ms = cm.collective_ms("all_reduce", sp.dp, stage_network, params * bpv, nics);
  st.grad_sync_ms = cm.grad_sync_ms(sp.dp, stage_network, params * bpv, st.bwd_ms, nics);
  st.optimizer_ms = cm.step_ms(params, sp.dp, std::min(streams, sp.gpus()));
  st.accumulate_ms = cm.accumulate_ms(params, sp.dp, B, streams);
  st.params_bytes = params * bpv;
  // Mixed precision in 16 bytes per parameter: 2 + 2 + fp32 master 4 + Adam 8,
  // the same total as autocast's fp32 weights 4 + fp32 gradients 4 + Adam 8
  // (the cast bf16 copies are transient). Counting the gradients at 4 bytes
  // (Megatron's fp32 main_grad beside bf16 weights: 18 bytes) took the
  // measured H100 peak-memory rows from 13.9 % to 19.3 % median error.
  st.grads_bytes = params * bpv;
  st.optimizer_bytes = params * cm.optimizer_state_bytes_per_param();
  st.in_flight = std::min(B, S - static_cast<int>(j));
  st.activation_bytes = held_activation_bytes(plan.recompute, saved, inputs, max_saved, m, st.in_flight, max_act);
  st.memory_bytes = st.params_bytes + st.grads_bytes + st.optimizer_bytes + st.activation_bytes;
  return st;
}

// What the estimate says besides its figures: the cost model's notes and the
// measured factors it applied.
std::vector<std::string> estimate_notes(const CostModel& cm, int streams, double coloc) {
  std::vector<std::string> notes = cm.notes();
  if (const double f = cm.shared_memory_factor(streams); f != 1.0) {
    char buf[160];
    const int seen = cm.measured_streams();  // beyond them the host's total is held (extrapolated)
    std::snprintf(buf, sizeof buf, "memory-bound steps x%.3f: %d processes share the host's memory (%s)", f, streams,
                  streams <= seen ? "measured" : ("extrapolated from " + std::to_string(seen) + " measured").c_str());
    notes.push_back(buf);
  }
  if (coloc != 1.0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "layer compute x%.3f: processes sharing a host (measured co-location)", coloc);
    notes.push_back(buf);
  }
  return notes;
}

}  // namespace

Estimate estimate(const CostModel& cm, const Cell& cell, const Plan& plan) {
  check_plan(cm, cell, plan);
  cm.begin_plan();
  Estimate e;
  const int S = cell.stages, B = plan.micro_batches;
  const double coloc = cell.gpus_per_host > 1 ? cm.options().colocated_compute_factor : 1.0;
  const std::vector<StageCompute> raw = stage_compute(cm, plan);
  const std::vector<double> other =
      coloc != 1.0 ? busiest_neighbour_ms(cell, plan, raw) : std::vector<double>(raw.size(), 0.0);
  // Per micro-batch: each stage's compute; each boundary's hand-off, whole and its transfer alone.
  std::vector<double> s(S), c(S > 1 ? S - 1 : 0), transfer(c.size());
  int first_gpu = 0;
  for (size_t j = 0; j < plan.stages.size(); ++j) {
    const StagePlan& sp = plan.stages[j];
    const double f = stage_colocation(coloc, sp.gpus(), static_cast<int>(j), S, B,
                                      raw[j].fwd_ms + raw[j].bwd_ms, other[j]);
    StageEstimate st = price_stage(cm, cell, plan, j, first_gpu, raw[j], f);
    s[j] = st.fwd_ms + st.bwd_ms + st.tp_comm_ms + st.recompute_ms + st.accumulate_ms;
    if (j < c.size()) {
      c[j] = st.send_ms;
      transfer[j] = st.send_transfer_ms;
    }
    e.memory_bytes = std::max(e.memory_bytes, st.memory_bytes);
    e.sync_ms = std::max(e.sync_ms, st.grad_sync_ms + st.optimizer_ms);
    e.stages.push_back(st);
    first_gpu += sp.gpus();
  }
  e.memory_capacity_bytes = cm.memory_capacity_bytes();
  e.pipeline_compute_ms = pipeline_form(s, B);
  // On the critical path: the first micro-batch's activations through every
  // boundary (the fill) and the last one's gradients back through every
  // boundary (the drain), each hand-off whole; in between, B - 1 hand-offs
  // into the slowest boundary, but only their transfer. Sends are posted
  // without waiting, so a hand-off's latency runs while one stage or the
  // other is still computing: it delays the pipeline once, not once per
  // micro-batch (validate's 8 x 1 pipeline row was over by a median 6.7 %
  // while the latency of all 9 of its hand-offs was charged).
  const double widest = transfer.empty() ? 0 : *std::max_element(transfer.begin(), transfer.end());
  e.pipeline_comm_ms = (B - 1) * widest + 2 * std::accumulate(c.begin(), c.end(), 0.0);
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
  e.notes = estimate_notes(cm, cell.gpus_per_host, coloc);
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
      throw InputError("--plan: " + key + "=" + v + ": '" + item + "' is not an integer in [1, 1048576]");
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
  std::vector<std::string> seen;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw InputError("--plan: '" + item + "' is not key=value");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), k) != seen.end())
      throw InputError("--plan: " + k + " appears twice");
    seen.push_back(k);
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