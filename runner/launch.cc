// Launching the gangs a round decided: GPU indices, the contract's
// environment, supervisors forked and committed before they run.
#include "runner/runner_impl.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "runner/contract.h"
#include "runner/process.h"
#include "scheduler/oracle.h"

namespace fs = std::filesystem;

namespace cellsched::runner {

using namespace impl_util;

namespace {

// GPU indices held per node by the launches still running (or stopping, or
// planned this round); an ended launch holds none, even before its job is
// consolidated (its node may have left the node list since).
std::vector<std::vector<char>> held_gpus(const Cluster& cluster,
                                         const std::map<int64_t, db::OnlineLaunch>& launches) {
  std::vector<std::vector<char>> held(cluster.nodes.size());
  for (size_t n = 0; n < held.size(); ++n) held[n].assign(static_cast<size_t>(cluster.nodes[n].gpus), 0);
  for (const auto& [id, l] : launches) {
    if (l.state != "running" && l.state != "stopping" && l.state != "planned") continue;
    for (const auto& p : l.procs) {
      if (p.node < 0 || static_cast<size_t>(p.node) >= held.size()) continue;
      auto& h = held[static_cast<size_t>(p.node)];
      for (const int k : db::gpu_indices(p))
        if (static_cast<size_t>(k) < h.size()) h[static_cast<size_t>(k)] = 1;
    }
  }
  return held;
}

// Takes the lowest `gpus` free indices of one node: "0,1".
std::string take_gpus(std::vector<char>& held, int gpus) {
  std::string ids;
  int taken = 0;
  for (size_t k = 0; k < held.size() && taken < gpus; ++k)
    if (!held[k]) {
      held[k] = 1;
      ids += (taken++ ? "," : "") + std::to_string(k);
    }
  return ids;
}

}  // namespace

// Invariant: `jobs` holds exactly the open jobs, and settle_jobs() is the
// one place that closes one (done, failed, cancelled) and erases it. The
// round decides, stops what changes, then settles: stopping a job's gangs
// consolidates their progress, which can bring the job to its target, so a
// job the policy chose to (re)start may be closed by the time it would be
// started. Such a job is not started (it used to crash here, map::at).
void Runner::Impl::start(int64_t number, double t0, Plan plan) {
  std::erase_if(plan, [&](const auto& p) {
    const auto it = jobs.find(p.first);
    return it == jobs.end() || it->second.row.cancel_requested ||
           progress_of(it->second) >= it->second.row.iterations;
  });
  if (plan.empty()) return;
  std::map<int64_t, long long> target;  // launch -> iterations (the job tracker's share)
  const std::vector<int64_t> fresh = plan_launches(number, t0, plan, target);
  run_launches(fresh, target, t0);
  for (int64_t id : fresh) {
    const db::OnlineLaunch& l = launches.at(id);
    std::string where;
    for (const auto& p : l.procs) where += (where.empty() ? "" : " ") + p.node_name + ":" + p.gpu_ids;
    log("round " + std::to_string(number) + ": job " + std::to_string(l.job_id) + " copy " +
        std::to_string(l.copy) + " on " + where + (l.state == "ended" ? " FAILED: " + l.outcome : ""));
  }
}

std::vector<int64_t> Runner::Impl::plan_launches(int64_t number, double t0, const Plan& plan,
                                                 std::map<int64_t, long long>& target) {
  std::vector<std::vector<char>> held = held_gpus(cluster, launches);
  std::vector<int64_t> fresh;
  store.transaction([&] {
    for (const auto& [jid, all_gangs] : plan) {
      Entry& e = jobs.at(jid);
      const auto remaining =
          static_cast<long long>(std::max(1.0, std::ceil(e.row.iterations - e.row.iterations_done)));
      // No more gangs than iterations left: each would train one at least
      // (a job with 1 left was forked onto three GPUs, each training it).
      const std::vector<std::vector<Placement>> gangs(
          all_gangs.begin(), all_gangs.begin() + static_cast<std::ptrdiff_t>(std::min<long long>(
                                                     static_cast<long long>(all_gangs.size()), remaining)));
      std::vector<double> gang_rates;
      for (const auto& g : gangs) gang_rates.push_back(allocation_throughput(oracle, e.job, cluster, g));
      const auto shares = split_iterations(remaining, gang_rates, {o.fork_efficiency, o.fork_scaling});
      for (size_t g = 0; g < gangs.size(); ++g) {
        db::OnlineLaunch l;
        l.job_id = jid;
        l.round = number;
        l.copy = static_cast<int>(g);
        l.epoch = e.row.epoch;
        l.state = "planned";
        l.executor = executor.name();
        l.token = token();
        l.ckpt_in = e.row.checkpoint;
        for (const Placement& p : gangs[g]) {
          db::OnlineProc proc;
          proc.node = p.node;
          proc.node_name = cluster.nodes[static_cast<size_t>(p.node)].name;
          proc.gpus = p.gpus;
          proc.gpu_ids = take_gpus(held[static_cast<size_t>(p.node)], p.gpus);
          l.procs.push_back(proc);
        }
        store.insert_launch(l);  // sets l.id; the paths name it
        l.dir = o.work_dir + "/launch-" + std::to_string(l.id);
        l.progress = l.dir + "/progress";
        l.ckpt_out = e.row.checkpoint_dir + "/launch-" + std::to_string(l.id) + ".pt";
        store.update_launch(l);
        fresh.push_back(l.id);
        target[l.id] = std::max(1LL, shares[g]);  // a trainer needs a target > 0
        launches.emplace(l.id, std::move(l));
      }
      if (e.row.first_start < 0) e.row.first_start = t0;
      e.row.state = "running";
      store.update_job(e.row);
    }
  });
  return fresh;
}

std::vector<std::string> Runner::Impl::contract_env(const db::OnlineLaunch& l, size_t rank, double t0,
                                                    long long iterations) const {
  const Node& master = cluster.nodes[static_cast<size_t>(l.procs[0].node)];
  return {"CELLSCHED_JOB_ID=" + std::to_string(l.job_id),
          "CELLSCHED_COPY=" + std::to_string(l.copy),
          "CELLSCHED_ROUND_END=" + std::to_string(static_cast<long long>(std::ceil(t0 + o.round_s))),
          "CELLSCHED_CKPT_IN=" + l.ckpt_in,
          "CELLSCHED_CKPT_OUT=" + l.ckpt_out,
          "CELLSCHED_PROGRESS=" + l.progress,
          "CELLSCHED_ITERATIONS=" + std::to_string(iterations),
          "CELLSCHED_LAUNCH=" + l.token,
          "CELLSCHED_GPUS=" + std::to_string(l.procs[rank].gpus),
          "MASTER_ADDR=" + (master.address.empty() ? std::string("127.0.0.1") : master.address),
          "MASTER_PORT=" + std::to_string(29500 + l.id % 20000),
          "WORLD_SIZE=" + std::to_string(l.procs.size()),
          "RANK=" + std::to_string(rank),
          "LOCAL_RANK=0"};
}

// Fork every supervisor, commit their pids, then let them run.
void Runner::Impl::run_launches(const std::vector<int64_t>& fresh, const std::map<int64_t, long long>& target,
                                double t0) {
  std::vector<PendingSpawn> pending;
  std::vector<int64_t> failed;
  for (int64_t id : fresh) {
    db::OnlineLaunch& l = launches.at(id);
    const Entry& e = jobs.at(l.job_id);
    std::error_code ec;
    fs::create_directories(l.dir, ec);
    fs::create_directories(e.row.checkpoint_dir, ec);
    try {
      for (size_t r = 0; r < l.procs.size(); ++r) {
        db::OnlineProc& p = l.procs[r];
        ProcessRequest req;
        req.node = &cluster.nodes[static_cast<size_t>(p.node)];
        req.gpus = p.gpus;
        req.gpu_ids = p.gpu_ids;
        req.command = e.row.command;
        req.workdir = e.row.workdir;
        req.name = proc_name(l, r);
        req.env = contract_env(l, r, t0, target.at(id));
        const LocalCommand cmd = executor.prepare(req);
        SpawnSpec spec{cmd.argv, cmd.env, cmd.workdir, l.dir + "/proc-" + std::to_string(r) + ".log",
                       exit_file(l, r)};
        PendingSpawn s = spawn(spec);
        p.pid = s.pid();
        p.start_ticks = s.start_ticks();
        pending.push_back(std::move(s));
      }
    } catch (const std::exception& ex) {
      // Nothing of this launch runs: its pending supervisors abort.
      l.outcome = std::string("cannot start: ") + ex.what();
      failed.push_back(id);
    }
  }
  const double now = unix_now();
  store.transaction([&] {
    for (int64_t id : fresh) {
      db::OnlineLaunch& l = launches.at(id);
      const bool bad = std::find(failed.begin(), failed.end(), id) != failed.end();
      l.state = bad ? "ended" : "running";
      l.started_at = now;
      if (bad) {
        l.ended_at = now;
        Entry& e = jobs.at(l.job_id);
        count_failure(e, l, "launch " + std::to_string(id) + ": " + l.outcome);
        store.update_job(e.row);
      }
      store.update_launch(l);
    }
  });
  std::set<int64_t> bad_pids;
  for (int64_t id : failed)
    for (const auto& p : launches.at(id).procs) bad_pids.insert(p.pid);
  for (PendingSpawn& s : pending)
    if (!bad_pids.count(s.pid())) s.go();
  pending.clear();  // the aborted ones see EOF and exit
}

}  // namespace cellsched::runner
