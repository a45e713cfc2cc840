#include "scheduler/malle.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <queue>
#include <random>
#include <stdexcept>

#include "scheduler/malle_alloc.h"

namespace cellsched {

const char* malle_policy_name(MallePolicy p) {
  switch (p) {
    case MallePolicy::malletrain: return "malletrain";
    case MallePolicy::freetrain: return "freetrain";
    case MallePolicy::advisor: return "malletrain-advisor";
  }
  return "?";
}

MallePolicy parse_malle_policy(const std::string& name) {
  for (MallePolicy p : {MallePolicy::malletrain, MallePolicy::freetrain, MallePolicy::advisor})
    if (name == malle_policy_name(p)) return p;
  throw std::invalid_argument("unknown host-mode policy '" + name +
                              "' (known: malletrain, freetrain, malletrain-advisor)");
}

namespace {

struct MState {
  const MalleableJob* job = nullptr;
  bool arrived = false, finished = false;
  std::vector<int> nodes;
  double done = 0, ckpt_done = 0, ckpt_t = 0;
  double busy_until = 0;      // restarting at a new size until then
  double seg_productive = 0;  // productive seconds in this window
  bool seg_sampled = false;
  int windows_sampled = 0;    // windows that ended with a sample
  ScalingAdvisor advisor{1};
  double error_after_3 = -1;
  std::vector<int> window_sizes;  // of the first 3 sampled windows
  double first_start = -1, completion = -1, node_s = 0;
  int windows = 0;                // started (rescales)
};

class Sim {
 public:
  Sim(const std::vector<HostJob>& primary, int nodes, const std::vector<MalleableJob>& malleable, MallePolicy policy,
      const MalleOptions& o)
      : primary_(primary), policy_(policy), o_(o), host_(nodes), holder_(nodes, -1), rng_(o.seed) {
    for (const MalleableJob& j : malleable) {
      MState s;
      s.job = &j;
      s.advisor = ScalingAdvisor(j.truth.max_nodes(), o.prior_sigma);
      m_.push_back(std::move(s));
    }
    for (size_t i = 0; i < primary.size(); ++i) index_[primary[i].id] = i;
    r_.policy = malle_policy_name(policy);
    r_.nodes = nodes;
    r_.malleable_jobs = static_cast<long>(malleable.size());
    r_.primary_jobs = static_cast<long>(primary.size());
    starts_.assign(primary.size(), -1);
  }

  MalleResult run();

 private:
  double next_event(double t) const;
  void advance(double t0, double t1);
  void host_step(double t);
  void decide(double t);
  void stop(size_t j, bool lose_work);
  void end_window(MState& s);
  void sample(MState& s);
  std::vector<int> explore_sizes(const ScalingAdvisor& advisor, double rescale_s,
                                 const std::vector<AllocClass>& classes) const;
  bool usable(int n, double t) const { return host_.owner()[n] == -1 && claims_[n] - o_.grace_s > t + 1e-6; }
  void record_occupancy(double t);

  const std::vector<HostJob>& primary_;
  MallePolicy policy_;
  MalleOptions o_;
  EasyBackfill host_;
  std::vector<int> holder_;  // malleable job holding each node, -1 none
  std::vector<double> claims_;
  std::vector<MState> m_;
  std::map<int64_t, size_t> index_;
  std::vector<double> starts_;
  using End = std::pair<double, int64_t>;
  std::priority_queue<End, std::vector<End>, std::greater<>> ends_;
  size_t next_p_ = 0, next_m_ = 0;
  bool dirty_ = true;
  std::vector<double> last_claims_;
  std::mt19937_64 rng_;
  MalleResult r_;
};

double Sim::next_event(double t) const {
  double e = kNoClaim;
  if (next_p_ < primary_.size()) e = std::min(e, primary_[next_p_].arrival_s);
  if (!ends_.empty()) e = std::min(e, ends_.top().first);
  if (next_m_ < m_.size()) e = std::min(e, m_[next_m_].job->arrival_s);
  for (const MState& s : m_) {
    if (s.nodes.empty() || s.finished) continue;
    const double rate = s.job->truth.at(static_cast<int>(s.nodes.size()));
    e = std::min(e, std::max(t, s.busy_until) + (s.job->iterations - s.done) / rate);
    for (int n : s.nodes)  // leave claimed nodes a grace period early
      if (claims_[n] - o_.grace_s > t + 1e-6) e = std::min(e, claims_[n] - o_.grace_s);
  }
  return std::max(e, t);
}

// The advisor measures a window's throughput over its productive time so
// far: relative noise advisor_noise over probe_s seconds, falling with the
// square root of a longer measurement.
void Sim::sample(MState& s) {
  const int n = static_cast<int>(s.nodes.size());
  const double sd = o_.advisor_noise * std::sqrt(o_.probe_s / std::max(o_.probe_s, s.seg_productive));
  std::normal_distribution<double> noise(0.0, sd);
  const double measured = s.job->truth.at(n) * std::max(0.5, 1 + noise(rng_));
  const double weight = std::max(o_.probe_s, s.seg_productive) / o_.probe_s;  // how long it measured
  if (s.seg_sampled) s.advisor.replace_last(n, measured, weight);
  else s.advisor.add_sample(n, measured, weight);
  s.seg_sampled = true;
}

// While the advisor explores a job, it may start or move only to the size a
// window of each class would teach the most about (ScalingAdvisor::explore_size);
// the first window is the allocator's choice.
std::vector<int> Sim::explore_sizes(const ScalingAdvisor& advisor, double rescale_s,
                                    const std::vector<AllocClass>& classes) const {
  if (!advisor.exploring(o_.explore_until)) return {};
  std::vector<int> sizes(classes.size(), 0);
  for (size_t c = 0; c < classes.size(); ++c) {
    const double weight = (classes[c].window_s - rescale_s) / o_.probe_s;  // the window in probe lengths
    sizes[c] = advisor.explore_size(classes[c].nodes, weight, o_.explore_until);
  }
  return sizes;
}

void Sim::advance(double t0, double t1) {
  const double dt = t1 - t0;
  if (dt <= 0) return;
  r_.idle_node_s += host_.idle_nodes() * dt;
  for (MState& s : m_) {
    if (s.nodes.empty() || s.finished) continue;
    const int n = static_cast<int>(s.nodes.size());
    const double rate = s.job->truth.at(n);
    const double from = std::max(t0, s.busy_until);
    double productive = std::max(0.0, t1 - from);
    productive = std::min(productive, (s.job->iterations - s.done) / rate);
    const double before = s.done;
    s.done += rate * productive;
    r_.iterations += rate * productive;
    r_.useful_node_s += s.job->truth.speedup(n) * productive;
    r_.malleable_node_s += n * dt;
    s.node_s += n * dt;
    s.seg_productive += productive;
    if (policy_ == MallePolicy::advisor && !s.seg_sampled && s.seg_productive >= o_.probe_s) sample(s);
    if (t1 - s.ckpt_t >= o_.checkpoint_s) {
      const double ck = s.ckpt_t + std::floor((t1 - s.ckpt_t) / o_.checkpoint_s) * o_.checkpoint_s;
      s.ckpt_t = ck;
      s.ckpt_done = std::min(s.done, before + rate * std::max(0.0, ck - from));
    }
    if (s.done >= s.job->iterations * (1 - 1e-12)) {
      s.finished = true;
      s.completion = from + productive;
      ++r_.malleable_completed;
      end_window(s);
      for (int node : s.nodes) holder_[node] = -1;
      s.nodes.clear();
      dirty_ = true;
    }
  }
}

void Sim::end_window(MState& s) {
  if (policy_ != MallePolicy::advisor || s.nodes.empty() || s.seg_productive <= 0) return;
  if (!s.seg_sampled || s.seg_productive > 2 * o_.probe_s) sample(s);  // the whole window's measurement
  if (++s.windows_sampled <= 3) s.window_sizes.push_back(static_cast<int>(s.nodes.size()));
  if (s.windows_sampled == 3) s.error_after_3 = curve_error(s.advisor.curve(), s.job->truth);
}

void Sim::stop(size_t j, bool lose_work) {
  MState& s = m_[j];
  if (s.nodes.empty()) return;
  if (lose_work) {
    const double lost = s.done - s.ckpt_done;
    const int n = static_cast<int>(s.nodes.size());
    r_.lost_iterations += lost;
    r_.iterations -= lost;
    r_.useful_node_s -= lost / s.job->truth.at(n) * s.job->truth.speedup(n);
    s.done = s.ckpt_done;
  }
  end_window(s);
  for (int node : s.nodes) holder_[node] = -1;
  s.nodes.clear();
  dirty_ = true;
}

void Sim::host_step(double t) {
  while (!ends_.empty() && ends_.top().first <= t) {
    host_.finish(ends_.top().second);
    ends_.pop();
    dirty_ = true;
  }
  while (next_p_ < primary_.size() && primary_[next_p_].arrival_s <= t) {
    host_.submit(primary_[next_p_++]);
    dirty_ = true;
  }
  while (next_m_ < m_.size() && m_[next_m_].job->arrival_s <= t) {
    m_[next_m_++].arrived = true;
    dirty_ = true;
  }
  std::vector<char> avoid(holder_.size());
  for (size_t n = 0; n < holder_.size(); ++n) avoid[n] = holder_[n] >= 0;
  for (const HostStart& st : host_.schedule(t, avoid)) {
    const size_t i = index_.at(st.job);
    double delay = 0;
    for (int n : st.nodes) {
      if (holder_[n] < 0) continue;  // a job that left in time leaves no holder
      ++r_.unannounced_claims;
      if (o_.reclaim == Reclaim::wait) delay = o_.grace_s;
      stop(static_cast<size_t>(holder_[n]), o_.reclaim == Reclaim::preempt);
    }
    starts_[i] = t + delay;
    ends_.emplace(t + delay + primary_[i].runtime_s, st.job);
    dirty_ = true;
  }
  claims_ = host_.predicted_claims(t);
  if (claims_ != last_claims_) dirty_ = true;
  last_claims_ = claims_;
  for (const MState& s : m_)  // a vacate time reached
    for (int n : s.nodes)
      if (!usable(n, t)) dirty_ = true;
}

void Sim::decide(double t) {
  // Usable idle nodes, in classes of equal predicted claim.
  std::map<double, int> class_of_claim;
  std::vector<AllocClass> classes;
  std::vector<int> node_class(holder_.size(), -1);
  for (size_t n = 0; n < holder_.size(); ++n) {
    if (!usable(static_cast<int>(n), t)) continue;
    auto [it, fresh] = class_of_claim.emplace(claims_[n], static_cast<int>(classes.size()));
    if (fresh) classes.push_back({std::min(claims_[n] - o_.grace_s - t, o_.horizon_s), 0});
    ++classes[it->second].nodes;
    node_class[n] = it->second;
  }
  std::vector<size_t> active;
  std::vector<AllocJob> jobs;
  for (size_t j = 0; j < m_.size(); ++j) {
    MState& s = m_[j];
    if (!s.arrived || s.finished) continue;
    AllocJob a;
    a.rescale_s = s.job->rescale_s;
    if (policy_ == MallePolicy::freetrain) a.curve = s.job->declared;
    else if (policy_ == MallePolicy::malletrain) a.curve = s.job->truth;
    else a.curve = s.advisor.curve();
    a.remaining = policy_ == MallePolicy::advisor && s.advisor.samples() == 0 ? 0 : s.job->iterations - s.done;
    int cls = -2, kept = 0;
    for (int n : s.nodes) {
      if (node_class[n] < 0) { a.moved = true; continue; }
      ++kept;
      cls = cls == -2 || cls == node_class[n] ? node_class[n] : -1;
    }
    if (cls == -1) a.moved = true;
    a.current_class = cls >= 0 ? cls : -1;
    a.current_nodes = cls >= 0 ? kept : 0;
    if (policy_ == MallePolicy::advisor) a.explore = explore_sizes(s.advisor, a.rescale_s, classes);
    active.push_back(j);
    jobs.push_back(std::move(a));
  }
  AllocStats st;
  std::vector<AllocChoice> choice;
  if (policy_ == MallePolicy::freetrain) {
    const auto t0 = std::chrono::steady_clock::now();
    choice = allocate_greedy(classes, jobs);
    st.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  } else {
    choice = allocate_milp(classes, jobs, o_.milp_time_limit_s, &st);
    if (!st.optimal) ++r_.milp_not_optimal;
  }
  if (!classes.empty() && !jobs.empty()) {  // an allocation was actually solved
    r_.decision_ms.push_back(st.solve_ms);
    ++r_.decisions;
  }
  // Release first, then take: jobs that stay keep their nodes.
  std::vector<bool> stays(active.size());
  for (size_t k = 0; k < active.size(); ++k) {
    const AllocJob& a = jobs[k];
    stays[k] = !a.moved && a.current_nodes > 0 && choice[k] == AllocChoice{a.current_class, a.current_nodes};
    if (!stays[k]) stop(active[k], false);  // a planned move: checkpointed, nothing lost
  }
  for (size_t k = 0; k < active.size(); ++k) {
    if (stays[k] || choice[k].nodes <= 0) continue;
    MState& s = m_[active[k]];
    for (size_t n = 0; n < holder_.size() && static_cast<int>(s.nodes.size()) < choice[k].nodes; ++n)
      if (holder_[n] < 0 && node_class[n] == choice[k].cls) {
        holder_[n] = static_cast<int>(active[k]);
        s.nodes.push_back(static_cast<int>(n));
      }
    s.busy_until = t + s.job->rescale_s;
    if (s.first_start < 0) s.first_start = t;
    ++s.windows;
    s.ckpt_t = t;
    s.ckpt_done = s.done;
    s.seg_productive = 0;
    s.seg_sampled = false;
    ++r_.rescales;
  }
}

void Sim::record_occupancy(double t) {
  OccupancyPoint p{t, 0, 0, 0};
  for (size_t n = 0; n < holder_.size(); ++n) {
    if (host_.owner()[n] != -1) ++p.primary;
    else if (holder_[n] >= 0) ++p.malleable;
    else ++p.idle;
  }
  if (!r_.occupancy.empty() && r_.occupancy.back().primary == p.primary &&
      r_.occupancy.back().malleable == p.malleable)
    return;
  r_.occupancy.push_back(p);
}

MalleResult Sim::run() {
  const std::vector<double> alone = host_only_starts(primary_, r_.nodes);
  double end = o_.end_s;
  if (end < 0) {  // the arrival span: the drain after it is no hole a busy machine has
    end = 0;
    for (const HostJob& j : primary_) end = std::max(end, j.arrival_s);
    if (end <= 0)
      for (size_t i = 0; i < primary_.size(); ++i) end = std::max(end, alone[i] + primary_[i].runtime_s);
  }
  r_.span_s = end;
  double t = 0;
  long events = 0;
  claims_.assign(holder_.size(), kNoClaim);
  while (t < end) {
    host_step(t);
    if (dirty_) {
      decide(t);
      dirty_ = false;
    }
    record_occupancy(t);
    double next = std::min(next_event(t), end);
    if (next <= t) next = std::nextafter(t, kNoClaim);  // never stand still
    advance(t, next);
    t = next;
    ++events;
    if (o_.progress) o_.progress(t, r_.malleable_completed, r_.malleable_jobs);
    if (events > 100'000'000) throw std::runtime_error("host-mode simulation: more than 1e8 events");
  }
  for (MState& s : m_) end_window(s);  // the windows still open at the end
  double sum = 0;
  long counted = 0;
  for (size_t i = 0; i < primary_.size(); ++i) {
    if (starts_[i] < 0 || alone[i] < 0) continue;
    const double d = std::max(0.0, starts_[i] - alone[i]);
    r_.primary_delay_max_s = std::max(r_.primary_delay_max_s, d);
    sum += d;
    ++counted;
  }
  r_.primary_delay_mean_s = counted ? sum / counted : 0;
  for (const MState& s : m_) {
    JobResult j;
    j.job_id = s.job->id;
    j.job_type = s.job->name;
    j.gpus = s.job->truth.max_nodes();
    j.arrival_s = s.job->arrival_s;
    j.first_start_s = s.first_start;
    j.completion_s = s.completion;
    j.gpu_seconds = s.node_s;
    j.iterations_done = s.done;
    j.restarts = std::max(0, s.windows - 1);
    r_.jobs.push_back(std::move(j));
  }
  if (policy_ == MallePolicy::advisor)
    for (const MState& s : m_) {
      if (s.advisor.samples() == 0) continue;
      r_.curves.push_back({s.job->id, s.job->name, s.advisor.t1(), s.advisor.sigma(), s.advisor.samples(),
                           s.error_after_3, curve_error(s.advisor.curve(), s.job->truth), s.window_sizes});
    }
  return r_;
}

}  // namespace

MalleResult simulate_malleable(const std::vector<HostJob>& primary, int nodes,
                               const std::vector<MalleableJob>& malleable, MallePolicy policy,
                               const MalleOptions& options) {
  Sim sim(primary, nodes, malleable, policy, options);
  return sim.run();
}

}  // namespace cellsched
