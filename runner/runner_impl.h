// Private to the runner: Runner::Impl, shared by runner.cc (the round loop:
// refresh, decide, recover, shut down), settle.cc (reconcile with the
// processes: poll, stop, end, consolidate, close) and launch.cc (start the
// decided gangs). Not a public header.
#pragma once

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/job.h"
#include "db/online.h"
#include "runner/checkpoint.h"
#include "runner/executor.h"
#include "runner/learned_oracle.h"
#include "runner/runner.h"
#include "scheduler/policy.h"

namespace cellsched::runner {

namespace impl_util {

inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline void sleep_s(double s) {
  if (s <= 0) return;
  timespec ts{static_cast<time_t>(s), static_cast<long>((s - std::floor(s)) * 1e9)};
  nanosleep(&ts, nullptr);  // a signal cuts it short, which is what we want
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::vector<Placement> placements_of(const db::OnlineLaunch& l) {
  std::vector<Placement> ps;
  for (const db::OnlineProc& p : l.procs) ps.push_back({p.node, p.gpus});
  return ps;
}

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

inline std::string token() {
  static unsigned counter = 0;
  std::ostringstream s;
  s << std::hex << static_cast<long long>(unix_now() * 1e6) << "-" << getpid() << "-" << ++counter;
  return s.str();
}

}  // namespace impl_util

struct Runner::Impl {
  db::OnlineStore& store;
  Cluster cluster;
  const Executor& executor;
  const CheckpointAverager* averager;
  RunnerOptions o;
  LearnedOracle oracle;
  std::string name_token;  // in the launches' Slurm job names (slurm_name_token of the db)
  std::unique_ptr<Policy> policy;

  struct Entry {
    db::OnlineJob row;
    Job job;
    JobState state;
    int64_t failed_round = -1;  // the round whose launches last counted a failure
  };
  std::map<int64_t, Entry> jobs;                 // unfinished jobs (stable addresses)
  std::map<int64_t, db::OnlineLaunch> launches;  // live launches
  struct Rate {
    double t0 = -1, it0 = 0, t1 = -1, it1 = 0;
  };
  std::map<int64_t, Rate> rates;  // per launch, from the progress polls
  std::map<int64_t, std::string> gang_failures;  // launch -> the member that died ("rank 1: exit 3")
  std::map<int64_t, double> saved_progress;      // launch -> iterations last stored by save_progress()
  double last_accounting = 0;

  Impl(db::OnlineStore& s, Cluster c, const Executor& e, const ThroughputOracle* base,
       const CheckpointAverager* a, RunnerOptions opts)
      : store(s), cluster(std::move(c)), executor(e), averager(a), o(std::move(opts)),
        oracle(base, o.prior_per_gpu), name_token(slurm_name_token(s.path())) {}

  // Who owns what. A job's state moves in exactly one place each way:
  // refresh_jobs() opens it (or fails one that can never fit), start() marks
  // it running, settle_jobs() closes it (done, failed, cancelled) or puts it
  // back in the queue. A launch is planned and started by start(), stopped by
  // stop(), ended by end_launch() (which finishes its checkpoint commit), and
  // consolidated by consolidate(). `jobs` holds exactly the open jobs.

  // ---- small helpers ----

  void log(const std::string& m) const {
    if (o.log) o.log(m);
  }
  bool stopping() const { return o.stop && o.stop->load(); }
  // What launches of one job that trained side by side are worth together
  // (core/fork.h): `pick` selects the launches.
  template <typename Pick>
  double worth_of(int64_t job_id, Pick pick) const {
    std::vector<const db::OnlineLaunch*> picked;
    for (const auto& [id, l] : launches)
      if (l.job_id == job_id && pick(l)) picked.push_back(&l);
    return launches_worth({o.fork_efficiency, o.fork_scaling}, picked);
  }

  std::string exit_file(const db::OnlineLaunch& l, size_t rank) const {
    return l.dir + "/proc-" + std::to_string(rank) + ".exit";
  }

  std::string proc_name(const db::OnlineLaunch& l, size_t rank) const {
    return "cellsched-" + name_token + "-L" + std::to_string(l.id) + "-" + std::to_string(rank);
  }

  std::vector<std::vector<Placement>> gangs_of(const Allocation& a) const {
    std::vector<std::vector<Placement>> g;
    if (!a.workers.empty()) g.push_back(a.workers);
    for (const auto& c : a.copies) g.push_back(c);
    return g;
  }

  // ---- the round loop (runner.cc) ----

  void refresh_jobs();
  Allocation current_allocation(int64_t jid) const;

  void round(int64_t number, double t0);

  // Refuses allocations that overfill a node or break a gang (a policy bug).
  void check(const std::vector<JobState*>& active, std::vector<Allocation>& out) const;

  void recover();

  void save_progress();

  void shutdown();

  void run();

  // ---- reconcile and settle (settle.cc) ----

  bool has_live(int64_t job_id) const;

  std::vector<int64_t> live_of(int64_t job_id, bool running_only) const;
  // Whether any process of launch `id` is still alive.
  bool any_alive(int64_t id) const;

  // Consolidated plus what the running launches report.
  double progress_of(const Entry& e) const;

  // Reads progress and exits; ends launches whose processes are all gone.
  void poll();

  std::string proc_outcome(const db::OnlineLaunch& l, const db::OnlineProc& p) const;

  void observe(const db::OnlineLaunch& l);

  // Marks a launch ended (all its processes are gone) and judges its outcome.
  void end_launch(int64_t id);
  // A failed launch of `e`: one failure per round, however many of the job's
  // gangs (forked copies) failed in it; `error` becomes last_error either way.
  void count_failure(Entry& e, const db::OnlineLaunch& l, std::string error);

  // SIGTERM, the grace period, then SIGKILL; every launch in `ids` is ended.
  void stop(const std::vector<int64_t>& ids);

  // Jobs whose launches have all ended get their epoch consolidated; done,
  // failed and cancelled jobs are closed.
  void settle_jobs();

  void consolidate(Entry& e);

  // ---- launch (launch.cc) ----

  // Invariant: `jobs` holds exactly the open jobs, and settle_jobs() is the
  // one place that closes one (done, failed, cancelled) and erases it. The
  // round decides, stops what changes, then settles: stopping a job's gangs
  // consolidates their progress, which can bring the job to its target, so a
  // job the policy chose to (re)start may be closed by the time it would be
  // started. Such a job is not started (it used to crash here, map::at).
  using Plan = std::vector<std::pair<int64_t, std::vector<std::vector<Placement>>>>;  // job -> gangs
  void start(int64_t number, double t0, Plan plan);

  // Stores the launches of `plan` as planned, with their GPU indices and
  // paths; returns their ids, and each one's iterations in `target`.
  std::vector<int64_t> plan_launches(int64_t number, double t0, const Plan& plan,
                                     std::map<int64_t, long long>& target);

  // The contract's environment of one process of a launch (runner/contract.h).
  std::vector<std::string> contract_env(const db::OnlineLaunch& l, size_t rank, double t0,
                                        long long iterations) const;

  // Forks every supervisor of the planned launches, commits their pids and
  // states, then lets them run; a launch that cannot start is ended as failed.
  void run_launches(const std::vector<int64_t>& fresh, const std::map<int64_t, long long>& target, double t0);
};

}  // namespace cellsched::runner
