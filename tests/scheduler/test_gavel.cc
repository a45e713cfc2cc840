#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/engine.h"
#include "scheduler/gavel.h"
#include "scheduler/lp.h"
#include "scheduler/oracle.h"
#include "scheduler/policy.h"
#include "tests/scheduler/fake_oracle.h"

namespace cellsched {
namespace {

using testing::make_job;

// Per-job-type, per-GPU-type per-worker rates (the shared FakeOracle has one
// rate per GPU type for every job).
class JobTypeOracle : public ThroughputOracle {
 public:
  std::map<std::string, std::map<std::string, double>> rate;  // job type -> gpu type -> it/s
  double throughput(const Job& job, const std::string& type, int workers, bool) const override {
    auto j = rate.find(job.job_type);
    if (j == rate.end()) return 0;
    auto t = j->second.find(type);
    return t == j->second.end() ? 0 : workers * t->second;
  }
  std::string source() const override { return "job-type fake"; }
};

// ---- LP wrapper ----------------------------------------------------------

TEST(Lp, SolvesASmallMaximization) {
  // max x + y s.t. x + 2y <= 4, 3x + y <= 6  ->  x = 1.6, y = 1.2, 2.8.
  LinearProgram lp;
  lp.maximize = true;
  const int x = lp.add_var(1), y = lp.add_var(1);
  lp.add_row(-kLpInf, 4, {x, y}, {1, 2});
  lp.add_row(-kLpInf, 6, {x, y}, {3, 1});
  const LpSolution s = solve_lp(lp);
  EXPECT_NEAR(s.x[x], 1.6, 1e-9);
  EXPECT_NEAR(s.x[y], 1.2, 1e-9);
  EXPECT_NEAR(s.objective, 2.8, 1e-9);
}

TEST(Lp, KeepsTrailingEmptyColumnsAndSumsDuplicates) {
  // min x - z with x + x >= 2 (duplicate entries sum), z in [0, 3] in no row.
  LinearProgram lp;
  const int x = lp.add_var(1);
  lp.add_row(2, kLpInf, {x, x}, {1, 1});
  const int z = lp.add_var(-1, 0, 3);
  const LpSolution s = solve_lp(lp);
  ASSERT_EQ(s.x.size(), 2u);
  EXPECT_NEAR(s.x[x], 1, 1e-9);
  EXPECT_NEAR(s.x[z], 3, 1e-9);
  EXPECT_NEAR(s.objective, -2, 1e-9);
}

TEST(Lp, TakesEntriesInAnyOrder) {
  // max x + y with x + 2y <= 4 and 3x + y <= 6, entries given column by
  // column, the second row's first, and one split in two (summed): x = 1.6,
  // y = 1.2, objective 2.8.
  LinearProgram lp;
  lp.maximize = true;
  const int x = lp.add_var(1), y = lp.add_var(1);
  lp.row_lower = {-kLpInf, -kLpInf};
  lp.row_upper = {4, 6};
  lp.add_entry(1, x, 3);
  lp.add_entry(0, x, 1);
  lp.add_entry(1, y, 0.5);
  lp.add_entry(0, y, 2);
  lp.add_entry(1, y, 0.5);
  const LpSolution s = solve_lp(lp);
  EXPECT_NEAR(s.x[x], 1.6, 1e-9);
  EXPECT_NEAR(s.x[y], 1.2, 1e-9);
  EXPECT_NEAR(s.objective, 2.8, 1e-9);
}

TEST(Lp, ReportsInfeasibleAsAnException) {
  LinearProgram lp;
  const int x = lp.add_var(1), y = lp.add_var(1);
  lp.add_row(3, kLpInf, {x, y}, {1, 1});   // x + y >= 3
  lp.add_row(-kLpInf, 1, {x, y}, {1, 1});  // x + y <= 1
  try {
    solve_lp(lp);
    FAIL() << "no exception";
  } catch (const LpError& e) {
    EXPECT_EQ(e.status(), "infeasible");
  }
  LinearProgram bad;
  bad.add_var(0, 2, 1);  // lower > upper
  EXPECT_THROW(solve_lp(bad), LpError);
}

TEST(Lp, ReportsUnboundedAsAnException) {
  LinearProgram lp;
  lp.maximize = true;
  const int x = lp.add_var(1), y = lp.add_var(0);
  lp.add_row(-kLpInf, 1, {x, y}, {1, -1});  // x - y <= 1, both unbounded above
  try {
    solve_lp(lp);
    FAIL() << "no exception";
  } catch (const LpError& e) {
    EXPECT_EQ(e.status(), "unbounded");
  }
}

// ---- max-min fairness LP -------------------------------------------------

// Hand-solved: types (v100, k80) with C = (1, 2); job A does (3, 1) it/s,
// job B (2, 1), both on 1 GPU, weight 1. X_eq = (C_v X_v + C_k X_k) / n:
// A 2.5, B 2. K80 capacity never binds, so each job fills its time with K80:
// A = (1 + 2 a_v) / 2.5, B = (1 + b_v) / 2 with a_v + b_v = 1, equal at
// a_v = 6/13: x_A = (6/13, 7/13), x_B = (7/13, 6/13), min = 10/13. Unique:
// A >= 10/13 forces a_v >= 6/13 and B >= 10/13 forces b_v >= 7/13.
GavelProblem hand_problem() {
  GavelProblem p;
  p.throughput = {{3, 1}, {2, 1}};
  p.gpus = {1, 1};
  p.weight = {1, 1};
  p.remaining = {1, 1};
  p.capacity = {1, 2};
  return p;
}

// The solvers live in cellsched-coin.so, loaded on the first solve with
// OPENBLAS_NUM_THREADS=1 for OpenBLAS's sake; the variable is not left set for
// the processes this one starts (the online runner's training jobs).
TEST(Solver, LoadsTheModuleAndLeavesNoBlasVariable) {
  if (std::getenv("OPENBLAS_NUM_THREADS")) GTEST_SKIP() << "OPENBLAS_NUM_THREADS is set by the caller";
  LinearProgram lp;
  lp.maximize = true;
  const int x = lp.add_var(1.0, 0.0, 2.5);
  lp.add_row(-kLpInf, 2.0, {x}, {1.0});
  EXPECT_NEAR(solve_lp(lp).x[0], 2.0, 1e-9);
  EXPECT_EQ(std::getenv("OPENBLAS_NUM_THREADS"), nullptr);
}

// A gang wider than any node of a type runs spread there, and gavel values
// it so: 8 GPUs over two 4-GPU V100 nodes at 10/GPU spread (x0.5) is 40 it/s,
// an 8-GPU P100 node 48; valued at the V100s' one-node 80, it went there.
// And a share the LP leaves at 1e-12 is none: the job spent every other
// round on the V100s for it (1060 s, where 1000 on the P100s alone).
TEST(Gavel, ValuesAGangWiderThanEveryNodeOfATypeAtItsSpreadRate) {
  Cluster c;
  c.name = "mixed";
  c.nodes = {{"v1", "localhost", "v100", 4}, {"v2", "localhost", "v100", 4}, {"p", "localhost", "p100", 8}};
  testing::FakeOracle o;
  o.rate = {{"v100", 10}, {"p100", 6}};
  Trace t;
  t.name = "one";
  t.jobs = {testing::make_job(0, 0, 8, 48000)};
  SimOptions so;
  so.restart_s = 0;
  auto gavel = make_policy("gavel");
  const RunRecord r = simulate(t, c, o, *gavel, so);
  ASSERT_EQ(r.metrics.completed, 1);
  EXPECT_DOUBLE_EQ(r.jobs[0].completion_s, 1000);  // 48000 it at 48 it/s on the P100 node (1200 s spread on V100s)
}

TEST(GavelLp, MatchesTheHandSolvedTwoByTwoInstance) {
  const GavelAllocation a = gavel_max_min_fairness(hand_problem());
  EXPECT_NEAR(a.objective, 10.0 / 13, 1e-7);
  EXPECT_NEAR(a.x[0][0], 6.0 / 13, 1e-7);
  EXPECT_NEAR(a.x[0][1], 7.0 / 13, 1e-7);
  EXPECT_NEAR(a.x[1][0], 7.0 / 13, 1e-7);
  EXPECT_NEAR(a.x[1][1], 6.0 / 13, 1e-7);
}

TEST(GavelLp, WeightsBuyProportionalTime) {
  // One GPU, two equal jobs, weights 2 and 1: x_A / 2 = x_B, x_A + x_B = 1.
  GavelProblem p;
  p.throughput = {{1}, {1}};
  p.gpus = {1, 1};
  p.weight = {2, 1};
  p.capacity = {1};
  const GavelAllocation a = gavel_max_min_fairness(p);
  EXPECT_NEAR(a.x[0][0], 2.0 / 3, 1e-7);
  EXPECT_NEAR(a.x[1][0], 1.0 / 3, 1e-7);
  EXPECT_NEAR(a.objective, 2.0 / 3, 1e-7);
}

TEST(GavelLp, GangSizeCountsAsGpuShare) {
  // Two GPUs; A needs 2 (2 it/s as a gang), B 1 (1 it/s). X_eq: A = (2/2) 2 /
  // 2 = 1, B = (2/2) 1 / 1 = 1. max min(2 x_A, x_B) s.t. 2 x_A + x_B <= 2:
  // x_B = 1, x_A = 1/2 -- each job holds one GPU on average, as in Gavel.
  GavelProblem p;
  p.throughput = {{2}, {1}};
  p.gpus = {2, 1};
  p.weight = {1, 1};
  p.capacity = {2};
  const GavelAllocation a = gavel_max_min_fairness(p);
  EXPECT_NEAR(a.x[0][0], 0.5, 1e-7);
  EXPECT_NEAR(a.x[1][0], 1.0, 1e-7);
  EXPECT_NEAR(a.objective, 1.0, 1e-7);
}

TEST(GavelLp, LeavesOutJobsThatCannotRun) {
  GavelProblem p;
  p.throughput = {{0, 0}, {2, 1}, {4, 4}};
  p.gpus = {1, 1, 3};  // job 2's gang fits no single type
  p.weight = {1, 1, 1};
  p.capacity = {1, 2};
  const GavelAllocation a = gavel_max_min_fairness(p);
  EXPECT_EQ(a.x[0], (std::vector<double>{0, 0}));
  EXPECT_EQ(a.x[2], (std::vector<double>{0, 0}));
  EXPECT_NEAR(a.x[1][0] + a.x[1][1], 1.0, 1e-7);
  // Empty problems are fine too.
  EXPECT_TRUE(gavel_max_min_fairness(GavelProblem{}).x.empty());
}

// The max-min LP warm-started from the previous solve's basis (kept by class
// of interchangeable jobs), with jobs arriving and leaving between solves:
// the same optimum as a cold solve every time, and feasible shares.
TEST(GavelLp, WarmStartReachesTheColdOptimum) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> rate(0.1, 5.0);
  std::vector<std::vector<double>> kinds(6, std::vector<double>(3));
  for (auto& r : kinds)
    for (double& x : r) x = rng() % 6 == 0 ? 0.0 : rate(rng);
  GavelBasis basis;
  std::vector<int> live;  // kind of each live job
  int warm_used = 0;
  for (int step = 0; step < 80; ++step) {
    for (int a = 0; a < 2; ++a) live.push_back(static_cast<int>(rng() % kinds.size()));
    if (rng() % 2 && live.size() > 3) live.erase(live.begin() + static_cast<long>(rng() % live.size()));
    GavelProblem p;
    p.capacity = {8, 6, 4};
    for (size_t j = 0; j < live.size(); ++j) {
      p.throughput.push_back(kinds[static_cast<size_t>(live[j])]);
      p.gpus.push_back(1 << (live[j] % 3));
      p.weight.push_back(1.0 + live[j] % 2);
      p.ids.push_back(static_cast<int64_t>(j));
    }
    const bool had_basis = !basis.classes.empty();
    const GavelAllocation warm = gavel_max_min_fairness(p, &basis);
    const GavelAllocation cold = gavel_max_min_fairness(p);
    warm_used += had_basis;
    EXPECT_NEAR(warm.objective, cold.objective, 1e-6 * std::max(1.0, std::abs(cold.objective))) << "step " << step;
    std::vector<double> used(3, 0);
    for (size_t j = 0; j < live.size(); ++j)
      for (size_t k = 0; k < 3; ++k) used[k] += p.gpus[j] * warm.x[j][k];
    for (size_t k = 0; k < 3; ++k) EXPECT_LE(used[k], p.capacity[k] + 1e-6) << "step " << step;
  }
  EXPECT_GT(warm_used, 70);
}

// Where the cluster has room to spare, many shares reach the optimal t (only
// the slowest job's are forced). The tie-break (fewest GPU-seconds) makes them
// unique, so a warm start from the last basis gives the cold solve's shares,
// not just its t, and each job at t runs where it is relatively fastest.
TEST(GavelLp, TieBreakMakesTheSharesIndependentOfTheStart) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> rate(0.1, 5.0);
  std::vector<std::vector<double>> kinds(5, std::vector<double>(3));
  for (auto& r : kinds)
    for (double& x : r) x = rate(rng);
  GavelBasis basis;
  std::vector<int> live;
  int differ = 0;
  for (int step = 0; step < 60; ++step) {
    live.push_back(static_cast<int>(rng() % kinds.size()));
    if (rng() % 3 == 0 && live.size() > 2) live.erase(live.begin() + static_cast<long>(rng() % live.size()));
    GavelProblem p;
    p.capacity = {40, 40, 40};  // room for every job on every type
    for (size_t j = 0; j < live.size(); ++j) {
      p.throughput.push_back(kinds[static_cast<size_t>(live[j])]);
      p.gpus.push_back(1);
      p.weight.push_back(1.0);
      p.ids.push_back(static_cast<int64_t>(j));
    }
    const GavelAllocation warm = gavel_max_min_fairness(p, &basis), cold = gavel_max_min_fairness(p);
    ASSERT_NEAR(warm.objective, cold.objective, 1e-6 * std::max(1.0, cold.objective));
    for (size_t j = 0; j < live.size(); ++j)
      for (size_t k = 0; k < 3; ++k) differ += std::abs(warm.x[j][k] - cold.x[j][k]) > 1e-6;
    // Fewest GPU-seconds: a job reaching t on its best type uses no other.
    for (size_t j = 0; j < live.size(); ++j) {
      const auto& r = p.throughput[j];
      const size_t best = static_cast<size_t>(std::max_element(r.begin(), r.end()) - r.begin());
      for (size_t k = 0; k < 3; ++k) {
        if (k != best) {
          EXPECT_NEAR(cold.x[j][k], 0.0, 1e-7) << "step " << step << " job " << j;
        }
      }
    }
  }
  EXPECT_EQ(differ, 0);
}

// ---- min total duration LP -----------------------------------------------

// Interchangeable jobs share one set of LP variables: on random instances with
// many duplicates the pooled LP reaches the same optimum as the LP with one
// set per job (duplicates broken apart by a 1e-9 jitter), and its shares are
// feasible for every job.
TEST(GavelLp, PoolingInterchangeableJobsKeepsTheOptimum) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> rate(0.1, 5.0);
  for (int instance = 0; instance < 30; ++instance) {
    const int kinds = 2 + instance % 4, K = 3;
    std::vector<std::vector<double>> kind_rates(kinds, std::vector<double>(K));
    for (auto& r : kind_rates)
      for (double& x : r) x = rng() % 5 == 0 ? 0.0 : rate(rng);
    GavelProblem pooled;
    pooled.capacity = {4 + instance % 5, 6, 8};
    const int n = 5 + instance % 25;
    for (int j = 0; j < n; ++j) {
      const int kind = static_cast<int>(rng() % kinds);
      pooled.throughput.push_back(kind_rates[kind]);
      pooled.gpus.push_back(1 << (kind % 3));
      pooled.weight.push_back(1.0);
    }
    GavelProblem apart = pooled;
    for (int j = 0; j < n; ++j)
      for (double& x : apart.throughput[j]) x *= 1 + 1e-9 * j;
    const GavelAllocation a = gavel_max_min_fairness(pooled), b = gavel_max_min_fairness(apart);
    EXPECT_NEAR(a.objective, b.objective, 1e-6 * std::max(1.0, std::abs(b.objective))) << "instance " << instance;
    std::vector<double> used(K, 0);
    for (int j = 0; j < n; ++j) {
      double time = 0;
      for (int k = 0; k < K; ++k) {
        time += a.x[j][k];
        used[k] += pooled.gpus[j] * a.x[j][k];
      }
      EXPECT_LE(time, 1 + 1e-9);
    }
    for (int k = 0; k < K; ++k) EXPECT_LE(used[k], pooled.capacity[k] + 1e-6) << "instance " << instance;
  }
}

// Warm starts from the previous basis, jobs arriving and leaving between
// solves: the same optimum T as a cold solve every time.
TEST(GavelMakespanLp, WarmStartReachesTheColdOptimum) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> rate(0.1, 5.0), work(10, 1e4);
  GavelBasis basis;
  std::vector<int64_t> live;
  int64_t next_id = 0;
  std::map<int64_t, std::pair<std::vector<double>, int>> spec;  // id -> rates, gpus
  int warm_used = 0;
  for (int step = 0; step < 60; ++step) {
    // Two arrivals, sometimes a departure.
    for (int a = 0; a < 2; ++a) {
      std::vector<double> r(3);
      for (double& x : r) x = rng() % 6 == 0 ? 0.0 : rate(rng);
      spec[next_id] = {r, 1 << (rng() % 3)};
      live.push_back(next_id++);
    }
    if (rng() % 2 && live.size() > 3) live.erase(live.begin() + static_cast<long>(rng() % live.size()));
    GavelProblem p;
    p.capacity = {8, 6, 4};
    for (int64_t id : live) {
      p.throughput.push_back(spec[id].first);
      p.gpus.push_back(spec[id].second);
      p.remaining.push_back(work(rng));
      p.ids.push_back(id);
    }
    const bool had_basis = !basis.jobs.empty();
    const GavelAllocation warm = gavel_min_total_duration(p, &basis);
    const GavelAllocation cold = gavel_min_total_duration(p);
    warm_used += had_basis;
    EXPECT_NEAR(warm.objective, cold.objective, 1e-6 * std::max(1.0, cold.objective)) << "step " << step;
  }
  EXPECT_GT(warm_used, 50);
}

TEST(GavelMakespanLp, MatchesTheHandSolvedInstance) {
  // C = (1, 1); A: (3, 1) it/s, 300 it left; B: (2, 1), 200 left. With a_k =
  // alpha seconds of A on K80: A needs a_v = (300 - alpha)/3; B's best is
  // T + b_v with b_v <= T - a_v, so T >= 150 - alpha/6, and A's own time
  // gives T >= 100 + 2 alpha/3; the two meet at alpha = 60: T = 140, y_A =
  // (80, 60), y_B = (60, 80) -- every constraint tight.
  GavelProblem p;
  p.throughput = {{3, 1}, {2, 1}};
  p.gpus = {1, 1};
  p.remaining = {300, 200};
  p.capacity = {1, 1};
  const GavelAllocation a = gavel_min_total_duration(p);
  EXPECT_NEAR(a.objective, 140, 1e-6);
  EXPECT_NEAR(a.x[0][0], 4.0 / 7, 1e-7);
  EXPECT_NEAR(a.x[0][1], 3.0 / 7, 1e-7);
  EXPECT_NEAR(a.x[1][0], 3.0 / 7, 1e-7);
  EXPECT_NEAR(a.x[1][1], 4.0 / 7, 1e-7);
}

TEST(GavelMakespanLp, SharesSymmetricJobsEqually) {
  // Two (2, 1) it/s jobs with 300 it each on one V100 and one K80: the
  // cluster does 3 it/s, so T = 600 / 3 = 200 s, each half on each type.
  GavelProblem p;
  p.throughput = {{2, 1}, {2, 1}};
  p.gpus = {1, 1};
  p.remaining = {300, 300};
  p.capacity = {1, 1};
  const GavelAllocation a = gavel_min_total_duration(p);
  EXPECT_NEAR(a.objective, 200, 1e-6);
  for (const auto& row : a.x)
    for (double v : row) EXPECT_NEAR(v, 0.5, 1e-7);
}

// ---- round mechanism -----------------------------------------------------

struct Rounds {
  Cluster cluster;
  JobTypeOracle oracle;
  std::vector<Job> jobs;
  std::vector<JobState> states;
  std::unique_ptr<Policy> policy;
  // seconds per (job, gpu type)
  std::vector<std::map<std::string, double>> got;

  void start(const std::string& name) {
    policy = make_policy(name);
    states.assign(jobs.size(), JobState{});
    got.assign(jobs.size(), {});
    for (size_t i = 0; i < jobs.size(); ++i) {
      states[i].job = &jobs[i];
      states[i].remaining = jobs[i].total_iterations;
    }
  }
  void run(int rounds, double round_s = 360) {
    std::vector<JobState*> active;
    for (JobState& s : states) active.push_back(&s);
    for (int r = 0; r < rounds; ++r) {
      std::vector<Allocation> out(active.size());
      for (size_t i = 0; i < active.size(); ++i) out[i] = active[i]->current;
      RoundContext ctx{r * round_s, round_s, &cluster, &oracle, &active, 30, {}};
      policy->decide(ctx, out);
      std::vector<int> used(cluster.nodes.size(), 0);
      for (size_t i = 0; i < active.size(); ++i) {
        int w = 0;
        for (const Placement& p : out[i].workers) {
          used[p.node] += p.gpus;
          w += p.gpus;
          got[i][cluster.nodes[p.node].gpu_type] += round_s * p.gpus / jobs[i].gpus;
        }
        ASSERT_TRUE(w == 0 || w == jobs[i].gpus);
        active[i]->current = out[i];
      }
      for (size_t n = 0; n < used.size(); ++n) ASSERT_LE(used[n], cluster.nodes[n].gpus);
    }
  }
};

TEST(GavelRounds, ConvergeToTheLpShares) {
  Rounds r;
  r.cluster.nodes = {{"v", "localhost", "v100", 1}, {"k", "localhost", "k80", 2}};
  r.oracle.rate = {{"A", {{"v100", 3}, {"k80", 1}}}, {"B", {{"v100", 2}, {"k80", 1}}}};
  r.jobs = {make_job(0, 0, 1, 1e12, "A"), make_job(1, 0, 1, 1e12, "B")};
  r.start("gavel");
  const int rounds = 1300;
  r.run(rounds);
  const double total = rounds * 360.0;
  // The hand-solved shares of GavelLp.MatchesTheHandSolvedTwoByTwoInstance.
  EXPECT_NEAR(r.got[0]["v100"] / total, 6.0 / 13, 0.005);
  EXPECT_NEAR(r.got[0]["k80"] / total, 7.0 / 13, 0.005);
  EXPECT_NEAR(r.got[1]["v100"] / total, 7.0 / 13, 0.005);
  EXPECT_NEAR(r.got[1]["k80"] / total, 6.0 / 13, 0.005);
}

TEST(GavelRounds, TimeShareOneGpuAmongThreeJobs) {
  Rounds r;
  r.cluster.nodes = {{"v", "localhost", "v100", 1}};
  r.oracle.rate = {{"A", {{"v100", 1}}}};
  r.jobs = {make_job(0, 0, 1, 1e12, "A"), make_job(1, 0, 1, 1e12, "A"),
            make_job(2, 0, 1, 1e12, "A")};
  r.start("gavel");
  r.run(300);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(r.got[j]["v100"], 100 * 360.0, 360.0 + 1e-9);
}

TEST(GavelRounds, MakespanSharesConvergeToo) {
  Rounds r;
  r.cluster.nodes = {{"v", "localhost", "v100", 1}, {"k", "localhost", "k80", 1}};
  r.oracle.rate = {{"A", {{"v100", 3}, {"k80", 1}}}, {"B", {{"v100", 2}, {"k80", 1}}}};
  // Remaining work in the 3:2 ratio of GavelMakespanLp's hand case, large
  // enough that no job finishes; x_A = (4/7, 3/7), x_B = (3/7, 4/7).
  r.jobs = {make_job(0, 0, 1, 3e9, "A"), make_job(1, 0, 1, 2e9, "B")};
  r.start("gavel-makespan");
  const int rounds = 700;
  r.run(rounds);
  const double total = rounds * 360.0;
  EXPECT_NEAR(r.got[0]["v100"] / total, 4.0 / 7, 0.005);
  EXPECT_NEAR(r.got[1]["v100"] / total, 3.0 / 7, 0.005);
  EXPECT_NEAR(r.got[0]["k80"] / total, 3.0 / 7, 0.005);
}

TEST(GavelRounds, KeepsAJobOnItsCurrentGpus) {
  // Tightest fit would pick node b, but the job already runs on node a.
  Rounds r;
  r.cluster.nodes = {{"a", "localhost", "v100", 4}, {"b", "localhost", "v100", 2}};
  r.oracle.rate = {{"A", {{"v100", 1}}}};
  r.jobs = {make_job(0, 0, 2, 1e12, "A")};
  r.start("gavel");
  r.states[0].current.workers = {{0, 2}};
  r.run(3);
  EXPECT_EQ(r.states[0].current.workers, (std::vector<Placement>{{0, 2}}));
  // A fresh job goes to the tightest node.
  r.start("gavel");
  r.run(1);
  EXPECT_EQ(r.states[0].current.workers, (std::vector<Placement>{{1, 2}}));
}

TEST(GavelPolicy, RunsATraceToTheEnd) {
  Cluster cluster;
  cluster.name = "hand";
  cluster.nodes = {{"a", "localhost", "v100", 2}, {"b", "localhost", "k80", 2}};
  testing::FakeOracle oracle;
  oracle.rate = {{"v100", 10}, {"k80", 5}};
  Trace trace;
  trace.name = "t";
  trace.jobs = {make_job(0, 0, 2, 7200), make_job(1, 0, 4, 3600), make_job(2, 100, 1, 1800),
                make_job(3, 5000, 1, 36000)};
  for (const char* name : {"gavel", "gavel-makespan"}) {
    auto p = make_policy(name);
    EXPECT_EQ(p->name(), name);
    const RunRecord r = simulate(trace, cluster, oracle, *p);
    // Job 1's gang of 4 fits no single GPU type: Gavel never runs it.
    EXPECT_EQ(r.metrics.completed, 3) << name;
    EXPECT_FALSE(r.jobs[1].finished()) << name;
  }
}

}  // namespace
}  // namespace cellsched
