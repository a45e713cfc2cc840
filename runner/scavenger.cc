#include "runner/scavenger.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "runner/contract.h"
#include "runner/executor.h"
#include "runner/process.h"
#include "scheduler/malle_alloc.h"

namespace fs = std::filesystem;

namespace cellsched::runner {

namespace {

std::vector<std::string> split_bar(const std::string& line) {
  std::vector<std::string> f;
  std::string cur;
  for (char c : line) {
    if (c == '|') {
      f.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  f.push_back(cur);
  return f;
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Iterations launch k of a job trained (its progress file's last complete
// `iterations=N` line), with its checkpoint commit finished (contract.h), so
// launch-k.pt holds exactly those iterations.
double settle_launch(const fs::path& dir, int k) {
  const std::string stem = "launch-" + std::to_string(k);
  const double n = std::max(0.0, read_progress((dir / (stem + ".progress")).string()));
  commit_checkpoint((dir / (stem + ".pt")).string(), n);
  return n;
}

struct Launch {
  size_t job = 0;
  int k = 0;
  std::string slurm_name;
  std::vector<std::string> nodes;
  int64_t pid = 0, ticks = 0;
  double launched_s = 0, running_since_s = -1;
  double stop_sent_s = -1, claim_seen_s = -1;
};

struct JobState {
  fs::path dir;
  double done = 0;
  int next_k = 0;
  int launches = 0;
  bool finished = false;  // done, or given up on (failed)
  int empty_in_row = 0;   // launches that ended by themselves with nothing trained
  bool failed = false;
  std::string error;
};

// The last non-empty line of a launch's log ("" when there is none).
std::string last_log_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

class Scavenger {
 public:
  Scavenger(const std::vector<ScavengeJob>& jobs, const ScavengeOptions& o) : jobs_(jobs), o_(o) {
    for (const ScavengeJob& j : jobs) {
      JobState s;
      s.dir = fs::path(o.state_dir) / j.name;
      fs::create_directories(s.dir);
      state_.push_back(s);
    }
    // What earlier scavengers trained is counted in run(), once any launch
    // of theirs still in Slurm is stopped: counting commits checkpoints,
    // which a trainer still saving would race.
    token_ = slurm_name_token(o.state_dir);
  }

  ScavengeReport run(const std::atomic<bool>* stop);

 private:
  void log(const std::string& s) const {
    if (o_.log) o_.log(s);
  }
  // Our launches' Slurm job names are this and the launch number.
  std::string launch_prefix(size_t job) const { return "cellsched-scav-" + token_ + "-" + jobs_[job].name + "-"; }
  void resume();
  void stop_orphans();
  void settle(double now);
  void look(double now);
  void launch(size_t job, const std::vector<std::string>& nodes, double window_s, double now);
  void stop_launch(Launch& l, double now, bool claim);
  void force(Launch& l);
  std::string ckpt_in(size_t job) const;
  ExecutorOptions slurm_options() const {
    ExecutorOptions e;
    e.kind = "slurm";
    e.srun = o_.srun;
    e.scancel = o_.scancel;
    e.partition = o_.partition;
    return e;
  }

  const std::vector<ScavengeJob>& jobs_;
  std::string token_;  // in our launches' Slurm job names: cellsched-scav-TOKEN-JOB-K
  std::set<std::string> passed_over_;  // pending jobs logged as not waiting for nodes
  ScavengeOptions o_;
  std::vector<JobState> state_;
  std::vector<Launch> launches_;
  ScavengeReport report_;
};

std::string Scavenger::ckpt_in(size_t job) const {
  for (int k = state_[job].next_k - 1; k >= 0; --k) {
    const fs::path p = state_[job].dir / ("launch-" + std::to_string(k) + ".pt");
    if (fs::exists(p)) return p.string();
  }
  return "";
}

// What earlier scavengers trained, from the launches in --state (resumable).
void Scavenger::resume() {
  report_.jobs.clear();
  for (size_t i = 0; i < jobs_.size(); ++i) {
    JobState& s = state_[i];
    s.done = 0;
    s.next_k = 0;
    for (int k = 0;; ++k) {
      const fs::path p = s.dir / ("launch-" + std::to_string(k) + ".progress");
      if (!fs::exists(p) && !fs::exists(s.dir / ("launch-" + std::to_string(k) + ".log"))) break;
      s.done += settle_launch(s.dir, k);
      s.next_k = k + 1;
    }
    s.finished = s.done >= jobs_[i].iterations;
    report_.jobs.push_back({jobs_[i].name, s.done, 0, s.finished, false, ""});
  }
}

// Launches that an earlier scavenger of this --state left in Slurm (it was
// killed; its srun lives on; the name's token is this --state's): stopped as a claim stops them (SIGTERM through
// Slurm, the grace period, scancel) and then counted. Left alone they trained
// on unseen: their progress was counted while they ran, and no claim could
// stop them, so a primary job waited for their time limit (audit, 2026-12-07).
void Scavenger::stop_orphans() {
  const auto ours = [&]() {
    std::vector<std::string> names;
    const std::string text = run_capture({o_.squeue, "-h", "-o", "%i|%j|%T|%Z"});
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      const std::vector<std::string> f = split_bar(line);
      if (f.size() < 4) continue;
      for (size_t i = 0; i < jobs_.size(); ++i) {
        const std::string prefix = launch_prefix(i);
        const std::string& name = f[1];
        if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() ||
            name.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
          continue;
        std::error_code ec;
        if (fs::weakly_canonical(f[3], ec) == fs::weakly_canonical(state_[i].dir, ec)) names.push_back(name);
      }
    }
    return names;
  };
  std::vector<std::string> left = ours();
  if (left.empty()) return;
  std::string list;
  for (const std::string& n : left) list += (list.empty() ? "" : ", ") + n;
  log("stopping " + std::to_string(left.size()) + (left.size() == 1 ? " launch" : " launches") +
      " an earlier scavenger left running: " + list);
  for (const std::string& n : left) slurm_cancel(slurm_options(), n, "TERM");
  const double until = wall_now() + o_.grace_s;
  while (!(left = ours()).empty() && wall_now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (const std::string& n : left) slurm_kill(slurm_options(), n);
  // Counted (run() calls resume()) only once Slurm no longer runs them.
  for (int i = 0; i < 120 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    left = ours();
  }
  if (!left.empty()) log("Slurm still lists " + left.front() + " a minute after it was cancelled; counting its progress so far");
}

void Scavenger::settle(double now) {
  for (auto it = launches_.begin(); it != launches_.end();) {
    Launch& l = *it;
    if (alive(l.pid, l.ticks)) {
      ++it;
      continue;
    }
    JobState& s = state_[l.job];
    const double n = settle_launch(s.dir, l.k);
    s.done += n;
    if (l.running_since_s >= 0) report_.node_s += static_cast<double>(l.nodes.size()) * (now - l.running_since_s);
    if (l.claim_seen_s >= 0) report_.release_max_s = std::max(report_.release_max_s, now - l.claim_seen_s);
    std::ostringstream msg;
    msg << jobs_[l.job].name << ": launch " << l.k << " ended, " << n << " iterations (" << s.done << " of "
        << jobs_[l.job].iterations << ")";
    if (s.done >= jobs_[l.job].iterations) {
      s.finished = true;
      msg << ": done";
    }
    // Ended unasked with nothing trained: the command fails (a path the
    // launch cannot find, a crash at start). It was relaunched every poll.
    s.empty_in_row = n <= 0 && l.stop_sent_s < 0 ? s.empty_in_row + 1 : 0;
    if (!s.finished && s.empty_in_row >= kMaxEmptyLaunches) {
      s.finished = s.failed = true;
      const fs::path log_file = s.dir / ("launch-" + std::to_string(l.k) + ".log");
      s.error = std::to_string(s.empty_in_row) + " launches in a row trained nothing";
      if (const std::string last = last_log_line(log_file); !last.empty()) s.error += "; " + log_file.string() + ": " + last;
      msg << ": giving up (" << s.error << ")";
    }
    log(msg.str());
    it = launches_.erase(it);
  }
}

void Scavenger::launch(size_t job, const std::vector<std::string>& nodes, double window_s, double now) {
  JobState& s = state_[job];
  const ScavengeJob& j = jobs_[job];
  Launch l;
  l.job = job;
  l.k = s.next_k++;
  l.slurm_name = launch_prefix(job) + std::to_string(l.k);
  l.nodes = nodes;
  l.launched_s = now;
  const long minutes = static_cast<long>(std::floor(window_s / 60));
  std::string list;
  for (const std::string& n : nodes) list += (list.empty() ? "" : ",") + n;
  const std::string tag = "launch-" + std::to_string(l.k);
  // Through the Slurm executor's malleable launch (executor.h).
  SlurmLaunch sl{nodes, minutes, l.slurm_name, s.dir.string(), o_.task_wrapper};
  sl.command.insert(sl.command.end(), j.command.begin(), j.command.end());
  SpawnSpec spec;
  spec.argv = slurm_launch_argv(slurm_options(), sl);
  spec.env = {"CELLSCHED_JOB_ID=" + std::to_string(job), "CELLSCHED_COPY=0", "CELLSCHED_CKPT_IN=" + ckpt_in(job),
              "CELLSCHED_CKPT_OUT=" + (s.dir / (tag + ".pt")).string(),
              "CELLSCHED_PROGRESS=" + (s.dir / (tag + ".progress")).string(),
              "CELLSCHED_ITERATIONS=" + std::to_string(static_cast<long long>(std::ceil(j.iterations - s.done))),
              "CELLSCHED_LAUNCH=" + l.slurm_name, "CELLSCHED_NODES=" + std::to_string(nodes.size()),
              "CELLSCHED_ROUND_END=" + std::to_string(static_cast<long long>(now + minutes * 60))};
  spec.workdir = s.dir.string();
  spec.log = (s.dir / (tag + ".log")).string();
  spec.exit_file = (s.dir / (tag + ".exit")).string();
  PendingSpawn p = spawn(spec);
  l.pid = p.pid();
  l.ticks = p.start_ticks();
  p.go();
  ++s.launches;
  ++report_.launches;
  log(j.name + ": launch " + std::to_string(l.k) + " on " + list + " (" + std::to_string(nodes.size()) +
      " nodes, time limit " + std::to_string(minutes) + " min)");
  launches_.push_back(l);
}

void Scavenger::stop_launch(Launch& l, double now, bool claim) {
  if (l.stop_sent_s >= 0) return;
  l.stop_sent_s = now;
  if (claim) l.claim_seen_s = now;
  // Slurm signals the step's tasks: the trainer checkpoints and exits. (A
  // SIGTERM to srun itself would make it kill the step: no final save.)
  if (!slurm_cancel(slurm_options(), l.slurm_name, "TERM")) signal_group(l.pid, l.ticks, SIGTERM);
}

void Scavenger::force(Launch& l) {
  slurm_kill(slurm_options(), l.slurm_name);
  signal_group(l.pid, l.ticks, SIGKILL);
}

void Scavenger::look(double now) {
  ++report_.polls;
  // Only the partition's nodes (squeue below is filtered the same way): all
  // of them were scavenged, and each launch on another partition's failed.
  std::vector<std::string> sinfo = {o_.sinfo, "-N", "-h", "-o", "%N|%T"};
  if (!o_.partition.empty()) sinfo.push_back("--partition=" + o_.partition);
  const std::vector<SlurmNode> nodes = parse_sinfo(run_capture(sinfo));
  std::vector<std::string> squeue = {o_.squeue, "-h", "-t", "PD,R,CG", "-o", "%i|%j|%T|%D|%S|%r", "--sort=-p,i"};
  if (!o_.partition.empty()) squeue.push_back("--partition=" + o_.partition);
  const std::vector<SlurmJob> queue = parse_squeue(run_capture(squeue));
  std::map<std::string, const SlurmJob*> ours;
  const SlurmJob* head = nullptr;
  for (const SlurmJob& j : queue) {
    if (j.name.rfind("cellsched-scav-", 0) == 0) {
      ours[j.name] = &j;
    } else if (!head && j.state == "PENDING") {
      // A held job, or one waiting for another to end, wants no node now:
      // taken as the head, it stopped all scavenging, silently.
      if (pends_for_nodes(j.reason)) head = &j;
      else if (passed_over_.insert(j.id).second)
        log("job " + j.id + " pends for " + (j.reason.empty() ? "no reason given" : j.reason) +
            ", not for nodes: scavenging around it");
    }
  }
  int ours_running = 0;
  std::set<std::string> promised;
  for (Launch& l : launches_) {
    auto it = ours.find(l.slurm_name);
    const bool running = it != ours.end() && it->second->state == "RUNNING";
    if (running && l.running_since_s < 0) l.running_since_s = now;
    if (running && l.stop_sent_s < 0) ours_running += static_cast<int>(l.nodes.size());
    if (!running) promised.insert(l.nodes.begin(), l.nodes.end());
    if (!running && l.stop_sent_s < 0 && now - l.launched_s > o_.launch_timeout_s) {
      log(jobs_[l.job].name + ": launch " + std::to_string(l.k) + " not started by Slurm in " +
          std::to_string(static_cast<int>(o_.launch_timeout_s)) + " s: cancelled");
      ++report_.cancelled_launches;
      stop_launch(l, now, false);
      force(l);
    }
  }
  std::vector<std::string> idle;
  for (const SlurmNode& n : nodes)
    // "planned": idle now, reserved by the backfill scheduler for a waiting job (Slurm >= 22.05).
    if ((n.state == "idle" || n.state == "planned") && !promised.count(n.name)) idle.push_back(n.name);
  const int n_idle = static_cast<int>(idle.size());
  // A waiting job that fits once ours leave: they leave now (largest first).
  if (head && head->nodes > n_idle && head->nodes <= n_idle + ours_running) {
    std::vector<Launch*> order;
    for (Launch& l : launches_)
      if (l.stop_sent_s < 0 && l.running_since_s >= 0) order.push_back(&l);
    std::sort(order.begin(), order.end(), [](const Launch* a, const Launch* b) { return a->nodes.size() > b->nodes.size(); });
    int freed = 0;
    for (Launch* l : order) {
      if (n_idle + freed >= head->nodes) break;
      freed += static_cast<int>(l->nodes.size());
      ++report_.claims;
      log("job " + head->id + " (" + std::to_string(head->nodes) + " nodes) waits for nodes of " +
          jobs_[l->job].name + ": stopping it");
      stop_launch(*l, now, true);
    }
  }
  for (Launch& l : launches_)  // past the grace period: cancel it
    if (l.stop_sent_s >= 0 && now - l.stop_sent_s > o_.grace_s) force(l);
  // Launch on the idle nodes Slurm cannot give the waiting job anyway.
  if (n_idle == 0 || (head && head->nodes <= n_idle)) return;
  // A waiting job whose start Slurm has not planned yet may want these nodes
  // at any moment: wait for the backfill scheduler's plan.
  if (head && head->start_s <= 0) return;
  double window = o_.horizon_s;
  if (head) window = std::min(window, head->start_s - now - o_.grace_s - o_.plan_margin_s);
  if (window < 60) return;  // Slurm's time limits are whole minutes
  std::vector<size_t> waiting;
  std::vector<AllocJob> alloc;
  for (size_t j = 0; j < jobs_.size(); ++j) {
    if (state_[j].finished) continue;
    if (std::any_of(launches_.begin(), launches_.end(), [&](const Launch& l) { return l.job == j; })) continue;
    AllocJob a;
    a.curve = jobs_[j].curve;
    a.rescale_s = jobs_[j].rescale_s;
    waiting.push_back(j);
    alloc.push_back(a);
  }
  if (alloc.empty()) return;
  const std::vector<AllocChoice> choice = allocate_milp({{window, n_idle}}, alloc, 1.0);
  size_t next = 0;
  for (size_t i = 0; i < waiting.size(); ++i) {
    if (choice[i].nodes <= 0) continue;
    std::vector<std::string> take(idle.begin() + static_cast<long>(next), idle.begin() + static_cast<long>(next + choice[i].nodes));
    next += choice[i].nodes;
    launch(waiting[i], take, window, now);
  }
}

ScavengeReport Scavenger::run(const std::atomic<bool>* stop) {
  try {
    stop_orphans();
  } catch (const std::runtime_error& e) {
    ++report_.failed_polls;
    log(std::string(e.what()) + ": could not look for launches an earlier scavenger left running");
  }
  resume();
  const double start = wall_now();
  std::exception_ptr fatal;
  int failed_in_row = 0;
  while (true) {
    const double now = wall_now();
    settle(now);
    const bool all_done = std::all_of(state_.begin(), state_.end(), [](const JobState& s) { return s.finished; });
    if ((all_done && launches_.empty()) || (stop && *stop) || (o_.duration_s >= 0 && now - start >= o_.duration_s)) break;
    if (!all_done) {
      // A busy slurmctld fails or stalls now and then: skip that poll. One
      // failure used to end the scavenger and leave its launches training.
      try {
        look(now);
        failed_in_row = 0;
      } catch (const std::runtime_error& e) {
        ++report_.failed_polls;
        if (++failed_in_row >= kMaxFailedPolls) {
          log(std::string(e.what()) + ": " + std::to_string(failed_in_row) +
              " polls in a row failed; stopping what runs (checkpointed)");
          fatal = std::current_exception();
          break;
        }
        log(std::string(e.what()) + ": poll skipped");
      }
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.interval_s));
  }
  // Leave: checkpoint what runs, then cancel what did not exit in time.
  const double t = wall_now();
  for (Launch& l : launches_) stop_launch(l, t, false);
  while (!launches_.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double now = wall_now();
    for (Launch& l : launches_)
      if (now - l.stop_sent_s > o_.grace_s) force(l);
    settle(now);
  }
  for (size_t i = 0; i < state_.size(); ++i) {
    report_.jobs[i].iterations_done = state_[i].done;
    report_.jobs[i].launches = state_[i].launches;
    report_.jobs[i].done = state_[i].finished && !state_[i].failed;
    report_.jobs[i].failed = state_[i].failed;
    report_.jobs[i].error = state_[i].error;
  }
  if (fatal) std::rethrow_exception(fatal);
  return report_;
}

}  // namespace

bool pends_for_nodes(const std::string& reason) {
  // squeue's %r for a job the scheduler will start once nodes free up:
  // Resources (its own turn), Priority (behind another), None (not yet
  // looked at by a cycle). Every other reason (JobHeldUser, JobHeldAdmin,
  // Dependency, BeginTime, a QOS or association limit, ...) waits on
  // something no idle node changes.
  return reason.empty() || reason == "Resources" || reason == "Priority" || reason == "None";
}

std::vector<SlurmNode> parse_sinfo(const std::string& text) {
  std::vector<SlurmNode> out;
  std::set<std::string> seen;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split_bar(line);
    if (f.size() != 2 || f[0].empty() || !seen.insert(f[0]).second) continue;
    out.push_back({f[0], f[1]});
  }
  return out;
}

std::vector<SlurmJob> parse_squeue(const std::string& text) {
  std::vector<SlurmJob> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split_bar(line);
    if (f.size() != 6 || f[0].empty()) continue;
    SlurmJob j;
    j.id = f[0];
    j.name = f[1];
    j.state = f[2];
    j.nodes = std::max(0, std::atoi(f[3].c_str()));
    j.start_s = parse_slurm_time(f[4]);
    j.reason = f[5];
    out.push_back(std::move(j));
  }
  return out;
}

double parse_slurm_time(const std::string& s) {
  std::tm tm{};
  int y, mo, d, h, mi, se;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d%c", &y, &mo, &d, &h, &mi, &se, &tail) != 6) return -1;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  tm.tm_isdst = -1;
  const std::time_t t = std::mktime(&tm);
  return t == static_cast<std::time_t>(-1) ? -1 : static_cast<double>(t);
}

ScavengeReport scavenge(const std::vector<ScavengeJob>& jobs, const ScavengeOptions& options,
                        const std::atomic<bool>* stop) {
  Scavenger s(jobs, options);
  return s.run(stop);
}

}  // namespace cellsched::runner
