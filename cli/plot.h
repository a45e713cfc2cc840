// Plots with gnuplot (Debian `gnuplot-nox`, pngcairo terminal). gnuplot runs
// as a child process from argv (`gnuplot <script>`), never through a shell;
// each plot leaves its data (.dat) and script (.gp) next to the PNG, so it can
// be restyled and rerun by hand.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/run.h"
#include "core/schedule.h"

namespace cellsched::cli {

// The gnuplot executable: $CELLSCHED_GNUPLOT when set, else `gnuplot` on
// PATH. Throws std::runtime_error (telling to install gnuplot-nox) when none.
std::string find_gnuplot();

// Runs `gnuplot script_path`; throws std::runtime_error with gnuplot's
// messages when it fails.
void run_gnuplot(const std::string& script_path);

// In `dir` (created if missing), one series per run:
//  - jct_cdf.png: CDF of the finished jobs' JCT, hours on a log x axis;
//  - utilization.png: busy GPUs / cluster GPUs per round over time (hours),
//    averaged over consecutive rounds down to at most 2000 points a series.
// Data: jct_cdf.dat, utilization.dat (one gnuplot data block per run, in
// order), script: plots.gp.
void write_plots(const std::vector<RunRecord>& runs, const std::string& dir);

// One point of a load sweep: a policy's average JCT at an input load.
struct LoadPoint {
  std::string policy;
  double jobs_per_hour = 0;
  double avg_jct_s = -1;  // < 0: no finished job (left out of the plot)
};

// jct_vs_load.png in `dir`: average JCT (hours) against load (jobs/hour), one
// line per policy (in order of first appearance), points sorted by load.
// Data: jct_vs_load.dat, script: jct_vs_load.gp.
void plot_jct_vs_load(const std::vector<LoadPoint>& points, const std::string& dir);

// gantt.png in `dir`: one row per GPU (grouped by node, labelled with the
// node name), a bar per schedule entry over time (hours). Data: gantt.dat,
// script: gantt.gp. Boxes coloured by job type (`job_types`: job id -> type;
// jobs missing from it are "other"; a type's colour is its rank among all the
// types of `job_types`, so the same in every policy's chart), with a legend.
void plot_gantt(const Schedule& schedule, const Cluster& cluster, const std::string& dir,
                const std::map<int64_t, std::string>& job_types);

}  // namespace cellsched::cli
