#include "scheduler/policy.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "scheduler/policies.h"

namespace cellsched {

int Allocation::gpus() const {
  int n = 0;
  for (const Placement& p : workers) n += p.gpus;
  for (const auto& copy : copies)
    for (const Placement& p : copy) n += p.gpus;
  return n;
}

std::vector<std::string> policy_names() {
  return {"fifo", "yarn-cs", "tiresias", "gavel", "gavel-makespan", "hadar", "hadare", "crius",
          "hadar-design"};
}

std::unique_ptr<Policy> make_policy(const std::string& name, const PolicySettings& settings) {
  if (name == "fifo") return make_fifo();
  if (name == "yarn-cs") return make_yarn_cs();
  if (name == "hadar" || name == "hadare") {
    HadarOptions o;
    o.spare_exponent = settings.hadar_spare_exponent;
    o.ratio_exponent = settings.hadar_ratio_exponent;
    o.ratio_cap_s = settings.hadar_ratio_cap_s;
    o.fork = name == "hadare";
    return make_hadar(o);
  }
  if (name == "hadar-design") return make_hadar_design();
  if (name == "crius") return make_crius();
  if (name == "gavel") return make_gavel(false);
  if (name == "gavel-makespan") return make_gavel(true);
  if (name == "tiresias") return make_tiresias();
  std::string known;
  for (const std::string& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError("unknown policy '" + name + "' (known: " + known + ")");
}

std::vector<int> free_gpus(const Cluster& cluster, const std::vector<Allocation>& allocations) {
  std::vector<int> free(cluster.nodes.size());
  for (size_t i = 0; i < free.size(); ++i) free[i] = cluster.nodes[i].gpus;
  auto take = [&](const std::vector<Placement>& ps) {
    for (const Placement& p : ps) free.at(p.node) -= p.gpus;
  };
  for (const Allocation& a : allocations) {
    take(a.workers);
    for (const auto& copy : a.copies) take(copy);
  }
  return free;
}

std::vector<Placement> place_first_fit(std::vector<int>& free, int gpus, const std::vector<char>* allowed) {
  std::vector<Placement> out;
  int left = gpus;
  for (size_t n = 0; n < free.size() && left > 0; ++n) {
    if (free[n] <= 0 || (allowed && !(*allowed)[n])) continue;
    const int take = std::min(free[n], left);
    out.push_back({static_cast<int>(n), take});
    left -= take;
  }
  if (left > 0) return {};
  for (const Placement& p : out) free[p.node] -= p.gpus;
  return out;
}

namespace {

// place_fewest_nodes over the nodes `for_each` visits (ascending node order;
// it calls f(n) until f returns false) that have a free GPU.
template <class ForEach>
std::vector<Placement> fewest_nodes(std::vector<int>& free, int gpus, const ForEach& for_each) {
  // One node: the tightest fit keeps large holes for large jobs.
  int best = -1;
  for_each([&](int n) {
    if (free[n] > 0 && free[n] >= gpus && (best < 0 || free[n] < free[best])) {
      best = n;
      if (free[n] == gpus) return false;  // no fit is tighter; the first such node, as the full scan picks
    }
    return true;
  });
  if (best >= 0) {
    free[best] -= gpus;
    return {{best, gpus}};
  }
  // Several nodes: largest free first (ties in node order) gives the fewest
  // nodes. Free counts are a node's GPUs at most, so the order is a counting
  // sort by free count (a stable sort of the whole cluster per placement was
  // a tenth of gavel's time on Philly's 311 nodes).
  long total = 0;
  int most = 0;
  for_each([&](int n) {
    if (free[n] > 0) {
      total += free[n];
      most = std::max(most, free[n]);
    }
    return true;
  });
  if (total < gpus) return {};
  std::vector<int> start(static_cast<size_t>(most) + 2, 0);  // start[most - f]: first slot of count f
  for_each([&](int n) {
    if (free[n] > 0) ++start[static_cast<size_t>(most - free[n]) + 1];
    return true;
  });
  for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
  std::vector<int> order(static_cast<size_t>(start.back()));
  for_each([&](int n) {
    if (free[n] > 0) order[static_cast<size_t>(start[static_cast<size_t>(most - free[n])]++)] = n;
    return true;
  });
  std::vector<Placement> out;
  int left = gpus;
  for (int n : order) {
    if (left == 0) break;
    const int take = std::min(free[n], left);
    out.push_back({n, take});
    left -= take;
  }
  for (const Placement& p : out) free[p.node] -= p.gpus;
  return out;
}

}  // namespace

std::vector<Placement> place_fewest_nodes(std::vector<int>& free, int gpus,
                                          const std::vector<char>* allowed) {
  return fewest_nodes(free, gpus, [&](const auto& f) {
    for (size_t n = 0; n < free.size(); ++n)
      if ((!allowed || (*allowed)[n]) && !f(static_cast<int>(n))) return;
  });
}

std::vector<Placement> place_fewest_nodes(std::vector<int>& free, int gpus, const std::vector<int>& nodes) {
  return fewest_nodes(free, gpus, [&](const auto& f) {
    for (int n : nodes)
      if (!f(n)) return;
  });
}

}  // namespace cellsched
