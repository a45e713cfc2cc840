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
    if (w != 0 && w != job.gpus && !policy.elastic())
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

// One gang of a job in a round: its rate (iterations/s, a copy's already
// scaled by the fork efficiency) and when in the round it starts training.
struct Gang {
  double rate = 0;
  double start = 0;
};

// Seconds into the round at which the gangs together reach `work`
// iterations, training until `end`; negative when they do not.
// `gangs` is reordered.
double time_to_finish(std::vector<Gang>& gangs, double work, double end) {
  if (gangs.size() > 1)
    std::sort(gangs.begin(), gangs.end(), [](const Gang& x, const Gang& y) { return x.start < y.start; });
  double done = 0, rate = 0, at = 0;
  size_t g = 0;
  while (at < end) {
    while (g < gangs.size() && gangs[g].start <= at) rate += gangs[g++].rate;
    const double until = g < gangs.size() ? std::min(gangs[g].start, end) : end;
    if (rate > 0 && done + rate * (until - at) >= work) return at + (work - done) / rate;
    done += rate * (until - at);
    at = until;
  }
  return -1;
}

// Last round's gangs of one job: whether a gang (the `index`-th of this
// round's allocation) was placed exactly so last round. Copies usually keep
// their order, so that slot is looked at first; a job with many copies (HadarE
// gives one job a copy on hundreds of idle nodes) is searched in a sorted
// index instead of a scan per copy.
class PreviousGangs {
 public:
  explicit PreviousGangs(const Allocation& a) : a_(a) {}
  bool contains(const std::vector<Placement>& gang, size_t index) {
    if (a_.workers == gang) return true;
    if (index >= 1 && index - 1 < a_.copies.size() && a_.copies[index - 1] == gang) return true;
    if (a_.copies.size() <= 8) return std::find(a_.copies.begin(), a_.copies.end(), gang) != a_.copies.end();
    if (sorted_.empty()) {
      for (const auto& copy : a_.copies) sorted_.push_back(&copy);
      std::sort(sorted_.begin(), sorted_.end(), less);
    }
    return std::binary_search(sorted_.begin(), sorted_.end(), &gang, less);
  }

 private:
  static bool less(const std::vector<Placement>* a, const std::vector<Placement>* b) {
    return std::lexicographical_compare(a->begin(), a->end(), b->begin(), b->end(),
                                        [](const Placement& x, const Placement& y) {
                                          return x.node != y.node ? x.node < y.node : x.gpus < y.gpus;
                                        });
  }
  const Allocation& a_;
  std::vector<const std::vector<Placement>*> sorted_;
};

}  // namespace

RunRecord simulate(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle,
                   Policy& policy, const SimOptions& options) {
  const auto wall_start = Clock::now();
  if (options.round_s <= 0) throw InputError("round length must be positive");
  if (options.restart_s < 0) throw InputError("restart overhead must not be negative");
  const int total_gpus = cluster.total_gpus();
  if (total_gpus <= 0) throw InputError("cluster '" + cluster.name + "' has no GPUs");
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
  if (policy.name() == "hadare" || options.fork_efficiency != kDefaultForkEfficiency ||
      options.fork_scaling != ForkScaling::noise) {
    run.params["fork_efficiency"] = fmt(options.fork_efficiency);
    run.params["fork_scaling"] = fork_scaling_name(options.fork_scaling);
  }
  if (options.consolidation_s > 0) run.params["consolidation_s"] = fmt(options.consolidation_s);
  if (!(options.fork_efficiency > 0) || options.fork_efficiency > 1)
    throw InputError("fork efficiency must be in (0, 1]");
  const ForkModel fork{options.fork_efficiency, options.fork_scaling};
  if (options.consolidation_s < 0) throw InputError("consolidation time must not be negative");

  std::vector<std::vector<double>> gang_rates(n);  // cached per-gang rates of `current`
  // Rates of single-node gangs per job, [type][gpus] (lazy; < 0 = not yet
  // asked): forked copies come and go every round, their rates do not.
  const std::vector<std::string> types = cluster.gpu_types();
  std::vector<size_t> node_type(cluster.nodes.size());
  for (size_t i = 0; i < node_type.size(); ++i)
    node_type[i] = static_cast<size_t>(
        std::find(types.begin(), types.end(), cluster.nodes[i].gpu_type) - types.begin());
  std::vector<std::vector<double>> single_rates(n);
  auto gang_rate = [&](size_t job, const std::vector<Placement>& ps) {
    const Job& j = trace.jobs[job];
    if (ps.size() != 1 || ps[0].gpus > j.gpus) return allocation_throughput(oracle, j, cluster, ps);
    std::vector<double>& memo = single_rates[job];
    const size_t stride = static_cast<size_t>(j.gpus) + 1;
    if (memo.empty()) memo.assign(types.size() * stride, -1.0);
    double& r = memo[node_type[ps[0].node] * stride + static_cast<size_t>(ps[0].gpus)];
    if (r < 0) r = allocation_throughput(oracle, j, cluster, ps);
    return r;
  };
  // Failure replay: the attempt each job is in, and what it has left of it.
  std::vector<size_t> attempt(n, 0);
  std::vector<double> attempt_left(n, 0);
  double failed_attempts = 0, lost_gpu_s = 0;
  auto failing = [&](size_t i) {
    return options.replay_failures && attempt[i] < trace.jobs[i].failed_attempts.size();
  };
  for (size_t i = 0; i < n; ++i)
    if (failing(i)) attempt_left[i] = trace.jobs[i].failed_attempts[0];
  std::vector<double> decision_ms;
  std::vector<JobState*> active;
  std::vector<Allocation> out;
  size_t next = 0;
  long finished = 0, rounds = 0;
  const double start_t = n ? trace.jobs[order[0]].arrival_s : 0;
  double t = start_t;
  const double restart = std::min(options.restart_s, options.round_s);

  while (true) {
    while (next < n && trace.jobs[order[next]].arrival_s <= t) {
      JobState* s = &states[order[next++]];
      s->waiting_s = t - s->job->arrival_s;
      active.push_back(s);
    }
    if (active.empty()) {
      if (next >= n) break;
      t = trace.jobs[order[next]].arrival_s;
      continue;
    }
    if (options.horizon_s >= 0 && t >= start_t + options.horizon_s) break;
    if (rounds >= options.max_rounds)
      throw InputError("the simulation did not finish within " + std::to_string(options.max_rounds) +
                       " rounds (" + fmt((t - start_t) / 86400) + " simulated days, " +
                       std::to_string(active.size()) +
                       " jobs still active): some job runs too slowly to finish; bound it with --horizon");

    out.resize(active.size());
    for (size_t i = 0; i < active.size(); ++i) out[i] = active[i]->current;
    RoundContext ctx{t, options.round_s, &cluster, &oracle, &active, options.restart_s, fork};
    const auto decide_start = Clock::now();
    policy.decide(ctx, out);
    decision_ms.push_back(seconds_since(decide_start) * 1e3);
    check_allocations(policy, cluster, active, out);
    if (options.on_round) options.on_round(t, active, out);

    int busy = 0;
    bool progressing = false;
    std::vector<Gang> gangs, sorted;
    for (size_t i = 0; i < active.size(); ++i) {
      JobState& s = *active[i];
      const size_t idx = static_cast<size_t>(&s - states.data());
      JobResult& r = results[idx];
      std::vector<double>& rates = gang_rates[idx];
      Allocation& a = out[i];
      if (a.empty()) {
        s.current = Allocation{};
        s.throughput = 0;
        s.last_round_iterations.clear();
        rates.clear();
        continue;
      }
      // Gangs new this round pay the restart overhead.
      gangs.clear();
      bool any_new = false;
      const bool changed = !(a == s.current);
      if (changed) rates.clear();
      PreviousGangs previous(s.current);
      // Rates are taken raw when the allocation changed, and the copies'
      // scaled once all are known (fork_worth: their share depends on all).
      const bool fresh_rates = rates.empty();
      auto add_gang = [&](const std::vector<Placement>& ps) {
        const bool fresh = !previous.contains(ps, gangs.size());
        any_new = any_new || fresh;
        if (rates.size() < gangs.size() + 1) rates.push_back(gang_rate(idx, ps));
        gangs.push_back({rates[gangs.size()], fresh ? restart : 0.0});
      };
      if (a.workers.empty()) {  // copies only: the main slot trains nothing
        if (rates.empty()) rates.push_back(0.0);
        gangs.push_back({0.0, 0.0});
      } else {
        add_gang(a.workers);
      }
      for (const auto& copy : a.copies) add_gang(copy);
      if (fresh_rates && gangs.size() > 1) {
        const double copies = std::accumulate(rates.begin() + 1, rates.end(), 0.0);
        // The linear model's share is its efficiency exactly (the same
        // figures, to the bit, as before the noise model).
        const double worth = fork_worth(fork, rates);
        const double share = fork.scaling == ForkScaling::linear ? fork.efficiency
                             : copies > 0                         ? std::max(0.0, worth - rates[0]) / copies
                                                                  : 0.0;
        for (size_t g = 1; g < rates.size(); ++g) gangs[g].rate = rates[g] *= share;
      }
      if (changed) s.current = std::move(a);
      if (any_new) ++s.restarts;
      s.throughput = 0;
      for (const Gang& g : gangs) s.throughput += g.rate;

      if (s.first_start_s < 0) s.first_start_s = t;
      const double consolidation =
          s.current.copies.empty() ? 0.0 : std::min(options.consolidation_s, options.round_s);
      const double end = options.round_s - consolidation;
      sorted.assign(gangs.begin(), gangs.end());
      const bool fails = failing(idx);
      const double tau = time_to_finish(sorted, fails ? attempt_left[idx] : s.remaining, end);
      const double trained_until = tau >= 0 ? tau : end;
      s.last_round_iterations.assign(gangs.size(), 0.0);
      double trained = 0;
      for (size_t g = 0; g < gangs.size(); ++g) {
        const double it = gangs[g].rate * std::max(0.0, trained_until - gangs[g].start);
        s.last_round_iterations[g] = it;
        trained += it;
      }
      const int gpus = s.current.gpus();
      busy += gpus;
      progressing = progressing || s.throughput > 0;
      double held;
      if (fails) {
        // A failing attempt: lost work; at its failure point it drops out.
        held = tau >= 0 ? tau : options.round_s;
        lost_gpu_s += gpus * held;
        if (tau >= 0) {
          ++failed_attempts;
          ++attempt[idx];
          attempt_left[idx] = failing(idx) ? s.job->failed_attempts[attempt[idx]] : 0;
          s.current = Allocation{};
          rates.clear();
        } else {
          attempt_left[idx] -= trained;
        }
      } else if (tau >= 0) {
        held = tau + consolidation;
        s.iterations_done += s.remaining;
        s.remaining = 0;
        r.completion_s = t + held;
        ++finished;
        // Finished: keep its figures, drop its placements.
        s.current = Allocation{};
        std::vector<double>().swap(s.last_round_iterations);
        std::vector<double>().swap(rates);
        std::vector<double>().swap(single_rates[idx]);
      } else {
        held = options.round_s;
        s.remaining -= trained;
        s.iterations_done += trained;
      }
      s.executed_s += held;
      s.attained_gpu_s += gpus * held;
      s.waiting_s = 0;
      ++s.rounds_run;
      r.gpu_seconds += gpus * held;
    }
    if (options.record_utilization) run.utilization.push_back({t, busy});
    ++rounds;
    std::erase_if(active, [](const JobState* s) { return s->remaining <= 0; });
    if (options.progress) options.progress(t, finished, static_cast<long>(n));

    double next_t = t + options.round_s;
    if (!progressing) {
      // Nothing runs: only an arrival can change the picture.
      if (next >= n) break;
      next_t = std::max(next_t, trace.jobs[order[next]].arrival_s);
    }
    for (JobState* s : active)
      if (s->current.empty()) s->waiting_s += next_t - t;
    t = next_t;
  }

  for (size_t i = 0; i < n; ++i) {
    results[i].first_start_s = states[i].first_start_s;
    results[i].iterations_done = states[i].iterations_done;
    results[i].restarts = states[i].restarts;
  }
  run.jobs = std::move(results);
  run.metrics = compute_metrics(run.jobs, total_gpus, decision_ms, rounds, seconds_since(wall_start));
  if (options.replay_failures) {
    run.params["replay_failures"] = "1";
    run.metrics.extra["failed_attempts"] = failed_attempts;
    run.metrics.extra["lost_gpu_s"] = lost_gpu_s;
  }
  return run;
}

}  // namespace cellsched
