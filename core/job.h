// Jobs and traces.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cellsched {

// What the first HadarE forked copy adds beside the job's own gang, as a
// share of its own iterations, when nobody says (core/fork.h: further copies
// add less). Measured with `cellsched validate fork` in the gradient-noise
// regime at one gang's best learning rate: 0.51 with one copy, and the
// noise model at 0.5 predicts the 4-gang figure within 6 % (docs/hadar.md,
// "Fork efficiency, measured"; 0.07 step-limited).
inline constexpr double kDefaultForkEfficiency = 0.5;
// The priority weights a trace or `submit` may give (checked where read).
inline constexpr double kMinWeight = 1e-6, kMaxWeight = 1e6;

struct Job {
  int64_t id = 0;                 // unique in its trace, dense from 0 in arrival order (a run
                                  // with --drop-unrunnable leaves out some ids)
  long line = 0;                  // line of the trace file the job was read from (0: none)
  double arrival_s = 0;           // seconds from the trace start
  std::string job_type;           // throughput-table key: "ResNet-50 (batch size 64)"
  std::string model;              // model name (zoo name or the job type's model part)
  int batch_size = 0;             // 0 = unknown
  double total_iterations = 0;    // iterations (steps) to train, > 0
  int gpus = 1;                   // requested GPUs (gang size / scale factor), > 0
  double weight = 1;              // priority weight, in [kMinWeight, kMaxWeight]
  double deadline_s = -1;         // absolute deadline in seconds, < 0 = none
  double duration_hint_s = -1;    // original duration where the trace gave one, < 0 = none
  std::vector<std::string> command;  // argv for online runs (may be empty)
  std::string checkpoint_dir;        // online runs
  std::string name;                  // the trace's own job id where it has one (UUID, pod name)
  std::vector<std::string> gpu_types;  // catalogue types the job may run on (empty = any)
  // Attempts that failed before the last one, as iterations each ran before
  // it failed (Philly's raw job log); replayed with SimOptions::replay_failures.
  std::vector<double> failed_attempts;
};

struct Trace {
  std::string name;       // usually the file name
  std::string source;     // path or "generated"
  std::string format;     // "gavel", "gavel-legacy", "philly", "csv", "generated"
  std::vector<Job> jobs;  // sorted by arrival (stable)
  // What an import read and left out ("skipped: CPU-only pod" -> 12), in
  // first-seen order; shown by `trace inspect`.
  std::vector<std::pair<std::string, long>> import_notes;
};

}  // namespace cellsched
