// The inputs every replaying verb (simulate, schedule) shares: options,
// loading and checking them before anything runs.
#pragma once

#include <cstdint>
#include <future>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>

#include "cli/common.h"
#include "core/cluster.h"
#include "core/job.h"
#include "core/throughput.h"
#include "db/cell_store.h"
#include "scheduler/engine.h"
#include "scheduler/oracle.h"

namespace cellsched::cli {

struct ReplayArgs {
  std::string trace_path, format, cluster_spec, throughputs, ref_gpu;
  uint64_t seed = 0;
  long limit = -1;
  double round_s = 360, restart_s = 30, horizon_s = -1, fork_efficiency = kDefaultForkEfficiency, consolidation_s = 0;
  std::string fork_scaling = "noise";
  PolicySettings policy;  // hadar's terms (add_hadar_options)
  std::string oracle = "table";  // "table" (Gavel's table), "cells" (tuned cells) or "measured"
  std::string cells_db;          // profiles and cell estimates (cells)
  std::string model_mix;         // Philly import onto zoo models (cells)
  std::string model_map;         // Tiresias/Pollux names -> job types
  std::string gpu_map;           // Alibaba 2023 GPU models -> catalogue types
  std::string cells_table;       // measured: the measured-cell CSV
  double locality_penalty = 0.8; // measured: spread cell from a one-host one
  std::string cells_precision;   // measured: which precision's cells (empty: first per model)
  std::string precision;         // cells: training precision (empty: each model's, else the type's default)
  bool replay_failures = false;  // replay the trace's failed attempts (Philly's raw job log)
  bool drop_unrunnable = false;  // leave out the jobs no GPU type of the cluster can run
};

// --trace --format --cluster --throughputs --seed --reference-gpu --limit
// --round --restart --fork-efficiency --consolidation --horizon --oracle
// --cells-db --model-mix
void add_replay_options(po::options_description& opt, ReplayArgs& a);

struct ReplayInputs {
  std::unique_ptr<db::CellStore> cells;  // open while the cell oracle is in use
  Cluster cluster;
  ThroughputTable table;
  Trace trace;
  std::unique_ptr<ThroughputOracle> oracle;
  SimOptions options;
  long dropped = 0;  // jobs left out by --drop-unrunnable
};

inline const char* const kDropUnrunnableHelp =
    "leave out the jobs no GPU type of the cluster can run at their size (no throughput, or more GPUs "
    "than the cluster has of any type) and report how many; without it such a job is bad input (exit 2)";

// Jobs of `trace` that no GPU type of `cluster` can run at their size with
// `oracle` (they would never finish): with `drop` they are removed (the
// others keep their ids) and their count returned; else the first is bad
// input at its trace line. All of them unrunnable is bad input either way.
long drop_unrunnable(Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle, bool drop);

// Reads and checks everything; throws InputError naming the file and line.
// `rigid`: the trace's jobs run at their size (simulate, schedule), so one
// that no GPU type can run is bad input (or dropped); host mode says false.
ReplayInputs load_replay_inputs(const ReplayArgs& a, bool rigid = true);

// Jobs wider than every node of the cluster can run only spread over nodes,
// at the throughput source's unconsolidated rate (Gavel's LM over two 4-GPU
// nodes: a ninth of its one-node rate), while a Philly import turned their
// durations into iterations at the one-node rate: a note on `err` says how
// many there are.
// Notes on stderr: what reading the cluster left out, and jobs wider than
// any node.
void note_wide_jobs(const ReplayInputs& in, std::ostream& err);

// The replay flags that change a run's results, into its stored parameters
// (two Philly runs at different --reference-gpu were stored alike, their mean
// JCTs 1.8x apart): reference_gpu, oracle, and limit, the maps, the model mix
// and the precisions where given.
void record_replay_args(const ReplayArgs& a, std::map<std::string, std::string>& params);

// The round's numbers (--round, --restart, --consolidation): finite and in
// range, or InputError naming the flag and its limits.
void check_round_numbers(double round_s, double restart_s, double consolidation_s);

// The LP lower bounds valid for a set of policies (forking and elastic
// policies are held to the relaxed one), each solved on its own thread while
// the simulations run: the oracle is asked on the constructing thread, only
// the LPs run elsewhere. get() waits, and rethrows a solver error.
class Bounds {
 public:
  Bounds(const std::vector<std::unique_ptr<Policy>>& policies, const ReplayInputs& in);
  double get(const Policy& policy);

 private:
  std::future<double> pending_[2];
  double value_[2] = {-1, -1};
};

}  // namespace cellsched::cli
