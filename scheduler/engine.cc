#include "scheduler/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "core/error.h"
#include "scheduler/oracle.h"
#include "scheduler/policy.h"

namespace cellsched {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A policy bug, not bad input: the engine refuses allocations that break a
// gang or overfill a node.
void check_allocations(const Policy& policy, const Cluster& cluster,
                       const std::vector<JobState*>& jobs, const std::vector<Allocation>& out) {
  std::vector<int> used(cluster.nodes.size(), 0);
  auto add = [&](const std::vector<Placement>& ps, const Job& job) {
    int n = 0;
    for (const Placement& p : ps) {
      if (p.node < 0 || p.node >= static_cast<int>(used.size()) || p.gpus <= 0)
        throw std::logic_error(policy.name() + ": bad placement for job " + std::to_string(job.id));
      used[p.node] += p.gpus;
      n += p.gpus;
    }
    return n;
  };
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = *jobs[i]->job;
    const int w = add(out[i].workers, job);
    if (w != 0 && w != job.gpus)
      throw std::logic_error(policy.name() + ": job " + std::to_string(job.id) + " needs " +
                             std::to_string(job.gpus) + " GPUs as a gang, got " +
                             std::to_string(w));
    for (const auto& copy : out[i].copies) {
      const int c = add(copy, job);
      if (c <= 0 || c > job.gpus)
        throw std::logic_error(policy.name() + ": copy of job " + std::to_string(job.id) +
                               " has " + std::to_string(c) + " GPUs");
    }
  }
  for (size_t n = 0; n < used.size(); ++n) {
    if (used[n] > cluster.nodes[n].gpus)
      throw std::logic_error(policy.name() + ": node " + cluster.nodes[n].name + " overfilled (" +
                             std::to_string(used[n]) + " > " +
                             std::to_string(cluster.nodes[n].gpus) + ")");
  }
}

double total_throughput(const ThroughputOracle& oracle, const Job& job, const Cluster& cluster,
                        const Allocation& a) {
  double x = allocation_throughput(oracle, job, cluster, a.workers);
  for (const auto& copy : a.copies) x += allocation_throughput(oracle, job, cluster, copy);
  return x;
}

}  // namespace

RunRecord simulate(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle,
                   Policy& policy, const SimOptions& options) {
  const auto wall_start = Clock::now();
  if (options.round_s <= 0) throw InputError("round length must be positive");
  if (options.restart_s < 0) throw InputError("restart overhead must not be negative");
  const int total_gpus = cluster.total_gpus();
  if (total_gpus <= 0) throw InputError("cluster '" + cluster.name + "' has no GPUs");
  int largest_node = 0;
  for (const Node& n : cluster.nodes) largest_node = std::max(largest_node, n.gpus);
  for (const Job& j : trace.jobs) {
    if (j.gpus > total_gpus)
      throw InputError(trace.name + ": job " + std::to_string(j.id) + " asks for " +
                       std::to_string(j.gpus) + " GPUs but cluster '" + cluster.name +
                       "' has only " + std::to_string(total_gpus));
  }

  const size_t n = trace.jobs.size();
  std::vector<JobState> states(n);
  std::vector<JobResult> results(n);
  for (size_t i = 0; i < n; ++i) {
    const Job& j = trace.jobs[i];
    states[i].job = &j;
    states[i].remaining = j.total_iterations;
    results[i].job_id = j.id;
    results[i].job_type = j.job_type;
    results[i].gpus = j.gpus;
    results[i].arrival_s = j.arrival_s;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return trace.jobs[a].arrival_s < trace.jobs[b].arrival_s;
  });

  RunRecord run;
  run.policy = policy.name();
  run.trace_name = trace.name;
  run.cluster_name = cluster.name;
  run.cluster_gpus = total_gpus;
  run.throughputs = oracle.source();
  run.params["round_s"] = fmt(options.round_s);
  run.params["restart_s"] = fmt(options.restart_s);
  if (options.horizon_s >= 0) run.params["horizon_s"] = fmt(options.horizon_s);

  std::vector<double> decision_ms;
  std::vector<JobState*> active;
  std::vector<Allocation> out;
  size_t next = 0;
  long finished = 0, rounds = 0;
  const double start_t = n ? trace.jobs[order[0]].arrival_s : 0;
  double t = start_t;
  const double restart = std::min(options.restart_s, options.round_s);

  while (true) {
    while (next < n && trace.jobs[order[next]].arrival_s <= t) active.push_back(&states[order[next++]]);
    if (active.empty()) {
      if (next >= n) break;
      t = trace.jobs[order[next]].arrival_s;
      continue;
    }
    if (options.horizon_s >= 0 && t >= start_t + options.horizon_s) break;

    out.resize(active.size());
    for (size_t i = 0; i < active.size(); ++i) out[i] = active[i]->current;
    RoundContext ctx{t, options.round_s, &cluster, &oracle, &active};
    const auto decide_start = Clock::now();
    policy.decide(ctx, out);
    decision_ms.push_back(seconds_since(decide_start) * 1e3);
    check_allocations(policy, cluster, active, out);

    int busy = 0;
    bool progressing = false;
    for (size_t i = 0; i < active.size(); ++i) {
      JobState& s = *active[i];
      JobResult& r = results[static_cast<size_t>(&s - states.data())];
      if (out[i].empty()) {
        s.current = Allocation{};
        s.throughput = 0;
        continue;
      }
      const bool changed = !(out[i] == s.current);
      if (changed) {
        s.current = std::move(out[i]);
        s.throughput = total_throughput(oracle, *s.job, cluster, s.current);
        ++s.restarts;
      }
      if (s.first_start_s < 0) s.first_start_s = t;
      const double overhead = changed ? restart : 0;
      const int g = s.current.gpus();
      const double x = s.throughput;
      busy += g;
      progressing = progressing || x > 0;
      double held;
      if (x > 0 && s.remaining <= x * (options.round_s - overhead)) {
        held = overhead + s.remaining / x;
        s.iterations_done += s.remaining;
        s.remaining = 0;
        r.completion_s = t + held;
        ++finished;
      } else {
        held = options.round_s;
        s.remaining -= x * (options.round_s - overhead);
        s.iterations_done += x * (options.round_s - overhead);
      }
      s.executed_s += held;
      s.attained_gpu_s += g * held;
      r.gpu_seconds += g * held;
    }
    if (options.record_utilization) run.utilization.push_back({t, busy});
    ++rounds;
    std::erase_if(active, [](const JobState* s) { return s->remaining <= 0; });
    if (options.progress) options.progress(t, finished, static_cast<long>(n));

    if (!progressing) {
      // Nothing runs: only an arrival can change the picture.
      if (next >= n) break;
      t = std::max(t + options.round_s, trace.jobs[order[next]].arrival_s);
    } else {
      t += options.round_s;
    }
  }

  for (size_t i = 0; i < n; ++i) {
    results[i].first_start_s = states[i].first_start_s;
    results[i].iterations_done = states[i].iterations_done;
    results[i].restarts = states[i].restarts;
  }
  run.jobs = std::move(results);
  run.metrics = compute_metrics(run.jobs, total_gpus, decision_ms, rounds, seconds_since(wall_start));
  return run;
}

}  // namespace cellsched
