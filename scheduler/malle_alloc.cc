#include "scheduler/malle_alloc.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "scheduler/milp.h"

namespace cellsched {

double alloc_value(const std::vector<AllocClass>& classes, const AllocJob& job, int cls, int nodes) {
  if (cls < 0 || cls >= static_cast<int>(classes.size()) || nodes < 1 || nodes > job.curve.max_nodes()) return 0;
  const bool stays = !job.moved && job.current_class == cls && job.current_nodes == nodes;
  const double rescale = stays ? 0 : job.rescale_s;
  double productive = classes[cls].window_s - rescale;
  double left_after = 0;  // of the window, once the job is done
  const double rate = job.curve.at(nodes);
  if (job.remaining > 0 && rate > 0 && job.remaining / rate < productive) {
    left_after = productive - job.remaining / rate;
    productive = job.remaining / rate;
  }
  if (productive <= 0) return 0;
  // A job that finishes in the window trains the same at every size that
  // finishes it; without the credit, the smallest won (a larger one is
  // dominated), so a lone linear job kept 1 node of 4 and did not finish.
  return job.curve.speedup(nodes) * productive + kSoonerCredit * left_after;
}

std::vector<int> candidate_sizes(const AllocJob& job, int cls, int class_nodes) {
  const int cap = std::min(job.curve.max_nodes(), class_nodes);
  std::vector<int> s;
  if (cls >= 0 && cls < static_cast<int>(job.explore.size())) {
    const bool here = !job.moved && job.current_class == cls && job.current_nodes >= 1 && job.current_nodes <= cap;
    if (job.explore[cls] >= 1 && job.explore[cls] <= cap) s.push_back(job.explore[cls]);
    if (here && job.current_nodes != job.explore[cls]) s.push_back(job.current_nodes);
    std::sort(s.begin(), s.end());
    return s;
  }
  // Every size up to 16, then steps of about a quarter (20, 24, 32, 40, ...).
  for (int n = 1; n <= cap; n = n < 16 ? n + 1 : n + std::max(4, n / 4 / 4 * 4)) s.push_back(n);
  for (int n : {cap, job.current_nodes})
    if (n >= 1 && n <= cap) s.push_back(n);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

std::vector<AllocChoice> allocate_milp(const std::vector<AllocClass>& classes, const std::vector<AllocJob>& jobs,
                                       double time_limit_s, AllocStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  MixedIntegerProgram mip;
  mip.time_limit_s = time_limit_s;
  LinearProgram& lp = mip.lp;
  lp.maximize = true;
  struct Var { int job, cls, nodes; };
  std::vector<Var> vars;
  std::vector<std::vector<int>> job_cols(jobs.size()), class_cols(classes.size());
  for (size_t j = 0; j < jobs.size(); ++j)
    for (size_t c = 0; c < classes.size(); ++c)
      for (double best = 0; int n : candidate_sizes(jobs[j], static_cast<int>(c), classes[c].nodes)) {
        // A size worth no more than a smaller one is dominated: drop it.
        const double v = alloc_value(classes, jobs[j], static_cast<int>(c), n);
        if (v <= best * (1 + 1e-12)) continue;
        best = v;
        const int col = lp.add_var(v, 0, 1);
        vars.push_back({static_cast<int>(j), static_cast<int>(c), n});
        job_cols[j].push_back(col);
        class_cols[c].push_back(col);
      }
  for (const auto& cols : job_cols)
    if (!cols.empty()) lp.add_row(-kLpInf, 1, cols, std::vector<double>(cols.size(), 1.0));
  for (size_t c = 0; c < classes.size(); ++c) {
    if (class_cols[c].empty()) continue;
    std::vector<double> sizes;
    for (int col : class_cols[c]) sizes.push_back(vars[col].nodes);
    lp.add_row(-kLpInf, classes[c].nodes, class_cols[c], sizes);
  }
  mip.integer.assign(vars.size(), true);
  // Start from the greedy's answer where it is feasible here (it always is):
  // the time limit can then never leave the allocator with nothing.
  mip.start.assign(vars.size(), 0.0);
  std::vector<AllocChoice> greedy = allocate_greedy(classes, jobs);
  for (size_t col = 0; col < vars.size(); ++col)
    if (greedy[vars[col].job] == AllocChoice{vars[col].cls, vars[col].nodes}) mip.start[col] = 1;
  std::vector<AllocChoice> out(jobs.size());
  AllocStats st;
  st.variables = static_cast<int>(vars.size());
  if (!vars.empty()) {
    const MilpSolution sol = solve_milp(mip);
    for (size_t col = 0; col < vars.size(); ++col)
      if (sol.x[col] > 0.5) out[vars[col].job] = {vars[col].cls, vars[col].nodes};
    st.optimal = sol.optimal;
    st.objective = sol.objective;
  }
  st.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (stats) *stats = st;
  return out;
}

std::vector<AllocChoice> allocate_greedy(const std::vector<AllocClass>& classes, const std::vector<AllocJob>& jobs) {
  std::vector<AllocChoice> out(jobs.size());
  std::vector<int> left(classes.size());
  for (size_t c = 0; c < classes.size(); ++c) left[c] = classes[c].nodes;
  for (size_t j = 0; j < jobs.size(); ++j) {  // running jobs keep what they still hold
    const AllocJob& a = jobs[j];
    if (a.current_nodes > 0 && a.current_class >= 0 && a.current_class < static_cast<int>(classes.size())) {
      const int keep = std::min(a.current_nodes, left[a.current_class]);
      if (keep > 0) {
        out[j] = {a.current_class, keep};
        left[a.current_class] -= keep;
      }
    }
  }
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  auto efficiency = [&](size_t j) {
    const ScalingCurve& c = jobs[j].curve;
    return c.max_nodes() > 0 ? c.speedup(c.max_nodes()) / c.max_nodes() : 0;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return efficiency(a) > efficiency(b); });
  for (size_t j : order) {
    const int max = jobs[j].curve.max_nodes();
    if (out[j].nodes >= max) continue;
    int c = out[j].cls;
    if (c < 0) {  // not running: the class with the most free nodes
      c = static_cast<int>(std::max_element(left.begin(), left.end()) - left.begin());
      if (left.empty() || left[c] == 0) break;
    }
    const int add = std::min(max - out[j].nodes, left[c]);
    if (add <= 0) continue;
    out[j] = {c, out[j].nodes + add};
    left[c] -= add;
  }
  return out;
}

}  // namespace cellsched
