// The round loop of the online runner: refresh the jobs, decide, recover
// after a crash, shut down. See runner_impl.h for how the work is split.
#include "runner/runner_impl.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/schedule.h"
#include "runner/lock.h"
#include "scheduler/policy.h"
#include "scheduler/replay.h"

namespace fs = std::filesystem;

namespace cellsched::runner {

using namespace impl_util;

void validate_nodes(const Cluster& cluster, const std::string& source) {
  if (cluster.nodes.empty()) fail_input(source, 0, "the node list has no nodes");
  std::set<std::string> names;
  for (const Node& n : cluster.nodes) {
    if (!names.insert(n.name).second) fail_input(source, 0, "node '" + n.name + "' appears twice");
    if (n.gpus <= 0) fail_input(source, 0, "node '" + n.name + "' has no GPUs");
    if (std::any_of(n.name.begin(), n.name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      fail_input(source, 0, "a node name holds a control character (a newline?): names must be printable");
  }
}

namespace {

int node_index(const Cluster& cluster, const std::string& name) {
  for (size_t n = 0; n < cluster.nodes.size(); ++n)
    if (cluster.nodes[n].name == name) return static_cast<int>(n);
  return -1;
}

}  // namespace

void check_live_launches(const db::OnlineStore& store, const Cluster& cluster, const std::string& source) {
  std::map<std::pair<int, int>, int64_t> held;  // (node, GPU index) -> launch
  for (const db::OnlineLaunch& l : store.live_launches()) {
    if (l.state != "running" && l.state != "stopping") continue;
    const std::string who = "launch " + std::to_string(l.id) + " (job " + std::to_string(l.job_id) + ")";
    for (const db::OnlineProc& p : l.procs) {
      const int n = node_index(cluster, p.node_name);
      if (n < 0)
        fail_input(source, 0, who + " still runs on node '" + p.node_name +
                                  "', which this node list lacks: restore the node, or start the runner once "
                                  "with the previous node list to stop it");
      for (const int gpu : db::gpu_indices(p)) {
        const std::string x = std::to_string(gpu);
        if (const int has = cluster.nodes[static_cast<size_t>(n)].gpus; gpu >= has)
          fail_input(source, 0, who + " holds GPU " + x + " of node '" + p.node_name + "', which has only " +
                                    std::to_string(has) + (has == 1 ? " GPU" : " GPUs") + " in this node list");
        const auto [it, fresh] = held.emplace(std::make_pair(n, gpu), l.id);
        if (!fresh)
          fail_input(source, 0, who + " and launch " + std::to_string(it->second) + " both hold GPU " + x +
                                    " of node '" + p.node_name + "'");
      }
    }
  }
}

double launches_worth(const ForkModel& fork, const std::vector<const db::OnlineLaunch*>& launches) {
  double main = 0, copies = 0, largest = 0;
  for (const db::OnlineLaunch* l : launches) {
    if (l->copy == 0) {
      main += l->iterations;
    } else {
      copies += l->iterations;
      largest = std::max(largest, l->iterations);
    }
  }
  return fork_worth(fork, main, copies, largest);
}

void Runner::Impl::refresh_jobs() {
  std::set<int64_t> seen;
  for (db::OnlineJob& row : store.jobs(true)) {
    seen.insert(row.id);
    auto it = jobs.find(row.id);
    if (it == jobs.end() && row.gpus > cluster.total_gpus()) {
      // Submitted while running, larger than the whole node list: it could
      // only wait forever, so it fails at once and says why.
      row.state = "failed";
      row.finished_at = unix_now();
      row.last_error = "needs " + std::to_string(row.gpus) + " GPUs; the node list has " +
                       std::to_string(cluster.total_gpus());
      store.transaction([&] { store.update_job(row); });
      log("job " + std::to_string(row.id) + " failed: " + row.last_error);
      continue;
    }
    if (it == jobs.end()) {
      Entry e;
      e.job.id = row.id;
      e.job.arrival_s = row.submitted_at;
      e.job.job_type = row.job_type;
      e.job.model = row.model;
      e.job.batch_size = row.batch_size;
      e.job.total_iterations = row.iterations;
      e.job.gpus = row.gpus;
      e.job.weight = row.weight;
      e.job.command = row.command;
      e.job.checkpoint_dir = row.checkpoint_dir;
      if (row.checkpoint_dir.empty()) row.checkpoint_dir = o.work_dir + "/job-" + std::to_string(row.id);
      e.row = std::move(row);
      it = jobs.emplace(e.row.id, std::move(e)).first;
      it->second.state.job = &it->second.job;
      it->second.state.waiting_s = std::max(0.0, unix_now() - it->second.row.submitted_at);
      log("job " + std::to_string(it->first) + " (" + it->second.row.name + ") queued");
    } else {
      it->second.row.cancel_requested = row.cancel_requested;
    }
  }
  // Finished elsewhere (a queued job cancelled by `cancel`).
  for (auto it = jobs.begin(); it != jobs.end();) {
    if (!seen.count(it->first) && !has_live(it->first)) it = jobs.erase(it);
    else ++it;
  }
}

Allocation Runner::Impl::current_allocation(int64_t jid) const {
  Allocation a;
  for (const auto& [id, l] : launches) {
    if (l.job_id != jid || (l.state != "running" && l.state != "planned")) continue;
    if (l.copy == 0) a.workers = placements_of(l);
    else a.copies.push_back(placements_of(l));
  }
  return a;
}

void Runner::Impl::round(int64_t number, double t0) {
  // Gangs that keep running across rounds teach the oracle too.
  store.transaction([&] {
    for (const auto& [id, l] : launches)
      if (l.state == "running") observe(l);
  });
  std::vector<JobState*> active;
  std::vector<int64_t> ids;
  for (auto& [jid, e] : jobs) {
    if (e.row.cancel_requested || e.row.failures > o.max_failures) continue;
    JobState& s = e.state;
    s.iterations_done = progress_of(e);
    s.remaining = std::max(0.0, e.row.iterations - s.iterations_done);
    if (s.remaining <= 0) continue;
    s.attained_gpu_s = e.row.attained_gpu_s;
    s.current = current_allocation(jid);
    s.first_start_s = e.row.first_start;
    active.push_back(&s);
    ids.push_back(jid);
  }
  std::vector<Allocation> out(active.size());
  for (size_t i = 0; i < active.size(); ++i) out[i] = active[i]->current;
  RoundContext ctx{t0, o.round_s, &cluster, &oracle, &active, o.restart_s, {o.fork_efficiency, o.fork_scaling}};
  const auto d0 = std::chrono::steady_clock::now();
  if (!active.empty()) policy->decide(ctx, out);
  const double decision_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - d0).count();
  check(active, out);

  // The decision: what stops, what starts. Committed before anything happens.
  nlohmann::json alloc = nlohmann::json::object();
  std::vector<int64_t> to_stop;
  std::vector<std::pair<int64_t, std::vector<std::vector<Placement>>>> to_start;  // job, gangs (copy 0 first)
  for (size_t i = 0; i < active.size(); ++i) {
    const int64_t jid = ids[i];
    const Allocation& cur = active[i]->current;
    const Allocation& next = out[i];
    nlohmann::json gangs = nlohmann::json::array();
    for (const auto& g : gangs_of(next)) {
      nlohmann::json gj = nlohmann::json::array();
      for (const Placement& p : g) gj.push_back({cluster.nodes[static_cast<size_t>(p.node)].name, p.gpus});
      gangs.push_back(gj);
    }
    alloc[std::to_string(jid)] = gangs;
    const bool keep = next == cur && cur.copies.empty() && !cur.workers.empty();
    if (keep) continue;
    for (int64_t id : live_of(jid, true)) to_stop.push_back(id);
    if (!next.empty()) to_start.push_back({jid, gangs_of(next)});
    if (!next.workers.empty() || !next.copies.empty()) active[i]->rounds_run++;
    if (!(next == cur) && !next.empty()) active[i]->restarts++;
  }
  for (size_t i = 0; i < active.size(); ++i)
    active[i]->waiting_s = out[i].empty() ? active[i]->waiting_s + o.round_s : 0;
  store.transaction([&] {
    store.save_round({number, t0, policy->name(), decision_ms, alloc.dump()});
    store.set_meta("heartbeat", std::to_string(unix_now()));
  });
  if (!to_stop.empty()) {
    stop(to_stop);  // up to --grace: a queued job may be cancelled meanwhile
    refresh_jobs();
  }
  settle_jobs();  // consolidates what just stopped
  start(number, t0, to_start);
}

// Refuses allocations that overfill a node or break a gang (a policy bug).
void Runner::Impl::check(const std::vector<JobState*>& active, std::vector<Allocation>& out) const {
  std::vector<int> used(cluster.nodes.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    bool bad = false;
    int w = 0;
    for (const Placement& p : out[i].workers) w += p.gpus;
    if (w != 0 && w != active[i]->job->gpus) bad = true;
    for (const auto& g : gangs_of(out[i]))
      for (const Placement& p : g) {
        if (p.node < 0 || p.node >= static_cast<int>(used.size()) || p.gpus <= 0) bad = true;
        else used[static_cast<size_t>(p.node)] += p.gpus;
      }
    if (bad) throw std::logic_error(policy->name() + ": bad allocation for job " + std::to_string(active[i]->job->id));
  }
  for (size_t n = 0; n < used.size(); ++n)
    if (used[n] > cluster.nodes[n].gpus)
      throw std::logic_error(policy->name() + ": node " + cluster.nodes[n].name + " overfilled");
}

void Runner::Impl::recover() {
  for (const auto& t : store.throughputs()) oracle.set(t.job_id, t.gpu_type, t.per_gpu, t.samples);
  refresh_jobs();
  std::vector<int64_t> resume_stop;
  store.transaction([&] {
    for (db::OnlineLaunch& l : store.live_launches()) {
      if (l.state == "planned") {
        // Decided but never let run (the supervisors abort without the go-ahead).
        l.state = "abandoned";
        l.outcome = "runner stopped before it started";
        store.update_launch(l);
        continue;
      }
      // Nodes by name: the node list may list them in another order now
      // (check_live_launches made sure each is there).
      for (db::OnlineProc& p : l.procs)
        if (const int n = node_index(cluster, p.node_name); n >= 0) p.node = n;
      if (l.state == "stopping") resume_stop.push_back(l.id);
      if (!jobs.count(l.job_id)) {
        // The job finished (or was cancelled) meanwhile; stop what is left.
        if (l.state == "running") resume_stop.push_back(l.id);
      }
      launches.emplace(l.id, std::move(l));
    }
  });
  for (int64_t id : resume_stop) launches.at(id).state = "running";
  if (!launches.empty()) log("recovered " + std::to_string(launches.size()) + (launches.size() == 1 ? " launch" : " launches") +
                                " from the store");
  if (!resume_stop.empty()) stop(resume_stop);
  for (auto it = launches.begin(); it != launches.end();) {
    if (!jobs.count(it->second.job_id) && it->second.state == "ended") {
      it->second.state = "consolidated";
      store.update_launch(it->second);
      it = launches.erase(it);
    } else {
      ++it;
    }
  }
  poll();
}

// What the running launches report, stored for `status` (the runner itself
// keeps it in memory between a launch's start and end).
void Runner::Impl::save_progress() {
  store.transaction([&] {
    for (auto& [id, l] : launches) {
      if (l.state != "running" || l.iterations <= saved_progress[id]) continue;
      saved_progress[id] = l.iterations;
      store.update_launch(l);
    }
  });
  std::erase_if(saved_progress, [&](const auto& p) { return !launches.count(p.first); });
}

void Runner::Impl::shutdown() {
  std::vector<int64_t> all;
  for (const auto& [id, l] : launches)
    if (l.state == "running" || l.state == "stopping") all.push_back(id);
  if (!all.empty()) {
    log("stopping " + std::to_string(all.size()) + (all.size() == 1 ? " launch" : " launches"));
    stop(all);
  }
  settle_jobs();
}

void Runner::Impl::run() {
  policy = o.schedule_path.empty()
               ? make_policy(o.policy, o.policy_settings)
               : make_replay(load_schedule(o.schedule_path), cluster, o.schedule_offset);
  if (o.work_dir.empty()) o.work_dir = store.path() + ".d";
  fs::create_directories(o.work_dir);
  o.work_dir = fs::absolute(o.work_dir).string();
  store.transaction([&] {
    store.set_meta("nodes", cluster_to_yaml(cluster));
    store.set_meta("policy", o.policy);
    store.set_meta("executor", executor.name());
    store.set_meta("round_s", std::to_string(o.round_s));
    store.set_meta("fork_model", num(o.fork_efficiency) + " " + fork_scaling_name(o.fork_scaling));
  });
  recover();
  long rounds = 0;
  // Progress is saved and the lease renewed every 5 s across rounds: reset
  // each round, a 5 s round never reached the mark and `status` read 0.
  double beat = unix_now();
  while (!stopping() && (o.max_rounds < 0 || rounds < o.max_rounds)) {
    refresh_jobs();
    poll();
    if (o.until_idle && jobs.empty()) break;
    const double t0 = unix_now();
    const int64_t number = store.last_round() + 1;
    round(number, t0);
    ++rounds;
    while (!stopping() && unix_now() < t0 + o.round_s) {
      sleep_s(std::min(o.poll_s, t0 + o.round_s - unix_now()));
      refresh_jobs();
      poll();
      if (unix_now() - beat >= 5) {
        renew_lease(store);
        save_progress();
        beat = unix_now();
      }
      if (o.until_idle && jobs.empty()) break;
    }
    if (o.until_idle && jobs.empty()) break;
  }
  shutdown();
  release_lease(store);
}

Runner::Runner(db::OnlineStore& store, Cluster cluster, const Executor& executor,
               const ThroughputOracle* base, const CheckpointAverager* averager, RunnerOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(cluster), executor, base, averager, std::move(options))) {}

Runner::~Runner() = default;

void Runner::run() { impl_->run(); }

}  // namespace cellsched::runner
