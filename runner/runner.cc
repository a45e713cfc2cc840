#include "runner/runner.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runner/checkpoint.h"
#include "runner/executor.h"
#include "runner/learned_oracle.h"
#include "runner/process.h"
#include "scheduler/oracle.h"
#include "core/schedule.h"
#include "scheduler/policy.h"
#include "scheduler/replay.h"

namespace fs = std::filesystem;

namespace cellsched::runner {

std::vector<long long> split_iterations(long long remaining, const std::vector<double>& rates) {
  if (remaining < 0 || rates.empty())
    throw std::invalid_argument("split_iterations: need remaining >= 0 and at least one gang");
  double floor_rate = 0;
  for (double r : rates)
    if (r > 0 && (floor_rate == 0 || r < floor_rate)) floor_rate = r;
  std::vector<double> w(rates.size());
  double total = 0;
  for (size_t g = 0; g < rates.size(); ++g) total += w[g] = rates[g] > 0 ? rates[g] : (floor_rate > 0 ? floor_rate : 1.0);
  std::vector<long long> out(rates.size(), 0);
  std::vector<std::pair<double, size_t>> frac;  // (fractional part, gang)
  long long given = 0;
  for (size_t g = 0; g < w.size(); ++g) {
    const double exact = static_cast<double>(remaining) * w[g] / total;
    out[g] = static_cast<long long>(std::floor(exact));
    given += out[g];
    frac.push_back({exact - std::floor(exact), g});
  }
  std::stable_sort(frac.begin(), frac.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < remaining; ++k, ++given) ++out[frac[k % frac.size()].second];
  // Every gang trains while there is enough: one from the largest share.
  if (remaining >= static_cast<long long>(rates.size()))
    for (long long& x : out)
      if (x == 0) {
        --*std::max_element(out.begin(), out.end());
        x = 1;
      }
  return out;
}

void validate_nodes(const Cluster& cluster, const std::string& source) {
  if (cluster.nodes.empty()) fail_input(source, 0, "the node list has no nodes");
  std::set<std::string> names;
  for (const Node& n : cluster.nodes) {
    if (!names.insert(n.name).second) fail_input(source, 0, "node '" + n.name + "' appears twice");
    if (n.gpus <= 0) fail_input(source, 0, "node '" + n.name + "' has no GPUs");
  }
}

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void sleep_s(double s) {
  if (s <= 0) return;
  timespec ts{static_cast<time_t>(s), static_cast<long>((s - std::floor(s)) * 1e9)};
  nanosleep(&ts, nullptr);  // a signal cuts it short, which is what we want
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The last `iterations=N` line of a progress file (-1 when none).
double read_progress(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return -1;
  const std::streamoff size = f.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 4096);
  f.seekg(from);
  std::string tail((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Only complete lines count: a line still being written is ignored.
  const auto end = tail.rfind('\n');
  if (end == std::string::npos) return -1;
  tail.resize(end);
  std::istringstream in(tail);
  std::string line;
  double last = -1;
  while (std::getline(in, line)) {
    if (line.rfind("iterations=", 0) != 0) continue;
    char* e = nullptr;
    const double v = std::strtod(line.c_str() + 11, &e);
    if (e != line.c_str() + 11 && std::isfinite(v) && v >= 0) last = v;
  }
  return last;
}

std::vector<Placement> placements_of(const db::OnlineLaunch& l) {
  std::vector<Placement> ps;
  for (const db::OnlineProc& p : l.procs) ps.push_back({p.node, p.gpus});
  return ps;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string token() {
  static unsigned counter = 0;
  std::ostringstream s;
  s << std::hex << static_cast<long long>(unix_now() * 1e6) << "-" << getpid() << "-" << ++counter;
  return s.str();
}

}  // namespace

struct Runner::Impl {
  db::OnlineStore& store;
  Cluster cluster;
  const Executor& executor;
  const CheckpointAverager* averager;
  RunnerOptions o;
  LearnedOracle oracle;
  std::unique_ptr<Policy> policy;

  struct Entry {
    db::OnlineJob row;
    Job job;
    JobState state;
  };
  std::map<int64_t, Entry> jobs;                 // unfinished jobs (stable addresses)
  std::map<int64_t, db::OnlineLaunch> launches;  // live launches
  struct Rate {
    double t0 = -1, it0 = 0, t1 = -1, it1 = 0;
  };
  std::map<int64_t, Rate> rates;  // per launch, from the progress polls
  double last_accounting = 0;

  Impl(db::OnlineStore& s, Cluster c, const Executor& e, const ThroughputOracle* base,
       const CheckpointAverager* a, RunnerOptions opts)
      : store(s), cluster(std::move(c)), executor(e), averager(a), o(std::move(opts)),
        oracle(base, o.prior_per_gpu) {}

  void log(const std::string& m) const {
    if (o.log) o.log(m);
  }
  bool stopping() const { return o.stop && o.stop->load(); }

  // ---- jobs ----

  void refresh_jobs() {
    std::set<int64_t> seen;
    for (db::OnlineJob& row : store.jobs(true)) {
      seen.insert(row.id);
      auto it = jobs.find(row.id);
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

  bool has_live(int64_t job_id) const {
    for (const auto& [id, l] : launches)
      if (l.job_id == job_id) return true;
    return false;
  }
  std::vector<int64_t> live_of(int64_t job_id, bool running_only) const {
    std::vector<int64_t> out;
    for (const auto& [id, l] : launches)
      if (l.job_id == job_id && (!running_only || l.state == "running" || l.state == "stopping"))
        out.push_back(id);
    return out;
  }

  double copy_weight(const db::OnlineLaunch& l) const { return l.copy == 0 ? 1.0 : o.fork_efficiency; }

  // Consolidated plus what the running launches report.
  double progress_of(const Entry& e) const {
    double done = e.row.iterations_done;
    for (const auto& [id, l] : launches)
      if (l.job_id == e.row.id && l.state != "planned") done += l.iterations * copy_weight(l);
    return done;
  }

  // ---- processes ----

  // Reads progress and exits; ends launches whose processes are all gone.
  void poll() {
    const double now = unix_now();
    // GPU-seconds of running launches since the last poll.
    const double dt = last_accounting > 0 ? now - last_accounting : 0;
    last_accounting = now;
    std::vector<int64_t> ended;
    for (auto& [id, l] : launches) {
      if (l.state != "running" && l.state != "stopping") continue;
      const double it = read_progress(l.progress);
      if (it > l.iterations) {
        l.iterations = it;
        Rate& r = rates[id];
        if (r.t0 < 0) r = {now, it, now, it};
        else r.t1 = now, r.it1 = it;
      }
      auto je = jobs.find(l.job_id);
      if (je != jobs.end()) {
        int gpus = 0;
        for (const auto& p : l.procs) gpus += p.gpus;
        je->second.row.attained_gpu_s += gpus * dt;
      }
      bool any_alive = false, any_failed = false;
      for (const db::OnlineProc& p : l.procs) {
        if (alive(p.pid, p.start_ticks)) any_alive = true;
        else if (proc_outcome(l, p) != "exit 0") any_failed = true;
      }
      if (!any_alive) ended.push_back(id);
      else if (any_failed && l.state == "running") {
        // One member of a gang died: the gang cannot go on.
        log("launch " + std::to_string(id) + ": a process of the gang failed; stopping the rest");
        stop({id});
        ended.push_back(id);
      }
    }
    for (int64_t id : ended)
      if (launches.count(id) && launches[id].state != "ended") end_launch(id);
    settle_jobs();
  }

  std::string exit_file(const db::OnlineLaunch& l, size_t rank) const {
    return l.dir + "/proc-" + std::to_string(rank) + ".exit";
  }
  std::string proc_outcome(const db::OnlineLaunch& l, const db::OnlineProc& p) const {
    const size_t rank = static_cast<size_t>(&p - l.procs.data());
    std::string s = read_text(exit_file(l, rank));
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s.empty() ? (p.pid == 0 ? "not started" : "killed") : s;
  }

  void observe(const db::OnlineLaunch& l) {
    const auto r = rates.find(l.id);
    if (r == rates.end() || r->second.t1 - r->second.t0 < 0.5 || r->second.it1 <= r->second.it0) return;
    const double rate = (r->second.it1 - r->second.it0) / (r->second.t1 - r->second.t0);
    std::string type;
    int gpus = 0;
    for (const auto& p : l.procs) {
      const std::string& t = cluster.nodes[static_cast<size_t>(p.node)].gpu_type;
      if (!type.empty() && t != type) return;  // mixed types: no clean figure
      type = t;
      gpus += p.gpus;
    }
    oracle.observe(l.job_id, type, gpus, rate);
    store.save_throughput({l.job_id, type, oracle.per_gpu(l.job_id, type), oracle.samples(l.job_id, type)});
  }

  // Marks a launch ended (all its processes are gone) and judges its outcome.
  void end_launch(int64_t id) {
    db::OnlineLaunch& l = launches.at(id);
    const double it = read_progress(l.progress);
    if (it > l.iterations) l.iterations = it;
    std::string outcome;
    bool ok = true;
    for (const auto& p : l.procs) {
      const std::string s = proc_outcome(l, p);
      if (s != "exit 0") ok = false;
      if (outcome.empty() || s != "exit 0") outcome = s;
    }
    const bool stopped_by_us = l.state == "stopping";
    l.outcome = stopped_by_us ? "stopped (" + outcome + ")" : outcome;
    l.state = "ended";
    l.ended_at = unix_now();
    Entry* e = jobs.count(l.job_id) ? &jobs.at(l.job_id) : nullptr;
    bool failed = !stopped_by_us && !ok;
    if (!stopped_by_us && ok && e && l.iterations <= 0 && progress_of(*e) < e->row.iterations)
      failed = true, outcome = "exited without progress";
    store.transaction([&] {
      observe(l);
      store.update_launch(l);
      if (failed && e) {
        ++e->row.failures;
        e->row.last_error = "launch " + std::to_string(id) + " (copy " + std::to_string(l.copy) +
                            "): " + outcome + "; see " + l.dir;
        store.update_job(e->row);
      }
    });
    rates.erase(id);
    if (failed) log("job " + std::to_string(l.job_id) + ": launch " + std::to_string(id) + " failed: " + outcome);
  }

  // SIGTERM, the grace period, then SIGKILL; every launch in `ids` is ended.
  void stop(const std::vector<int64_t>& ids) {
    std::vector<int64_t> todo;
    store.transaction([&] {
      for (int64_t id : ids) {
        db::OnlineLaunch& l = launches.at(id);
        if (l.state != "running" && l.state != "stopping") continue;
        l.state = "stopping";
        store.update_launch(l);
        todo.push_back(id);
      }
    });
    auto any_alive = [&](int64_t id) {
      for (const auto& p : launches.at(id).procs)
        if (alive(p.pid, p.start_ticks)) return true;
      return false;
    };
    for (int64_t id : todo)
      for (const auto& p : launches.at(id).procs) signal_group(p.pid, p.start_ticks, SIGTERM);
    const double deadline = unix_now() + o.grace_s;
    while (unix_now() < deadline &&
           std::any_of(todo.begin(), todo.end(), [&](int64_t id) { return any_alive(id); }))
      sleep_s(0.05);
    for (int64_t id : todo) {
      if (!any_alive(id)) continue;
      const db::OnlineLaunch& l = launches.at(id);
      log("launch " + std::to_string(id) + ": still running after the grace period; SIGKILL");
      for (size_t r = 0; r < l.procs.size(); ++r) {
        signal_group(l.procs[r].pid, l.procs[r].start_ticks, SIGKILL);
        executor.force_stop(proc_name(l, r));
      }
    }
    for (int i = 0; i < 100 && std::any_of(todo.begin(), todo.end(), [&](int64_t id) { return any_alive(id); }); ++i)
      sleep_s(0.05);
    for (int64_t id : todo) end_launch(id);
  }

  std::string proc_name(const db::OnlineLaunch& l, size_t rank) const {
    return "cellsched-L" + std::to_string(l.id) + "-" + std::to_string(rank);
  }

  // ---- consolidation and completion ----

  // Jobs whose launches have all ended get their epoch consolidated; done,
  // failed and cancelled jobs are closed.
  void settle_jobs() {
    for (auto it = jobs.begin(); it != jobs.end();) {
      Entry& e = it->second;
      const int64_t jid = it->first;
      bool any_running = false, any_ended = false;
      for (const auto& [id, l] : launches) {
        if (l.job_id != jid) continue;
        if (l.state == "ended") any_ended = true;
        else any_running = true;
      }
      const bool done = progress_of(e) >= e.row.iterations;
      const bool give_up = e.row.failures > o.max_failures;
      if (any_running && (done || give_up || e.row.cancel_requested)) {
        stop(live_of(jid, true));
        any_running = false;
        any_ended = true;
      }
      if (!any_running && any_ended) consolidate(e);
      std::string final_state;
      if (!any_running) {
        if (e.row.iterations_done >= e.row.iterations) final_state = "done";
        else if (e.row.cancel_requested) final_state = "cancelled";
        else if (give_up) final_state = "failed";
      }
      if (!final_state.empty()) {
        e.row.state = final_state;
        e.row.finished_at = unix_now();
        store.transaction([&] { store.update_job(e.row); });
        log("job " + std::to_string(jid) + " " + final_state + " (" + num(e.row.iterations_done) + " of " + num(e.row.iterations) + " iterations)");
        it = jobs.erase(it);
        continue;
      }
      if (!any_running && e.row.state == "running") {
        e.row.state = "queued";
        store.transaction([&] { store.update_job(e.row); });
      }
      ++it;
    }
  }

  void consolidate(Entry& e) {
    std::vector<int64_t> ids;
    std::vector<std::string> inputs;
    std::vector<double> weights;
    double counted = 0;
    for (const auto& [id, l] : launches) {
      if (l.job_id != e.row.id || l.state != "ended") continue;
      ids.push_back(id);
      if (l.iterations > 0 && fs::exists(l.ckpt_out)) {
        inputs.push_back(l.ckpt_out);
        weights.push_back(l.iterations);
        counted += l.iterations * copy_weight(l);
      }
    }
    if (ids.empty()) return;
    db::OnlineConsolidation c;
    c.job_id = e.row.id;
    c.epoch = e.row.epoch + 1;
    c.at = unix_now();
    const std::string previous = e.row.checkpoint;
    if (inputs.size() == 1) {
      c.method = "adopt";
      c.output = inputs[0];
    } else if (inputs.size() > 1) {
      c.output = e.row.checkpoint_dir + "/ckpt-" + std::to_string(c.epoch) + ".pt";
      std::string why;
      if (averager) {
        try {
          averager->average(inputs, weights, c.output);
          c.method = "average";
        } catch (const std::exception& ex) {
          why = ex.what();
        }
      } else {
        why = "this build has no LibTorch";
      }
      if (c.method.empty()) {
        // Keep the copy that trained most; only its iterations count.
        const size_t best = static_cast<size_t>(std::max_element(weights.begin(), weights.end()) - weights.begin());
        c.method = "best";
        c.output = inputs[best];
        counted = 0;
        for (const auto& [id, l] : launches)
          if (l.job_id == e.row.id && l.state == "ended" && l.ckpt_out == c.output)
            counted = l.iterations * copy_weight(l);
        e.row.last_error = "averaging failed (" + why + "); kept the copy with the most iterations";
        log("job " + std::to_string(e.row.id) + ": " + e.row.last_error);
      }
    }
    for (size_t i = 0; i < inputs.size(); ++i) c.inputs.emplace_back(inputs[i], weights[i]);
    c.iterations = counted;
    store.transaction([&] {
      if (!c.inputs.empty()) {
        e.row.iterations_done += counted;
        e.row.checkpoint = c.output;
        e.row.epoch = c.epoch;
        store.save_consolidation(c);
      }
      store.update_job(e.row);
      for (int64_t id : ids) {
        launches.at(id).state = "consolidated";
        store.update_launch(launches.at(id));
      }
    });
    if (!c.inputs.empty() && inputs.size() > 1)
      log("job " + std::to_string(e.row.id) + ": " + c.method + " of " + std::to_string(inputs.size()) +
          " copies -> " + c.output + " (" + num(e.row.iterations_done) + " iterations)");
    for (int64_t id : ids) launches.erase(id);
    if (!o.keep_checkpoints && !c.inputs.empty()) {
      std::error_code ec;
      for (const std::string& in : inputs)
        if (in != c.output) fs::remove(in, ec);
      if (!previous.empty() && previous != c.output) fs::remove(previous, ec);
    }
  }

  // ---- rounds ----

  std::vector<std::vector<Placement>> gangs_of(const Allocation& a) const {
    std::vector<std::vector<Placement>> g;
    if (!a.workers.empty()) g.push_back(a.workers);
    for (const auto& c : a.copies) g.push_back(c);
    return g;
  }

  Allocation current_allocation(int64_t jid) const {
    Allocation a;
    for (const auto& [id, l] : launches) {
      if (l.job_id != jid || (l.state != "running" && l.state != "planned")) continue;
      if (l.copy == 0) a.workers = placements_of(l);
      else a.copies.push_back(placements_of(l));
    }
    return a;
  }

  void round(int64_t number, double t0) {
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
    RoundContext ctx{t0, o.round_s, &cluster, &oracle, &active, o.restart_s};
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
    if (!to_stop.empty()) stop(to_stop);
    settle_jobs();  // consolidates what just stopped
    start(number, t0, to_start);
  }

  // Refuses allocations that overfill a node or break a gang (a policy bug).
  void check(const std::vector<JobState*>& active, std::vector<Allocation>& out) const {
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

  // Invariant: `jobs` holds exactly the open jobs, and settle_jobs() is the
  // one place that closes one (done, failed, cancelled) and erases it. The
  // round decides, stops what changes, then settles: stopping a job's gangs
  // consolidates their progress, which can bring the job to its target, so a
  // job the policy chose to (re)start may be closed by the time it would be
  // started. Such a job is not started (it used to crash here, map::at).
  void start(int64_t number, double t0,
             std::vector<std::pair<int64_t, std::vector<std::vector<Placement>>>> plan) {
    std::erase_if(plan, [&](const auto& p) {
      const auto it = jobs.find(p.first);
      return it == jobs.end() || progress_of(it->second) >= it->second.row.iterations;
    });
    if (plan.empty()) return;
    // GPU indices still held per node.
    std::vector<std::vector<char>> held(cluster.nodes.size());
    for (size_t n = 0; n < held.size(); ++n) held[n].assign(static_cast<size_t>(cluster.nodes[n].gpus), 0);
    for (const auto& [id, l] : launches)
      for (const auto& p : l.procs) {
        std::stringstream ss(p.gpu_ids);
        std::string x;
        while (std::getline(ss, x, ','))
          if (!x.empty()) held[static_cast<size_t>(p.node)][std::stoul(x)] = 1;
      }
    std::vector<int64_t> fresh;
    std::map<int64_t, long long> target;  // launch -> iterations (the job tracker's share)
    store.transaction([&] {
      for (const auto& [jid, gangs] : plan) {
        Entry& e = jobs.at(jid);
        std::vector<double> gang_rates;
        for (const auto& g : gangs) gang_rates.push_back(allocation_throughput(oracle, e.job, cluster, g));
        const auto shares = split_iterations(
            static_cast<long long>(std::max(1.0, std::ceil(e.row.iterations - e.row.iterations_done))),
            gang_rates);
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
            auto& h = held[static_cast<size_t>(p.node)];
            int taken = 0;
            for (size_t k = 0; k < h.size() && taken < p.gpus; ++k)
              if (!h[k]) {
                h[k] = 1;
                proc.gpu_ids += (taken++ ? "," : "") + std::to_string(k);
              }
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
    // Fork every supervisor, commit their pids, then let them run.
    std::vector<PendingSpawn> pending;
    std::vector<int64_t> failed;
    for (int64_t id : fresh) {
      db::OnlineLaunch& l = launches.at(id);
      const Entry& e = jobs.at(l.job_id);
      std::error_code ec;
      fs::create_directories(l.dir, ec);
      fs::create_directories(e.row.checkpoint_dir, ec);
      const Node& master = cluster.nodes[static_cast<size_t>(l.procs[0].node)];
      const long long remaining = target.at(id);
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
          req.env = {"CELLSCHED_JOB_ID=" + std::to_string(l.job_id),
                     "CELLSCHED_COPY=" + std::to_string(l.copy),
                     "CELLSCHED_ROUND_END=" + std::to_string(static_cast<long long>(std::ceil(t0 + o.round_s))),
                     "CELLSCHED_CKPT_IN=" + l.ckpt_in,
                     "CELLSCHED_CKPT_OUT=" + l.ckpt_out,
                     "CELLSCHED_PROGRESS=" + l.progress,
                     "CELLSCHED_ITERATIONS=" + std::to_string(remaining),
                     "CELLSCHED_LAUNCH=" + l.token,
                     "CELLSCHED_GPUS=" + std::to_string(p.gpus),
                     "MASTER_ADDR=" + (master.address.empty() ? std::string("127.0.0.1") : master.address),
                     "MASTER_PORT=" + std::to_string(29500 + l.id % 20000),
                     "WORLD_SIZE=" + std::to_string(l.procs.size()),
                     "RANK=" + std::to_string(r),
                     "LOCAL_RANK=0"};
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
          ++e.row.failures;
          e.row.last_error = "launch " + std::to_string(id) + ": " + l.outcome;
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
    for (int64_t id : fresh) {
      const db::OnlineLaunch& l = launches.at(id);
      std::string where;
      for (const auto& p : l.procs) where += (where.empty() ? "" : " ") + p.node_name + ":" + p.gpu_ids;
      log("round " + std::to_string(number) + ": job " + std::to_string(l.job_id) + " copy " +
          std::to_string(l.copy) + " on " + where + (l.state == "ended" ? " FAILED: " + l.outcome : ""));
    }
  }

  // ---- recovery and shutdown ----

  void recover() {
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
        if (l.state == "stopping") resume_stop.push_back(l.id);
        if (!jobs.count(l.job_id)) {
          // The job finished (or was cancelled) meanwhile; stop what is left.
          if (l.state == "running") resume_stop.push_back(l.id);
        }
        launches.emplace(l.id, std::move(l));
      }
    });
    for (int64_t id : resume_stop) launches.at(id).state = "running";
    if (!launches.empty()) log("recovered " + std::to_string(launches.size()) + " launches from the store");
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

  void shutdown() {
    std::vector<int64_t> all;
    for (const auto& [id, l] : launches)
      if (l.state == "running" || l.state == "stopping") all.push_back(id);
    if (!all.empty()) {
      log("stopping " + std::to_string(all.size()) + " launches");
      stop(all);
    }
    settle_jobs();
  }

  void run() {
    policy = o.schedule_path.empty()
                 ? make_policy(o.policy)
                 : make_replay(load_schedule(o.schedule_path), cluster, o.schedule_offset);
    if (o.work_dir.empty()) o.work_dir = store.path() + ".d";
    fs::create_directories(o.work_dir);
    o.work_dir = fs::absolute(o.work_dir).string();
    store.transaction([&] {
      store.set_meta("nodes", cluster_to_yaml(cluster));
      store.set_meta("policy", o.policy);
      store.set_meta("executor", executor.name());
      store.set_meta("round_s", std::to_string(o.round_s));
      store.set_meta("runner_pid", std::to_string(getpid()));
      store.set_meta("started_at", std::to_string(unix_now()));
    });
    recover();
    long rounds = 0;
    while (!stopping()) {
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
        if (o.until_idle && jobs.empty()) break;
      }
      if (o.until_idle && jobs.empty()) break;
      if (o.max_rounds >= 0 && rounds >= o.max_rounds) break;
    }
    shutdown();
    store.transaction([&] { store.set_meta("runner_pid", "0"); });
  }
};

Runner::Runner(db::OnlineStore& store, Cluster cluster, const Executor& executor,
               const ThroughputOracle* base, const CheckpointAverager* averager, RunnerOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(cluster), executor, base, averager, std::move(options))) {}

Runner::~Runner() = default;

void Runner::run() { impl_->run(); }

}  // namespace cellsched::runner
