// An offline schedule: which job (or forked copy) ran on which GPUs when.
// Written by `cellsched schedule`, readable by the online runner.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace cellsched {

struct ScheduleEntry {
  int64_t job_id = 0;
  int copy = 0;                  // 0 = the job's own gang, k >= 1 = its k-th forked copy
  std::string node;              // node name
  std::string gpu_type;
  std::vector<int> gpu_indices;  // on that node, 0-based
  double start_s = 0;            // first round on these GPUs
  double end_s = 0;              // when it left them (next change, or completion)
  std::string plan;              // the job's cell plan, where the oracle has one
  long line = 0;                 // where the entry starts in the file it was read from (0: not read)
};

struct Schedule {
  std::string policy, trace, cluster;
  double round_s = 0, restart_s = 0;
  std::vector<double> rounds;          // round start times
  std::vector<ScheduleEntry> entries;  // by start time, then job, copy, node
  std::string source;                  // the file it was read from ("" when made here)
};

// JSON (the format the runner reads back) and CSV (one row per entry,
// gpu_indices joined by ';').
std::string schedule_to_json(const Schedule& s);
Schedule schedule_from_json(const std::string& text, const std::string& file);
Schedule load_schedule(const std::string& path);  // InputError with file on bad input

// Checks a schedule against the node list it will run on: every node known,
// its GPU type as the entry says, GPU indices in range and not repeated, no
// two entries on one GPU at once, job ids >= 0, finite times. `file:line:`
// InputError naming the entry (and the other one, for an overlap).
struct Cluster;
void check_schedule(const Schedule& s, const Cluster& cluster);
void write_schedule_csv(const Schedule& s, std::ostream& out);

}  // namespace cellsched
