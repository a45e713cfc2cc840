// crius (DESIGN "Policies"): cell-based, elastic.
//
// Each job runs in a cell: one GPU type and a power-of-two GPU count (1, 2,
// 4, 8, 16 ...), whose throughput comes from the oracle (the tuner's cell
// estimates, which already pick the best pipeline stages, or a measured
// table). Jobs are served in arrival order. The allocation changes only when
// jobs arrive or depart (or a job could not be placed before):
//  1. running jobs keep their cells;
//  2. waiting jobs, in arrival order, take the cell with the highest
//     throughput that fits the free GPUs, starting from their requested size
//     and halving it until one fits; if none fits, running jobs are scaled
//     down (halved) where that loses the least throughput per GPU, as long
//     as the loss per freed GPU is below what the waiting job gains per GPU;
//  3. free GPUs then go, one move at a time, to the move with the largest
//     marginal throughput gain per GPU, relative to the job's current
//     throughput: doubling a job on its type, or moving it to another type
//     (same size) that is faster. A move must gain more than `min_gain` to be
//     worth its restart.
// Workers of a cell go on the fewest nodes of its type; a job whose cell is
// unchanged keeps its exact GPUs.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "scheduler/oracle.h"
#include "scheduler/policies.h"

namespace cellsched {
namespace {

struct Cell {
  int type = -1;  // index into the cluster's GPU types; -1 = none (waiting)
  int gpus = 0;
  bool operator==(const Cell&) const = default;
};

class Crius : public Policy {
 public:
  explicit Crius(CriusOptions o) : options_(o) {}
  std::string name() const override { return "crius"; }
  bool elastic() const override { return true; }

  void decide(const RoundContext& ctx, std::vector<Allocation>& out) override {
    const Cluster& cluster = *ctx.cluster;
    const auto& jobs = *ctx.jobs;
    index_types(cluster);

    // What changed since the last decision?
    std::set<int64_t> ids;
    for (const JobState* s : jobs) ids.insert(s->job->id);
    bool any_waiting = false;
    for (const JobState* s : jobs) any_waiting = any_waiting || s->current.empty();
    if (ids == last_ids_ && !any_waiting) return;  // keep everything as it is
    last_ids_ = ids;

    // 1. Running jobs keep their cells.
    Round r{ctx, jobs, std::vector<Cell>(jobs.size()), std::vector<int>(types_.size(), 0)};
    for (size_t n = 0; n < cluster.nodes.size(); ++n) r.free[node_type_[n]] += cluster.nodes[n].gpus;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Allocation& a = jobs[i]->current;
      if (a.workers.empty()) continue;
      r.cell[i] = {static_cast<int>(node_type_[a.workers[0].node]), total(a.workers)};
      r.free[r.cell[i].type] -= r.cell[i].gpus;
    }
    // 2. Waiting jobs in arrival order.
    for (size_t i = 0; i < jobs.size(); ++i)
      if (r.cell[i].type < 0) admit(r, i);
    // 3. Marginal moves into free GPUs.
    for (int guard = 0; guard < 4 * static_cast<int>(jobs.size()) + 16; ++guard)
      if (!move_once(r)) break;
    place(r, out);
  }

 private:
  // One decision's cells and the GPUs of each type they leave free.
  struct Round {
    const RoundContext& ctx;
    const std::vector<JobState*>& jobs;
    std::vector<Cell> cell;
    std::vector<int> free;  // per type
  };

  // A cell is (type, GPUs, locality): it fits on one node when a node of
  // its type has that many GPUs (placement takes the fewest nodes).
  double thr(const Round& r, size_t i, int type, int gpus) const {
    return r.ctx.oracle->throughput(*r.jobs[i]->job, types_[type], gpus, gpus <= max_node_[type]);
  }

  // Waiting job i takes the fastest cell that fits, from its requested size
  // down; failing that, a running job is halved for it where that pays.
  void admit(Round& r, size_t i) const {
    const size_t K = types_.size();
    const int want = std::min(pow2_floor(r.jobs[i]->job->gpus), options_.max_gpus);
    Cell best;
    double best_thr = 0;
    for (int g = want; g >= 1 && best.type < 0; g /= 2) {
      for (size_t k = 0; k < K; ++k) {
        if (r.free[k] < g) continue;
        const double x = thr(r, i, static_cast<int>(k), g);
        if (x > best_thr) best = {static_cast<int>(k), g}, best_thr = x;
      }
    }
    if (best.type < 0) {
      // Scale a running job down if what it loses per freed GPU is less
      // than what this job gains per GPU on one GPU of that type.
      double best_net = 0;
      size_t victim = 0;
      for (size_t v = 0; v < r.jobs.size(); ++v) {
        if (r.cell[v].type < 0 || r.cell[v].gpus < 2) continue;
        const int k = r.cell[v].type;
        const int half = r.cell[v].gpus / 2;
        const double cur = thr(r, v, k, r.cell[v].gpus);
        const double loss = (cur - thr(r, v, k, half)) / half / std::max(cur, 1e-300);
        const double x = thr(r, i, k, 1);
        if (x <= 0) continue;
        // The waiting job goes from nothing to its throughput on one GPU:
        // a relative gain of 1 for that GPU.
        if (1.0 - loss > best_net) best_net = 1.0 - loss, victim = v, best = {k, 1};
      }
      if (best.type >= 0) {
        r.cell[victim].gpus /= 2;
        r.free[best.type] += r.cell[victim].gpus;
      }
    }
    if (best.type >= 0) {
      r.cell[i] = best;
      r.free[best.type] -= best.gpus;
    }
  }

  // The one move into free GPUs (doubling, or the same size on a faster
  // type) with the largest relative gain per GPU above min_gain; false if none.
  bool move_once(Round& r) const {
    const size_t K = types_.size();
    double best_gain = options_.min_gain;
    size_t who = 0;
    Cell to;
    for (size_t i = 0; i < r.jobs.size(); ++i) {
      if (r.cell[i].type < 0) continue;
      const Cell c = r.cell[i];
      const double cur = thr(r, i, c.type, c.gpus);
      if (cur <= 0) continue;
      // Double on the same type.
      if (c.gpus * 2 <= options_.max_gpus && r.free[c.type] >= c.gpus) {
        const double g = (thr(r, i, c.type, 2 * c.gpus) - cur) / cur / c.gpus;
        if (g > best_gain) best_gain = g, who = i, to = {c.type, 2 * c.gpus};
      }
      // Move to another type, same size.
      for (size_t k = 0; k < K; ++k) {
        if (static_cast<int>(k) == c.type || r.free[k] < c.gpus) continue;
        const double g = (thr(r, i, static_cast<int>(k), c.gpus) - cur) / cur / c.gpus;
        if (g > best_gain) best_gain = g, who = i, to = {static_cast<int>(k), c.gpus};
      }
    }
    if (best_gain <= options_.min_gain) return false;
    r.free[r.cell[who].type] += r.cell[who].gpus;
    r.cell[who] = to;
    r.free[to.type] -= to.gpus;
    return true;
  }

  // Placement: unchanged cells keep their GPUs, the rest on fewest nodes.
  void place(const Round& r, std::vector<Allocation>& out) const {
    const Cluster& cluster = *r.ctx.cluster;
    std::vector<int> node_free(cluster.nodes.size());
    for (size_t n = 0; n < node_free.size(); ++n) node_free[n] = cluster.nodes[n].gpus;
    std::vector<char> kept(r.jobs.size(), 0);
    for (size_t i = 0; i < r.jobs.size(); ++i) {
      const Allocation& a = r.jobs[i]->current;
      out[i] = Allocation{};
      if (a.workers.empty() || r.cell[i].type < 0) continue;
      if (!(Cell{static_cast<int>(node_type_[a.workers[0].node]), total(a.workers)} == r.cell[i]))
        continue;
      out[i].workers = a.workers;
      for (const Placement& p : a.workers) node_free[p.node] -= p.gpus;
      kept[i] = 1;
    }
    std::vector<char> allowed(cluster.nodes.size());
    for (size_t i = 0; i < r.jobs.size(); ++i) {
      if (kept[i] || r.cell[i].type < 0) continue;
      for (size_t n = 0; n < allowed.size(); ++n) allowed[n] = node_type_[n] == static_cast<size_t>(r.cell[i].type);
      out[i].workers = place_fewest_nodes(node_free, r.cell[i].gpus, &allowed);
    }
  }

  static int total(const std::vector<Placement>& ps) {
    int n = 0;
    for (const Placement& p : ps) n += p.gpus;
    return n;
  }
  static int pow2_floor(int n) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
  }
  void index_types(const Cluster& cluster) {
    if (cluster_ == &cluster && node_type_.size() == cluster.nodes.size()) return;
    cluster_ = &cluster;
    types_ = cluster.gpu_types();
    node_type_.resize(cluster.nodes.size());
    max_node_.assign(types_.size(), 0);
    for (size_t n = 0; n < cluster.nodes.size(); ++n) {
      node_type_[n] = static_cast<size_t>(
          std::find(types_.begin(), types_.end(), cluster.nodes[n].gpu_type) - types_.begin());
      max_node_[node_type_[n]] = std::max(max_node_[node_type_[n]], cluster.nodes[n].gpus);
    }
    last_ids_.clear();
  }

  CriusOptions options_;
  const Cluster* cluster_ = nullptr;
  std::vector<std::string> types_;
  std::vector<size_t> node_type_;
  std::vector<int> max_node_;  // GPUs of the largest node of each type
  std::set<int64_t> last_ids_;
};

}  // namespace

std::unique_ptr<Policy> make_crius(CriusOptions options) { return std::make_unique<Crius>(options); }

}  // namespace cellsched
