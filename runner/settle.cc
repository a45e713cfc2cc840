// Reconciling the runner with its processes: progress polls, stops (SIGTERM,
// grace, SIGKILL), ended launches and their checkpoint commit, and the one
// place that closes a job (settle_jobs) after consolidating its copies.
#include "runner/runner_impl.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "runner/contract.h"
#include "runner/process.h"

namespace fs = std::filesystem;

namespace cellsched::runner {

using namespace impl_util;

bool Runner::Impl::has_live(int64_t job_id) const {
  for (const auto& [id, l] : launches)
    if (l.job_id == job_id) return true;
  return false;
}

bool Runner::Impl::any_alive(int64_t id) const {
  const auto& procs = launches.at(id).procs;
  return std::any_of(procs.begin(), procs.end(),
                     [](const db::OnlineProc& p) { return alive(p.pid, p.start_ticks); });
}

std::vector<int64_t> Runner::Impl::live_of(int64_t job_id, bool running_only) const {
  std::vector<int64_t> out;
  for (const auto& [id, l] : launches)
    if (l.job_id == job_id && (!running_only || l.state == "running" || l.state == "stopping"))
      out.push_back(id);
  return out;
}

// Consolidated plus what the running launches report.
double Runner::Impl::progress_of(const Entry& e) const {
  return e.row.iterations_done +
         worth_of(e.row.id, [](const db::OnlineLaunch& l) { return l.state != "planned"; });
}

// Reads progress and exits; ends launches whose processes are all gone.
void Runner::Impl::poll() {
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
    bool any_alive = false;
    std::string failure;  // the first member that died badly: "rank 1: exit 3"
    for (const db::OnlineProc& p : l.procs) {
      if (alive(p.pid, p.start_ticks)) {
        any_alive = true;
      } else if (const std::string s = proc_outcome(l, p); s != "exit 0" && failure.empty()) {
        failure = "rank " + std::to_string(&p - l.procs.data()) + ": " + s;
      }
    }
    if (!any_alive) {
      ended.push_back(id);
    } else if (!failure.empty() && l.state == "running") {
      // One member of a gang died: the gang cannot go on, and the launch
      // failed (stopping the rest is not the scheduler's own stop).
      log("launch " + std::to_string(id) + ": " + failure + "; stopping the rest of the gang");
      gang_failures[id] = failure;
      stop({id});
      ended.push_back(id);
    }
  }
  for (int64_t id : ended)
    if (launches.count(id) && launches[id].state != "ended") end_launch(id);
  settle_jobs();
}

std::string Runner::Impl::proc_outcome(const db::OnlineLaunch& l, const db::OnlineProc& p) const {
  const size_t rank = static_cast<size_t>(&p - l.procs.data());
  std::string s = read_text(exit_file(l, rank));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? (p.pid == 0 ? "not started" : "killed") : s;
}

void Runner::Impl::observe(const db::OnlineLaunch& l) {
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
void Runner::Impl::end_launch(int64_t id) {
  db::OnlineLaunch& l = launches.at(id);
  // Whatever is left of the launch's process groups goes with it: a trainer
  // whose supervisor was killed (it would train on beside its relaunch), or
  // children a trainer left behind (a data loader holding a GPU).
  for (const db::OnlineProc& p : l.procs) signal_group(p.pid, p.start_ticks, SIGKILL);
  const double it = read_progress(l.progress);
  if (it > l.iterations) l.iterations = it;
  commit_checkpoint(l.ckpt_out, l.iterations);
  std::string outcome;
  bool ok = true;
  for (const auto& p : l.procs) {
    const std::string s = proc_outcome(l, p);
    if (s != "exit 0") ok = false;
    if (outcome.empty() || s != "exit 0") outcome = s;
  }
  const auto member = gang_failures.find(id);
  const bool member_failed = member != gang_failures.end();
  if (member_failed) {
    outcome = member->second + ", the rest of the gang stopped";
    gang_failures.erase(member);
  }
  const bool stopped_by_us = l.state == "stopping" && !member_failed;
  l.outcome = stopped_by_us ? "stopped (" + outcome + ")" : outcome;
  l.state = "ended";
  l.ended_at = unix_now();
  Entry* e = jobs.count(l.job_id) ? &jobs.at(l.job_id) : nullptr;
  bool failed = !stopped_by_us && !ok;
  if (!stopped_by_us && ok && e && l.iterations <= 0 && progress_of(*e) < e->row.iterations)
    failed = true, outcome = "exited without progress";
  std::error_code ec;
  if (l.iterations > 0 && !fs::exists(l.ckpt_out, ec)) {
    // A progress line commits a checkpoint (README, "The runner contract"):
    // without one the iterations cannot count, and the job would be
    // relaunched from where it was, round after round.
    failed = true;
    outcome = "reported " + num(l.iterations) + " iterations but wrote no checkpoint at " + l.ckpt_out;
    l.outcome = outcome;
  }
  store.transaction([&] {
    observe(l);
    store.update_launch(l);
    if (failed && e) {
      count_failure(*e, l, "launch " + std::to_string(id) + " (copy " + std::to_string(l.copy) + "): " + outcome +
                               "; see " + l.dir);
      store.update_job(e->row);
    }
  });
  rates.erase(id);
  if (failed) log("job " + std::to_string(l.job_id) + ": launch " + std::to_string(id) + " failed: " + outcome);
}

void Runner::Impl::count_failure(Entry& e, const db::OnlineLaunch& l, std::string error) {
  if (e.failed_round != l.round) ++e.row.failures;
  e.failed_round = l.round;
  e.row.last_error = std::move(error);
}

// SIGTERM, the grace period, then SIGKILL; every launch in `ids` is ended.
void Runner::Impl::stop(const std::vector<int64_t>& ids) {
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
  // (Under Slurm, scancel also exits 0 when no job has the name yet, an srun
  // still waiting to be registered: that launch then gets SIGKILL after the
  // grace period, with nothing trained to save.)
  for (int64_t id : todo) {
    const db::OnlineLaunch& l = launches.at(id);
    for (size_t r = 0; r < l.procs.size(); ++r)
      if (!executor.request_stop(proc_name(l, r))) signal_group(l.procs[r].pid, l.procs[r].start_ticks, SIGTERM);
  }
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

// Jobs whose launches have all ended get their epoch consolidated; done,
// failed and cancelled jobs are closed.
void Runner::Impl::settle_jobs() {
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
    if (any_running && done && !give_up && !e.row.cancel_requested) {
      // Its processes have trained their share and are exiting: a moment's
      // wait lets them end as themselves ("exit 0"), not as "stopped
      // (signal 15)" by a SIGTERM that reached an interpreter shutting down.
      const std::vector<int64_t> live = live_of(jid, true);
      const double until = unix_now() + std::min(o.grace_s, 2.0);
      const auto alive_any = [&](int64_t id) { return any_alive(id); };
      while (unix_now() < until && std::any_of(live.begin(), live.end(), alive_any)) sleep_s(0.05);
      for (int64_t id : live)
        if (!any_alive(id)) end_launch(id);
    }
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

void Runner::Impl::consolidate(Entry& e) {
  std::vector<int64_t> ids;
  std::vector<std::string> inputs;
  std::vector<double> weights;
  for (const auto& [id, l] : launches) {
    if (l.job_id != e.row.id || l.state != "ended") continue;
    ids.push_back(id);
    if (l.iterations > 0 && fs::exists(l.ckpt_out)) {
      inputs.push_back(l.ckpt_out);
      weights.push_back(l.iterations);
    }
  }
  double counted = worth_of(e.row.id, [](const db::OnlineLaunch& l) {
    return l.state == "ended" && l.iterations > 0 && fs::exists(l.ckpt_out);
  });
  if (ids.empty()) return;
  db::OnlineConsolidation c;
  c.job_id = e.row.id;
  c.epoch = e.row.epoch + 1;
  c.at = unix_now();
  const std::string previous = e.row.checkpoint;
  // One checkpoint kept whole (adopted, or the best of several) is one
  // trajectory: its iterations count in full, whichever gang trained them.
  // Only an average of copies counts each copy's at the fork efficiency.
  if (inputs.size() == 1) {
    c.method = "adopt";
    c.output = inputs[0];
    counted = weights[0];
  } else if (inputs.size() > 1) {
    // Named by job: jobs may share a checkpoint folder.
    c.output = e.row.checkpoint_dir + "/job-" + std::to_string(e.row.id) + "-ckpt-" + std::to_string(c.epoch) + ".pt";
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
      counted = weights[best];
      e.row.last_error = "averaging failed (" + why + "); kept the copy with the most iterations";
      log("job " + std::to_string(e.row.id) + ": " + e.row.last_error);
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) c.inputs.emplace_back(inputs[i], weights[i]);
  c.iterations = counted;
  store.transaction([&] {
    if (!c.inputs.empty()) {
      // A copy's iterations count a fraction each, so the done count can be
      // fractional while gangs train whole iterations (the remainder is
      // rounded up): the job is done at its target, not past it.
      e.row.iterations_done = std::min(e.row.iterations, e.row.iterations_done + counted);
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

}  // namespace cellsched::runner
