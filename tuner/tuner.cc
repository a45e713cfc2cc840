#include "tuner/tuner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace cellsched::tuner {

using estimator::Cell;
using estimator::CostModel;
using estimator::Estimate;
using estimator::Plan;
using estimator::StagePlan;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Shape {
  int dp = 1, tp = 1;
};

std::vector<int> micro_batch_counts(const TuneOptions& o) {
  if (o.global_batch < 1) throw InputError("global batch must be >= 1");
  std::vector<int> out;
  if (!o.micro_batch_counts.empty()) {
    for (int b : o.micro_batch_counts) {
      if (b < 1 || o.global_batch % b != 0)
        throw InputError("micro-batch count " + std::to_string(b) + " does not divide the global batch " +
                         std::to_string(o.global_batch));
      out.push_back(b);
    }
  } else {
    for (int b = 1; b <= o.global_batch; b *= 2)
      if (o.global_batch % b == 0) out.push_back(b);
  }
  std::sort(out.begin(), out.end(), std::greater<>());  // many micro-batches first: good incumbents
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// (micro-batch count, recomputation) pairs to tune: every count without
// recomputation first (good incumbents), then with it when allowed.
std::vector<std::pair<int, bool>> plan_kinds(const TuneOptions& o) {
  std::vector<std::pair<int, bool>> out;
  const std::vector<int> counts = micro_batch_counts(o);
  for (int rc = 0; rc <= (o.recompute ? 1 : 0); ++rc)
    for (int b : counts) out.emplace_back(b, rc == 1);
  return out;
}

std::vector<Shape> shapes_for(const CostModel& cm, const Cell& cell, int g, int mbs, const TuneOptions& o) {
  std::vector<Shape> out;
  for (int tp = 1; tp <= g && tp <= cell.gpus_per_host && tp <= std::max(1, o.max_tp); tp *= 2) {
    if (g % tp != 0) break;
    if (tp > 1 && !cm.has_tp_layers()) break;
    // Over several hosts, a tp group of consecutive GPUs straddles two hosts
    // somewhere unless tp divides the GPUs per host (check_plan refuses that).
    if (cell.hosts > 1 && cell.gpus_per_host % tp != 0) break;
    const int dp = g / tp;
    if (mbs % dp != 0) continue;
    out.push_back({dp, tp});
  }
  return out;
}

void check_cell(const CostModel& cm, const Cell& cell) {
  const std::string w = "cell " + cell.model + " on " + std::to_string(cell.gpus()) + " " + cell.gpu_type +
                        " GPUs, " + std::to_string(cell.stages) + " stage(s)";
  if (cell.hosts < 1 || cell.gpus_per_host < 1 || cell.stages < 1)
    throw InputError(w + ": hosts, GPUs per host and stages must be >= 1");
  if (cell.model != cm.model().name) throw InputError(w + ": the cost model is for " + cm.model().name);
  if (cell.stages > cm.num_layers())
    throw InputError(w + ": more stages than the model's " + std::to_string(cm.num_layers()) + " layers");
  if (cell.gpus() % cell.stages != 0)
    throw InputError(w + ": the GPUs do not split evenly over the stages");
}

// A DP label: one way to place the first layers on the first stages.
struct Label {
  double max_s = 0, max_c = 0, max_sync = 0, sum = 0;  // sum of stage and send times
  double mem = 0;                                       // largest stage footprint
  int prev_a = -1, prev_idx = -1, shape = -1;
};

bool dominates(const Label& x, const Label& y) {
  return x.max_s <= y.max_s && x.max_c <= y.max_c && x.max_sync <= y.max_sync && x.sum <= y.sum;
}

// Keeps the Pareto-optimal final plans (time vs memory), fastest first.
void add_pareto(std::vector<TunedPlan>& set, TunedPlan p, int cap) {
  for (const auto& q : set)
    if (q.estimate.iteration_ms <= p.estimate.iteration_ms && q.estimate.memory_bytes <= p.estimate.memory_bytes)
      return;
  std::erase_if(set, [&](const TunedPlan& q) {
    return p.estimate.iteration_ms <= q.estimate.iteration_ms && p.estimate.memory_bytes <= q.estimate.memory_bytes;
  });
  set.push_back(std::move(p));
  std::sort(set.begin(), set.end(), [](const TunedPlan& a, const TunedPlan& b) {
    return a.estimate.iteration_ms < b.estimate.iteration_ms;
  });
  if (static_cast<int>(set.size()) > cap) set.resize(static_cast<size_t>(cap));
}

// Per shape and layer, what a stage holding the layer pays and keeps: time
// (forward, backward, TP communication, recomputation), backward time,
// parameters, saved bytes and input bytes; and the fastest time of layers
// [l, L) over the shapes (the lower bound's remainder).
struct LayerTable {
  std::vector<std::vector<double>> time, bwd, params, saved, input;  // [shape][layer]
  std::vector<double> suffix_min;
};

LayerTable layer_table(const CostModel& cm, const std::vector<Shape>& shapes, int mbs, bool rc) {
  const size_t K = shapes.size(), L = static_cast<size_t>(cm.num_layers());
  const std::vector<std::vector<double>> empty(K, std::vector<double>(L));
  LayerTable t{empty, empty, empty, empty, empty, std::vector<double>(L + 1, 0)};
  for (size_t k = 0; k < K; ++k) {
    const double m = static_cast<double>(mbs) / shapes[k].dp;
    for (size_t l = 0; l < L; ++l) {
      const int li = static_cast<int>(l);
      const auto lt = cm.layer_time(li, shapes[k].tp, m);
      const double tpc = cm.tp_comm_ms(li, shapes[k].tp, m, false);
      t.time[k][l] = lt.fwd_ms + lt.bwd_ms + tpc + (rc ? estimator::recompute_ms(lt.fwd_ms, tpc) : 0);
      t.bwd[k][l] = lt.bwd_ms;
      t.params[k][l] = cm.layer_params(li, shapes[k].tp);
      t.saved[k][l] = cm.layer_saved_bytes(li, shapes[k].tp);
      t.input[k][l] = cm.layer_input_bytes(li);
    }
  }
  for (size_t l = L; l-- > 0;) {
    double mn = kInf;
    for (size_t k = 0; k < K; ++k) mn = std::min(mn, t.time[k][l]);
    t.suffix_min[l] = t.suffix_min[l + 1] + mn;
  }
  return t;
}

// The label-setting search over one (micro-batch count, recomputation) kind:
// labels[j][a] holds the Pareto labels of the first j stages holding layers
// [0, a). `incumbent` (the best complete plan's bound so far) is shared by
// every kind of the cell, so later kinds prune against earlier ones.
class StageSearch {
 public:
  StageSearch(const CostModel& cm, const Cell& cell, const TuneOptions& o, int B, bool rc,
              std::vector<Shape> shapes, double& incumbent, long& labels_created)
      : cm_(cm), cell_(cell), B_(B), rc_(rc), L_(cm.num_layers()), S_(cell.stages),
        g_(cell.gpus() / cell.stages), mbs_(o.global_batch / B), cap_(static_cast<size_t>(std::max(1, o.labels_per_state))),
        shapes_(std::move(shapes)), table_(layer_table(cm, shapes_, mbs_, rc)), incumbent_(incumbent),
        created_(labels_created),
        labels_(static_cast<size_t>(S_) + 1, std::vector<std::vector<Label>>(static_cast<size_t>(L_) + 1)) {
    labels_[0][0].push_back(Label{});
  }

  void run() {
    for (int j = 0; j < S_; ++j)
      for (int a = j; a < L_ - (S_ - j - 1); ++a) {
        const auto& here = at(j, a);
        for (int idx = 0; idx < static_cast<int>(here.size()); ++idx) extend(j, a, idx);
      }
  }

  // Every complete plan into the cell's Pareto set, priced by estimate().
  void collect(TuneResult& res, int pareto_size) const {
    const auto& done = at(S_, L_);
    for (int idx = 0; idx < static_cast<int>(done.size()); ++idx) {
      const Plan plan = plan_of(idx);
      TunedPlan tp{plan, estimator::estimate(cm_, cell_, plan)};
      if (tp.estimate.feasible) add_pareto(res.pareto, std::move(tp), std::max(1, pareto_size));
    }
  }

 private:
  std::vector<Label>& at(int j, int a) { return labels_[static_cast<size_t>(j)][static_cast<size_t>(a)]; }
  const std::vector<Label>& at(int j, int a) const {
    return labels_[static_cast<size_t>(j)][static_cast<size_t>(a)];
  }
  int host_of(int gpu) const { return gpu / cell_.gpus_per_host; }

  double lower_bound(const Label& x, int j, int a) const {
    const double rem = table_.suffix_min[static_cast<size_t>(a)];
    const int left = S_ - j;
    const double ms = left > 0 ? std::max(x.max_s, rem / left) : x.max_s;
    return (B_ - 1) * (ms + x.max_c) + x.sum + rem + x.max_sync;
  }

  // Stage j, starting at layer a after label idx, as every shape and every end layer.
  void extend(int j, int a, int idx) {
    const Label x = at(j, a)[static_cast<size_t>(idx)];
    if (lower_bound(x, j, a) >= incumbent_) return;
    const bool stage_net = host_of(j * g_) != host_of(j * g_ + g_ - 1);
    const bool send_net = j + 1 < S_ && host_of((j + 1) * g_ - 1) != host_of((j + 1) * g_);
    const int in_flight = std::min(B_, S_ - j);
    const int b_max = L_ - (S_ - j - 1);
    const double bpv = cm_.model().bytes_per_value, opt_bytes = cm_.optimizer_state_bytes_per_param();
    const double state_bytes = 2 * bpv + opt_bytes;  // per parameter, as price_stage
    const double capacity = cm_.memory_capacity_bytes();
    for (size_t k = 0; k < shapes_.size(); ++k) {
      const double m = static_cast<double>(mbs_) / shapes_[k].dp;
      double s = 0, p = 0, sv = 0, act = 0, bwd = 0, in = 0, max_sv = 0;
      for (int b = a + 1; b <= b_max; ++b) {
        const size_t l = static_cast<size_t>(b - 1);
        s += table_.time[k][l];
        bwd += table_.bwd[k][l];
        p += table_.params[k][l];
        sv += table_.saved[k][l];
        in += table_.input[k][l];
        max_sv = std::max(max_sv, table_.saved[k][l]);
        act = std::max(act, cm_.model().layers[l].activation_bytes_per_sample * m);
        const double mem =
            p * state_bytes + estimator::held_activation_bytes(rc_, sv, in, max_sv, m, in_flight, act);
        if (mem > capacity) break;  // longer stages only need more
        if (j == S_ - 1 && b != L_) continue;
        // Gradient accumulation at stage level, as estimate() prices it.
        const double s_acc = s + cm_.accumulate_ms(p, shapes_[k].dp, B_, cell_.gpus_per_host);
        Label y;
        y.max_s = std::max(x.max_s, s_acc);
        const double c =
            j + 1 < S_
                ? 2 * cm_.collective_ms("send_recv", 2, send_net, cm_.model().layers[l].activation_bytes_per_sample * m)
                : 0;
        y.max_c = std::max(x.max_c, c);
        y.sum = x.sum + s_acc + c;
        y.max_sync = std::max(x.max_sync, cm_.grad_sync_ms(shapes_[k].dp, stage_net, p * bpv, bwd,
                                                           estimator::dp_nics(shapes_[k].dp, shapes_[k].tp,
                                                                              cell_.gpus_per_host)) +
                                              cm_.step_ms(p, shapes_[k].dp,
                                                          std::min(cell_.gpus_per_host, shapes_[k].dp * shapes_[k].tp)));
        y.mem = std::max(x.mem, mem);
        y.prev_a = a;
        y.prev_idx = idx;
        y.shape = static_cast<int>(k);
        offer(y, j + 1, b);
      }
    }
  }

  // A new label of the first j stages holding [0, b): kept unless pruned or dominated.
  void offer(const Label& y, int j, int b) {
    if (lower_bound(y, j, b) >= incumbent_) return;
    ++created_;
    auto& there = at(j, b);
    if (std::any_of(there.begin(), there.end(), [&](const Label& z) { return dominates(z, y); })) return;
    std::erase_if(there, [&](const Label& z) { return dominates(y, z); });
    there.push_back(y);
    if (there.size() > 2 * cap_) {
      // Keep the labels with the best partial objective.
      std::sort(there.begin(), there.end(),
                [&](const Label& u, const Label& v) { return lower_bound(u, j, b) < lower_bound(v, j, b); });
      there.resize(cap_);
    }
    if (j == S_) incumbent_ = std::min(incumbent_, lower_bound(y, S_, L_));
  }

  // The plan of complete label idx, read back stage by stage.
  Plan plan_of(int idx) const {
    Plan plan;
    plan.micro_batches = B_;
    plan.micro_batch_size = mbs_;
    plan.recompute = rc_;
    plan.stages.resize(static_cast<size_t>(S_));
    int a = L_, i = idx;
    for (int j = S_; j > 0; --j) {
      const Label& y = at(j, a)[static_cast<size_t>(i)];
      const Shape sh = shapes_[static_cast<size_t>(y.shape)];
      plan.stages[static_cast<size_t>(j) - 1] = StagePlan{y.prev_a, a - y.prev_a, sh.dp, sh.tp};
      i = y.prev_idx;
      a = y.prev_a;
    }
    return plan;
  }

  const CostModel& cm_;
  const Cell& cell_;
  const int B_;
  const bool rc_;
  const int L_, S_, g_, mbs_;
  const size_t cap_;
  const std::vector<Shape> shapes_;
  const LayerTable table_;
  double& incumbent_;
  long& created_;
  std::vector<std::vector<std::vector<Label>>> labels_;
};

}  // namespace

TuneResult tune_cell(const CostModel& cm, const Cell& cell, const TuneOptions& o) {
  check_cell(cm, cell);
  TuneResult res;
  res.cell = cell;
  double incumbent = kInf;
  for (const auto& [B, rc] : plan_kinds(o)) {
    std::vector<Shape> shapes = shapes_for(cm, cell, cell.gpus() / cell.stages, o.global_batch / B, o);
    if (shapes.empty()) continue;
    res.shapes += static_cast<long>(shapes.size());
    StageSearch search(cm, cell, o, B, rc, std::move(shapes), incumbent, res.labels);
    search.run();
    search.collect(res, o.pareto_size);
  }
  res.feasible = !res.pareto.empty();
  return res;
}

std::vector<int> stage_counts(const CostModel& cm, int gpus) {
  std::vector<int> out;
  for (int s = 1; s <= gpus && s <= cm.num_layers(); ++s)
    if (gpus % s == 0) out.push_back(s);
  return out;
}

TuneResult tune_auto(const CostModel& cm, Cell cell, const TuneOptions& o, std::vector<TuneResult>* per_stage) {
  TuneResult best;
  best.cell = cell;
  for (int s : stage_counts(cm, cell.gpus())) {
    cell.stages = s;
    TuneResult r = tune_cell(cm, cell, o);
    best.labels += r.labels;
    best.shapes += r.shapes;
    if (r.feasible && (!best.feasible || r.best().estimate.iteration_ms < best.best().estimate.iteration_ms)) {
      const long labels = best.labels, shapes = best.shapes;
      best = r;
      best.labels = labels;
      best.shapes = shapes;
    }
    if (per_stage) per_stage->push_back(std::move(r));
  }
  return best;
}

std::vector<TuneResult> tune_all(const CostModel& cm, int max_gpus, int max_gpus_per_host, const TuneOptions& o) {
  std::vector<TuneResult> out;
  for (int n = 1; n <= max_gpus; n *= 2) {
    const Cell base = estimator::make_cell(cm.model().name, cm.gpu_type(), n, 1, max_gpus_per_host);
    tune_auto(cm, base, o, &out);
  }
  return out;
}

TuneResult exhaustive(const CostModel& cm, const Cell& cell, const TuneOptions& o) {
  check_cell(cm, cell);
  TuneResult res;
  res.cell = cell;
  const int L = cm.num_layers(), S = cell.stages, g = cell.gpus() / S;
  for (const auto& [B, rc] : plan_kinds(o)) {
    const int mbs = o.global_batch / B;
    const std::vector<Shape> shapes = shapes_for(cm, cell, g, mbs, o);
    if (shapes.empty()) continue;
    Plan plan;
    plan.micro_batches = B;
    plan.micro_batch_size = mbs;
    plan.recompute = rc;
    plan.stages.resize(static_cast<size_t>(S));
    std::function<void(int, int)> rec = [&](int j, int a) {
      if (j == S) {
        if (a != L) return;
        ++res.labels;
        TunedPlan tp{plan, estimator::estimate(cm, cell, plan)};
        if (tp.estimate.feasible) add_pareto(res.pareto, std::move(tp), std::max(1, o.pareto_size));
        return;
      }
      for (int b = a + 1; b <= L - (S - j - 1); ++b)
        for (const Shape& sh : shapes) {
          plan.stages[static_cast<size_t>(j)] = StagePlan{a, b - a, sh.dp, sh.tp};
          rec(j + 1, b);
        }
    };
    rec(0, 0);
  }
  res.feasible = !res.pareto.empty();
  return res;
}

std::string plan_json(const Plan& plan) {
  nlohmann::json j;
  j["micro_batches"] = plan.micro_batches;
  j["micro_batch_size"] = plan.micro_batch_size;
  j["global_batch"] = plan.global_batch();
  j["recompute"] = plan.recompute;
  auto& st = j["stages"] = nlohmann::json::array();
  for (const auto& s : plan.stages)
    st.push_back({{"first_layer", s.first_layer}, {"num_layers", s.num_layers}, {"dp", s.dp}, {"tp", s.tp}});
  return j.dump();
}

Plan plan_from_json(const std::string& text) {
  Plan p;
  try {
    const auto j = nlohmann::json::parse(text);
    p.micro_batches = j.at("micro_batches").get<int>();
    p.micro_batch_size = j.at("micro_batch_size").get<int>();
    p.recompute = j.value("recompute", false);  // plans stored before it was an option
    for (const auto& s : j.at("stages"))
      p.stages.push_back({s.at("first_layer").get<int>(), s.at("num_layers").get<int>(), s.at("dp").get<int>(),
                          s.at("tp").get<int>()});
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("stored plan: ") + e.what());
  }
  return p;
}

std::string breakdown_json(const Estimate& e) {
  // Bytes are whole: integers in the JSON (10435330048, not 10435330048.0);
  // a replica's micro-batch is an integer wherever it is whole.
  const auto bytes = [](double b) -> nlohmann::json {
    if (std::isfinite(b) && std::abs(b) < 9e15) return static_cast<int64_t>(std::llround(b));
    return b;
  };
  const auto count = [](double x) -> nlohmann::json {
    if (std::isfinite(x) && x == std::floor(x) && std::abs(x) < 9e15) return static_cast<int64_t>(x);
    return x;
  };
  nlohmann::json j;
  j["basis"] = estimator::basis_name(e.basis);
  j["precision"] = precision_name(e.precision);
  j["notes"] = e.notes;
  j["iteration_ms"] = e.iteration_ms;
  j["samples_per_s"] = e.samples_per_s;
  j["pipeline_compute_ms"] = e.pipeline_compute_ms;
  j["pipeline_comm_ms"] = e.pipeline_comm_ms;
  j["sync_ms"] = e.sync_ms;
  j["memory_bytes"] = bytes(e.memory_bytes);
  j["memory_capacity_bytes"] = bytes(e.memory_capacity_bytes);
  j["feasible"] = e.feasible;
  if (!e.feasible) j["infeasible_reason"] = e.infeasible_reason;
  auto& st = j["stages"] = nlohmann::json::array();
  for (const auto& s : e.stages)
    st.push_back({{"first_layer", s.first_layer}, {"num_layers", s.num_layers}, {"dp", s.dp}, {"tp", s.tp},
                  {"replica_micro_batch", count(s.replica_micro_batch)}, {"fwd_ms", s.fwd_ms}, {"bwd_ms", s.bwd_ms},
                  {"tp_comm_ms", s.tp_comm_ms}, {"send_ms", s.send_ms}, {"send_transfer_ms", s.send_transfer_ms}, {"grad_sync_ms", s.grad_sync_ms}, {"grad_sync_total_ms", s.grad_sync_total_ms},
                  {"optimizer_ms", s.optimizer_ms}, {"accumulate_ms", s.accumulate_ms},
                  {"recompute_ms", s.recompute_ms}, {"params_bytes", bytes(s.params_bytes)},
                  {"grads_bytes", bytes(s.grads_bytes)}, {"optimizer_bytes", bytes(s.optimizer_bytes)},
                  {"activation_bytes", bytes(s.activation_bytes)}, {"in_flight", s.in_flight},
                  {"memory_bytes", bytes(s.memory_bytes)}});
  return j.dump();
}

}  // namespace cellsched::tuner
