// DESIGN "Metrics": finish-time fairness, rho = JCT / JCT under an isolated
// 1/N share of the cluster (Themis; Gavel's isolated allocation).
#pragma once

#include <vector>

#include "core/cluster.h"
#include "core/job.h"
#include "core/run.h"

namespace cellsched {

class ThroughputOracle;

// rho of each job of `trace` (`results[i]` is `trace.jobs[i]`'s result; the
// two must be the same length): its JCT over its JCT alone on a 1/N share
// (Themis' finish-time fairness). -1 where the job did not finish or no
// share can run it.
//
// N is the number of jobs in the system (arrived, not finished) in this
// run, averaged over the job's own lifetime [arrival, completion], at least
// 1; as in Themis it comes from the run being judged, so a policy that keeps
// more jobs waiting is judged against smaller shares. The share is 1/N of
// every GPU type: on type t the job holds G_t / N GPUs, i.e. its gang of W
// GPUs may run there a fraction G_t / (N W) of the time. It spends the
// fractions best rate first, at most 1 in all (one allocation at a time), so
// a job alone in the cluster runs on its best type the whole time. Its rate
// on t is the oracle's for W GPUs (consolidated where one node of t holds W,
// spread where only several do, 0 where the type has fewer than W). Its
// isolated JCT is `startup_s` (the restart overhead: a job alone still
// starts once) plus total_iterations over that rate, with no queueing and no
// rounds. A policy that gives a job more GPUs than its W (hadare's copies,
// crius' scaling) can bring rho below 1 with nobody waiting.
//
// Gavel's IsolatedPolicy (isolated.py) differs: it spreads each job's time
// over the types in proportion to G_t and divides every job's row by the
// largest row total over all jobs, so its isolated share does not depend on
// N at all; the 1/N share here is Themis'.
std::vector<double> finish_time_fairness(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle,
                                         const std::vector<JobResult>& results, double startup_s = 0);

// Adds fairness_rho_mean, fairness_rho_median, fairness_rho_p95,
// fairness_rho_max and fairness_unfair_share (the share of jobs with rho > 1)
// to m.extra, over the jobs with a rho (>= 0); nothing when there is none.
void add_fairness_metrics(const std::vector<double>& rho, RunMetrics& m);

}  // namespace cellsched
