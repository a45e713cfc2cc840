// tiresias: discretized two-dimensional least-attained-service (2D-LAS).
//
// Service is GPU-seconds (JobState::attained_gpu_s: GPUs held x seconds held,
// restarts included). The thresholds split service into queues: with the
// defaults {3250, 7200}, Q0 holds jobs below 3250 GPU-s, Q1 those in
// [3250, 7200), Q2 the rest. Each round, from scratch (preemptive):
//
//  1. Queues are brought up to date: a job's queue is the number of
//     thresholds at or below its service since its last promotion (below).
//  2. Starvation: a waiting job outside Q0 whose waiting time since it last
//     ran (JobState::waiting_s) is at least `starvation_factor` times the
//     wall time it has executed so far (JobState::executed_s) returns to Q0,
//     and its service count restarts there: it must earn the first threshold
//     again before it is demoted (an MLFQ priority boost). A job that has
//     never run has no service and is in Q0 already, so executed_s = 0 needs
//     no rule of its own. A factor <= 0 turns promotion off.
//  3. Priority order: lower queue first, then arrival (FIFO), then job id.
//  4. Which jobs run: greedy over the priority order by GPU count; a job runs
//     when its whole gang W fits in the GPUs not yet given to a job before it
//     (a job that does not fit is skipped, and smaller jobs behind it may
//     still run). Counting is exact because a gang may span nodes.
//  5. A chosen job that ran last round keeps its exact placement, so it pays
//     no restart; chosen jobs that did not run are then placed, in priority
//     order, on the fewest nodes (place_fewest_nodes), any GPU type
//     (heterogeneity-agnostic). Jobs not chosen are preempted or wait.
//
// A placement on which the job cannot run (throughput 0, e.g. a type the
// table lacks) is retried on the types that can run it, together and then
// one at a time (scheduler/runnable_placer.h); if that fails too the job
// sits out the round and steps 4 and 5 are redone without it.
//
// The policy's own state (promotions) is keyed by job id and checked against
// the job's identity, so one object can replay several traces in sequence.
#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "core/error.h"
#include "scheduler/policies.h"
#include "scheduler/runnable_placer.h"

namespace cellsched {
namespace {

class Tiresias final : public Policy {
 public:
  explicit Tiresias(TiresiasOptions options) : options_(std::move(options)) {
    double prev = 0;
    for (double t : options_.thresholds_gpu_s) {
      if (!(t > prev)) throw InputError("tiresias: queue thresholds must be positive and increasing");
      prev = t;
    }
  }
  std::string name() const override { return "tiresias"; }

  void decide(const RoundContext& ctx, std::vector<Allocation>& out) override {
    const auto& jobs = *ctx.jobs;
    const size_t n = jobs.size();
    update_marks(jobs);

    // Steps 1-3: queues and priority order.
    std::vector<int> queue(n);
    for (size_t i = 0; i < n; ++i) queue[i] = queue_of(*jobs[i]);
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (queue[a] != queue[b]) return queue[a] < queue[b];
      if (jobs[a]->job->arrival_s != jobs[b]->job->arrival_s)
        return jobs[a]->job->arrival_s < jobs[b]->job->arrival_s;
      return jobs[a]->job->id < jobs[b]->job->id;
    });

    const long total = ctx.cluster->total_gpus();
    std::vector<char> skip(n, 0);  // cannot be placed usefully this round
    // Step 4: which jobs run (greedy over the priority order, skipping the skipped).
    auto choose = [&](std::vector<char>& chosen) {
      chosen.assign(n, 0);
      long left = total;
      for (size_t i : order) {
        const int w = jobs[i]->job->gpus;
        if (skip[i] || w > left) continue;
        chosen[i] = 1;
        left -= w;
      }
    };
    std::vector<char> chosen, next;
    std::vector<int> free;
    size_t at = 0;       // position in `order` the pass goes on from
    bool fresh = true;   // start a pass from scratch
    while (true) {
      if (fresh) {
        choose(chosen);
        // Step 5: continuing jobs keep their placement, then the others are placed.
        for (size_t i = 0; i < n; ++i) {
          if (!(chosen[i] && keeps_placement(*jobs[i]))) out[i] = Allocation{};
        }
        free = free_gpus(*ctx.cluster, out);
        placer_.begin(*ctx.cluster, free);
        at = 0;
        fresh = false;
      }
      bool failed = false;
      for (; at < n; ++at) {
        const size_t i = order[at];
        if (!chosen[i] || !out[i].empty()) continue;
        std::vector<Placement> ps = placer_.place(ctx, *jobs[i]->job, free, true);
        if (ps.empty()) {  // `free` and the placer are as before the attempt
          skip[i] = 1;
          failed = true;
          break;
        }
        out[i].workers = std::move(ps);
      }
      if (!failed) return;
      // Choosing again without the failed job changes only the jobs behind it.
      // Where no continuing job changes side (kept placement or not), a fresh
      // pass would place the jobs before it exactly as this one did, so the
      // pass goes on behind it; else it starts again with the continuing
      // jobs' placements restored (a failure used to cost a whole pass: 300
      // Philly jobs on modern.yaml took 12 s under tiresias, 1 s under fifo).
      choose(next);
      bool same = true;
      for (size_t i = 0; i < n && same; ++i)
        if (next[i] != chosen[i] && keeps_placement(*jobs[i])) same = false;
      chosen.swap(next);
      if (same) {
        ++at;
        continue;
      }
      for (size_t i = 0; i < n; ++i) out[i] = jobs[i]->current;
      fresh = true;
    }
  }

 private:
  struct Mark {
    const Job* job = nullptr;
    double arrival_s = 0;
    double base_gpu_s = 0;  // service at the last promotion
    int promotions = 0;
  };

  // Drops the marks of finished jobs (and of another trace's jobs that share
  // an id), then applies the starvation rule.
  void update_marks(const std::vector<JobState*>& jobs) {
    std::unordered_map<int64_t, Mark> next;
    next.reserve(jobs.size());
    for (const JobState* s : jobs) {
      Mark m;
      auto it = marks_.find(s->job->id);
      if (it != marks_.end() && it->second.job == s->job && it->second.arrival_s == s->job->arrival_s)
        m = it->second;
      m.job = s->job;
      m.arrival_s = s->job->arrival_s;
      next.emplace(s->job->id, m);
    }
    marks_.swap(next);
    if (options_.starvation_factor <= 0) return;
    for (const JobState* s : jobs) {
      if (!s->current.empty() || s->executed_s <= 0) continue;
      Mark& m = marks_[s->job->id];
      if (level(s->attained_gpu_s - m.base_gpu_s) == 0) continue;
      if (s->waiting_s >= options_.starvation_factor * s->executed_s) {
        m.base_gpu_s = s->attained_gpu_s;
        ++m.promotions;
      }
    }
  }

  int level(double service) const {
    int q = 0;
    for (double t : options_.thresholds_gpu_s)
      if (service >= t) ++q;
    return q;
  }

  int queue_of(const JobState& s) const {
    auto it = marks_.find(s.job->id);
    const double base = it == marks_.end() ? 0 : it->second.base_gpu_s;
    return level(s.attained_gpu_s - base);
  }

  static bool keeps_placement(const JobState& s) {
    return !s.current.workers.empty() && s.current.copies.empty() &&
           s.current.gpus() == s.job->gpus;
  }

  TiresiasOptions options_;
  std::unordered_map<int64_t, Mark> marks_;
  RunnablePlacer placer_;
};

}  // namespace

std::unique_ptr<Policy> make_tiresias(TiresiasOptions options) {
  return std::make_unique<Tiresias>(std::move(options));
}

std::unique_ptr<Policy> make_tiresias() { return make_tiresias(TiresiasOptions{}); }

}  // namespace cellsched
