#include "scheduler/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "core/error.h"
#include "scheduler/fairness.h"
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
// round's allocation: 0 the main gang, then the copies) was placed exactly so
// last round. Each of last round's gangs answers for one gang of this round
// only: a job that had one gang on a node and now has two identical ones
// there restarts the second (HadarE put a copy beside its main gang and paid
// no restart for it, 2026-12-07 audit). Gangs usually keep their slot, so
// that is looked at first; a job with many copies (HadarE gives one job a
// copy on hundreds of idle nodes) is searched in a sorted index instead of a
// scan per copy.
class PreviousGangs {
 public:
  explicit PreviousGangs(const Allocation& a) : a_(a) {
    if (a.copies.size() >= 64) used_big_.assign(a.copies.size() + 1, 0);
  }
  bool contains(const std::vector<Placement>& gang, size_t index) {
    if (index <= a_.copies.size() && !used(index) && slot(index) == gang) return take(index);
    if (a_.copies.size() <= 8) {
      for (size_t k = 0; k <= a_.copies.size(); ++k)
        if (!used(k) && slot(k) == gang) return take(k);
      return false;
    }
    if (sorted_.empty()) {
      for (size_t k = 0; k <= a_.copies.size(); ++k) sorted_.push_back(k);
      std::stable_sort(sorted_.begin(), sorted_.end(), [&](size_t x, size_t y) { return less(slot(x), slot(y)); });
    }
    auto lo = std::lower_bound(sorted_.begin(), sorted_.end(), gang,
                               [&](size_t k, const std::vector<Placement>& g) { return less(slot(k), g); });
    for (; lo != sorted_.end() && slot(*lo) == gang; ++lo)
      if (!used(*lo)) return take(*lo);
    return false;
  }

 private:
  const std::vector<Placement>& slot(size_t k) const { return k == 0 ? a_.workers : a_.copies[k - 1]; }
  // Which slots have answered: a bit each (no allocation per job and round)
  // up to 64 slots, a vector beyond.
  bool used(size_t k) const { return used_big_.empty() ? (used_small_ >> k) & 1 : used_big_[k] != 0; }
  bool take(size_t k) {
    if (used_big_.empty())
      used_small_ |= uint64_t{1} << k;
    else
      used_big_[k] = 1;
    return true;
  }
  static bool less(const std::vector<Placement>& a, const std::vector<Placement>& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                        [](const Placement& x, const Placement& y) {
                                          return x.node != y.node ? x.node < y.node : x.gpus < y.gpus;
                                        });
  }
  const Allocation& a_;
  uint64_t used_small_ = 0;
  std::vector<char> used_big_;
  std::vector<size_t> sorted_;   // slots in gang order (built on demand)
};

// One run of the simulator. run() repeats a round until every job is done:
// admit the arrivals, ask the policy for each active job's allocation, then
// advance every job through the round (its gangs' rates, what they train,
// and the job's accounting: finished, failed or still going).
class Simulation {
 public:
  Simulation(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle, Policy& policy,
             const SimOptions& options);
  RunRecord run();

 private:
  void start_record();
  double gang_rate(size_t job, const std::vector<Placement>& ps);
  bool failing(size_t i) const {
    return options_.replay_failures && attempt_[i] < trace_.jobs[i].failed_attempts.size();
  }
  bool admit();
  bool price_gangs(size_t idx, JobState& s, const Allocation& a);
  void advance(JobState& s, Allocation& a);
  double settle(size_t idx, JobState& s, double tau, double trained, double consolidation);
  RunRecord finish();

  const Trace& trace_;
  const Cluster& cluster_;
  const ThroughputOracle& oracle_;
  Policy& policy_;
  const SimOptions& options_;
  const Clock::time_point wall_start_ = Clock::now();
  const int total_gpus_;
  const size_t n_;
  ForkModel fork_;
  std::vector<JobState> states_;
  std::vector<JobResult> results_;
  std::vector<size_t> order_;  // job indices by arrival
  RunRecord run_;
  std::vector<std::vector<double>> gang_rates_;  // cached per-gang rates of `current`
  // Rates of single-node gangs per job, [type][gpus] (lazy; < 0 = not yet
  // asked): forked copies come and go every round, their rates do not.
  std::vector<size_t> node_type_;
  size_t types_ = 0;
  std::vector<std::vector<double>> single_rates_;
  // Failure replay: the attempt each job is in, and what it has left of it.
  std::vector<size_t> attempt_;
  std::vector<double> attempt_left_;
  double failed_attempts_ = 0, lost_gpu_s_ = 0;
  std::vector<double> decision_ms_;
  std::vector<JobState*> active_;
  std::vector<Allocation> out_;
  std::vector<Gang> gangs_, sorted_;  // the job being advanced (reused)
  size_t next_ = 0;                   // next arrival in `order_`
  long finished_ = 0, rounds_ = 0;
  double start_t_ = 0, t_ = 0, restart_ = 0;
  // This round: GPUs held, whether any job trains, and the GPUs freed within
  // it (a job that finished or failed mid-round: time, GPUs).
  int busy_ = 0;
  bool progressing_ = false;
  std::vector<std::pair<double, int>> freed_;
  double last_round_t_ = -1;  // start of the last round recorded (< 0: none)
};

Simulation::Simulation(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle, Policy& policy,
                       const SimOptions& options)
    : trace_(trace),
      cluster_(cluster),
      oracle_(oracle),
      policy_(policy),
      options_(options),
      total_gpus_(cluster.total_gpus()),
      n_(trace.jobs.size()),
      fork_{options.fork_efficiency, options.fork_scaling} {
  if (options.round_s <= 0) throw InputError("round length must be positive");
  if (options.restart_s < 0) throw InputError("restart overhead must not be negative");
  if (total_gpus_ <= 0) throw InputError("cluster '" + cluster.name + "' has no GPUs");
  for (const Job& j : trace.jobs) {
    if (j.gpus > total_gpus_)
      throw InputError(trace.name + ": job " + std::to_string(j.id) + " asks for " + std::to_string(j.gpus) +
                       " GPUs but cluster '" + cluster.name + "' has only " + std::to_string(total_gpus_));
  }
  states_.resize(n_);
  results_.resize(n_);
  for (size_t i = 0; i < n_; ++i) {
    const Job& j = trace.jobs[i];
    states_[i].job = &j;
    states_[i].remaining = j.total_iterations;
    results_[i].job_id = j.id;
    results_[i].job_type = j.job_type;
    results_[i].gpus = j.gpus;
    results_[i].arrival_s = j.arrival_s;
  }
  order_.resize(n_);
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(),
                   [&](size_t a, size_t b) { return trace.jobs[a].arrival_s < trace.jobs[b].arrival_s; });
  start_record();
  if (!(options.fork_efficiency > 0) || options.fork_efficiency > 1)
    throw InputError("fork efficiency must be in (0, 1]");
  if (options.consolidation_s < 0) throw InputError("consolidation time must not be negative");

  gang_rates_.resize(n_);
  const std::vector<std::string> types = cluster.gpu_types();
  types_ = types.size();
  node_type_.resize(cluster.nodes.size());
  for (size_t i = 0; i < node_type_.size(); ++i)
    node_type_[i] =
        static_cast<size_t>(std::find(types.begin(), types.end(), cluster.nodes[i].gpu_type) - types.begin());
  single_rates_.resize(n_);
  attempt_.assign(n_, 0);
  attempt_left_.assign(n_, 0);
  for (size_t i = 0; i < n_; ++i)
    if (failing(i)) attempt_left_[i] = trace.jobs[i].failed_attempts[0];
  start_t_ = t_ = n_ ? trace.jobs[order_[0]].arrival_s : 0;
  restart_ = std::min(options.restart_s, options.round_s);
}

void Simulation::start_record() {
  run_.policy = policy_.name();
  run_.trace_name = trace_.name;
  run_.cluster_name = cluster_.name;
  run_.cluster_gpus = total_gpus_;
  run_.throughputs = oracle_.source();
  run_.params["round_s"] = fmt(options_.round_s);
  run_.params["restart_s"] = fmt(options_.restart_s);
  if (options_.horizon_s >= 0) run_.params["horizon_s"] = fmt(options_.horizon_s);
  if (policy_.name() == "hadare" || options_.fork_efficiency != kDefaultForkEfficiency ||
      options_.fork_scaling != ForkScaling::noise) {
    run_.params["fork_efficiency"] = fmt(options_.fork_efficiency);
    run_.params["fork_scaling"] = fork_scaling_name(options_.fork_scaling);
  }
  if (options_.consolidation_s > 0) run_.params["consolidation_s"] = fmt(options_.consolidation_s);
}

double Simulation::gang_rate(size_t job, const std::vector<Placement>& ps) {
  const Job& j = trace_.jobs[job];
  if (ps.size() != 1 || ps[0].gpus > j.gpus) return allocation_throughput(oracle_, j, cluster_, ps);
  std::vector<double>& memo = single_rates_[job];
  const size_t stride = static_cast<size_t>(j.gpus) + 1;
  if (memo.empty()) memo.assign(types_ * stride, -1.0);
  double& r = memo[node_type_[ps[0].node] * stride + static_cast<size_t>(ps[0].gpus)];
  if (r < 0) r = allocation_throughput(oracle_, j, cluster_, ps);
  return r;
}

// Moves the jobs that have arrived by now into the active set; when none is
// active, jumps to the next arrival. False when nothing is left to simulate.
bool Simulation::admit() {
  while (true) {
    while (next_ < n_ && trace_.jobs[order_[next_]].arrival_s <= t_) {
      JobState* s = &states_[order_[next_++]];
      s->waiting_s = t_ - s->job->arrival_s;
      active_.push_back(s);
    }
    if (!active_.empty()) return true;
    if (next_ >= n_) return false;
    t_ = trace_.jobs[order_[next_]].arrival_s;
  }
}

RunRecord Simulation::run() {
  while (admit()) {
    if (options_.horizon_s >= 0 && t_ >= start_t_ + options_.horizon_s) break;
    if (rounds_ >= options_.max_rounds)
      throw InputError("the simulation did not finish within " + std::to_string(options_.max_rounds) +
                       " rounds (" + fmt((t_ - start_t_) / 86400) + " simulated days, " +
                       std::to_string(active_.size()) +
                       " jobs still active): a job runs too slowly to finish, or the jobs need more rounds "
                       "than that one after another; use fewer jobs, a longer --round, or --horizon where the verb has it");

    out_.resize(active_.size());
    for (size_t i = 0; i < active_.size(); ++i) out_[i] = active_[i]->current;
    RoundContext ctx{t_, options_.round_s, &cluster_, &oracle_, &active_, options_.restart_s, fork_};
    const auto decide_start = Clock::now();
    policy_.decide(ctx, out_);
    decision_ms_.push_back(seconds_since(decide_start) * 1e3);
    check_allocations(policy_, cluster_, active_, out_);
    if (options_.on_round) options_.on_round(t_, active_, out_);

    busy_ = 0;
    progressing_ = false;
    freed_.clear();
    for (size_t i = 0; i < active_.size(); ++i) advance(*active_[i], out_[i]);
    if (options_.record_utilization) {
      auto& u = run_.utilization;
      // Nothing ran between the last round and this one (the clock jumped to
      // an arrival): the GPUs were idle from that round's end.
      if (last_round_t_ >= 0 && t_ > last_round_t_ + options_.round_s && (u.empty() || u.back().busy_gpus != 0))
        u.push_back({last_round_t_ + options_.round_s, 0});
      last_round_t_ = t_;
      u.push_back({t_, busy_});
      // GPUs of a job done mid-round are free from then on (as CRU counts
      // them); held to the round's end here, a 0.31 CRU plotted as 0.48.
      std::sort(freed_.begin(), freed_.end());
      int busy = busy_;
      for (const auto& [at, gpus] : freed_) {
        busy -= gpus;
        if (u.back().t_s == at) u.back().busy_gpus = busy;
        else u.push_back({at, busy});
      }
    }
    ++rounds_;
    std::erase_if(active_, [](const JobState* s) { return s->remaining <= 0; });
    if (options_.progress) options_.progress(t_, finished_, static_cast<long>(n_));

    double next_t = t_ + options_.round_s;
    if (!progressing_) {
      // Nothing runs: only an arrival can change the picture.
      if (next_ >= n_) break;
      next_t = std::max(next_t, trace_.jobs[order_[next_]].arrival_s);
    }
    for (JobState* s : active_)
      if (s->current.empty()) s->waiting_s += next_t - t_;
    t_ = next_t;
  }
  return finish();
}

// This round's gangs of one job into `gangs_`: each one's rate (a copy's
// scaled by what copies are worth) and its start (the restart overhead when
// it was not placed so last round). True when any gang is new.
bool Simulation::price_gangs(size_t idx, JobState& s, const Allocation& a) {
  std::vector<double>& rates = gang_rates_[idx];
  gangs_.clear();
  bool any_new = false;
  PreviousGangs previous(s.current);
  // Rates are taken raw when the allocation changed, and the copies'
  // scaled once all are known (fork_worth: their share depends on all).
  const bool fresh_rates = rates.empty();
  auto add_gang = [&](const std::vector<Placement>& ps) {
    const bool fresh = !previous.contains(ps, gangs_.size());
    any_new = any_new || fresh;
    if (rates.size() < gangs_.size() + 1) rates.push_back(gang_rate(idx, ps));
    gangs_.push_back({rates[gangs_.size()], fresh ? restart_ : 0.0});
  };
  if (a.workers.empty()) {  // copies only: the main slot trains nothing
    if (rates.empty()) rates.push_back(0.0);
    gangs_.push_back({0.0, 0.0});
  } else {
    add_gang(a.workers);
  }
  for (const auto& copy : a.copies) add_gang(copy);
  if (fresh_rates && gangs_.size() > 1) {
    const double copies = std::accumulate(rates.begin() + 1, rates.end(), 0.0);
    // The linear model's share is its efficiency exactly (the same
    // figures, to the bit, as before the noise model).
    const double worth = fork_worth(fork_, rates);
    const double share = fork_.scaling == ForkScaling::linear ? fork_.efficiency
                         : copies > 0                          ? std::max(0.0, worth - rates[0]) / copies
                                                               : 0.0;
    for (size_t g = 1; g < rates.size(); ++g) gangs_[g].rate = rates[g] *= share;
  }
  return any_new;
}

// One job through the round on allocation `a` (moved into its state when it
// changed).
void Simulation::advance(JobState& s, Allocation& a) {
  const size_t idx = static_cast<size_t>(&s - states_.data());
  std::vector<double>& rates = gang_rates_[idx];
  if (a.empty()) {
    s.current = Allocation{};
    s.throughput = 0;
    s.last_round_iterations.clear();
    rates.clear();
    return;
  }
  const bool changed = !(a == s.current);
  if (changed) rates.clear();
  const bool any_new = price_gangs(idx, s, a);
  if (changed) s.current = std::move(a);
  if (any_new) ++s.restarts;
  s.throughput = 0;
  for (const Gang& g : gangs_) s.throughput += g.rate;

  if (s.first_start_s < 0) s.first_start_s = t_;
  const double consolidation = s.current.copies.empty() ? 0.0 : std::min(options_.consolidation_s, options_.round_s);
  const double end = options_.round_s - consolidation;
  sorted_.assign(gangs_.begin(), gangs_.end());
  const double tau = time_to_finish(sorted_, failing(idx) ? attempt_left_[idx] : s.remaining, end);
  const double trained_until = tau >= 0 ? tau : end;
  s.last_round_iterations.assign(gangs_.size(), 0.0);
  double trained = 0;
  for (size_t g = 0; g < gangs_.size(); ++g) {
    const double it = gangs_[g].rate * std::max(0.0, trained_until - gangs_[g].start);
    s.last_round_iterations[g] = it;
    trained += it;
  }
  const int gpus = s.current.gpus();
  busy_ += gpus;
  progressing_ = progressing_ || s.throughput > 0;
  const double held = settle(idx, s, tau, trained, consolidation);
  if (held < options_.round_s && gpus > 0) freed_.emplace_back(t_ + held, gpus);
  s.executed_s += held;
  s.attained_gpu_s += gpus * held;
  s.waiting_s = 0;
  ++s.rounds_run;
  results_[idx].gpu_seconds += gpus * held;
}

// The job's accounting after a round in which it trained `trained`
// iterations and reached its target (or its failure point) `tau` seconds
// in (negative: not reached). Returns the seconds it held its GPUs.
double Simulation::settle(size_t idx, JobState& s, double tau, double trained, double consolidation) {
  if (failing(idx)) {
    // A failing attempt: lost work; at its failure point it drops out.
    const double held = tau >= 0 ? tau : options_.round_s;
    lost_gpu_s_ += s.current.gpus() * held;
    if (tau >= 0) {
      ++failed_attempts_;
      ++attempt_[idx];
      attempt_left_[idx] = failing(idx) ? s.job->failed_attempts[attempt_[idx]] : 0;
      s.current = Allocation{};
      gang_rates_[idx].clear();
    } else {
      attempt_left_[idx] -= trained;
    }
    return held;
  }
  if (tau < 0) {
    s.remaining -= trained;
    s.iterations_done += trained;
    return options_.round_s;
  }
  const double held = tau + consolidation;
  s.iterations_done = s.job->total_iterations;  // what the sum of its rounds comes to, without its rounding
  s.remaining = 0;
  results_[idx].completion_s = t_ + held;
  ++finished_;
  // Finished: keep its figures, drop its placements.
  s.current = Allocation{};
  std::vector<double>().swap(s.last_round_iterations);
  std::vector<double>().swap(gang_rates_[idx]);
  std::vector<double>().swap(single_rates_[idx]);
  return held;
}

RunRecord Simulation::finish() {
  for (size_t i = 0; i < n_; ++i) {
    results_[i].first_start_s = states_[i].first_start_s;
    results_[i].iterations_done = states_[i].iterations_done;
    results_[i].restarts = states_[i].restarts;
  }
  run_.jobs = std::move(results_);
  run_.metrics = compute_metrics(run_.jobs, total_gpus_, decision_ms_, rounds_, seconds_since(wall_start_), t_);
  add_fairness_metrics(finish_time_fairness(trace_, cluster_, oracle_, run_.jobs, options_.restart_s), run_.metrics);
  if (options_.replay_failures) {
    run_.params["replay_failures"] = "1";
    run_.metrics.extra["failed_attempts"] = failed_attempts_;
    run_.metrics.extra["lost_gpu_s"] = lost_gpu_s_;
  }
  return std::move(run_);
}

}  // namespace

RunRecord simulate(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle,
                   Policy& policy, const SimOptions& options) {
  return Simulation(trace, cluster, oracle, policy, options).run();
}

}  // namespace cellsched
