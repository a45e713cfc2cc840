// Measured cells as a throughput source: a CSV of iteration times that
// operators measured themselves (docs/formats.md, "Measured cells").
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "scheduler/oracle.h"

namespace cellsched {

// One row of `model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s`.
struct MeasuredCell {
  std::string model;      // free string, matched against Job::model ("bert__760M")
  int batch = 0;          // global batch of one iteration
  std::string precision;  // free string ("fp32", "amp")
  std::string gpu_type;   // catalogue name
  int hosts = 1, gpus_per_host = 1;
  double iter_time_s = 0;  // seconds per iteration
  long line = 0;           // where it was read
};

// Reads the table; throws InputError with `file:line:` on a bad row, an
// unknown GPU type or a repeated cell.
std::vector<MeasuredCell> load_measured_cells(const std::string& path);

// Iterations/s of a job = 1 / iter_time of its cell (model, batch, GPU type,
// total GPUs, locality: one host or several). The job's batch picks the
// cells: its own if measured for the model on that type, else the nearest
// measured batch there with samples/s held (x measured batch / job batch); a
// job without a batch takes the smallest. Of several precisions, `precision` if given, else the
// first in file order for the model. Missing cells:
//  1. same total GPUs at the other locality: spread wanted, only one host
//     measured -> x `locality_penalty`; one host wanted, only spread
//     measured -> the spread figure;
//  2. else the largest measured total below, scaled linearly (and x penalty
//     when spread is wanted and the basis is one host);
//  3. else 0: the job cannot run on that type at that size.
class MeasuredCellOracle final : public ThroughputOracle {
 public:
  MeasuredCellOracle(std::vector<MeasuredCell> cells, std::string source,
                     double locality_penalty = 0.8, std::string precision = "");
  double throughput(const Job& job, const std::string& gpu_type, int workers,
                    bool consolidated) const override;
  std::string source() const override { return source_; }
  // "measured" where a cell (or a fallback from one) gives the figure.
  std::string plan(const Job& job, const std::string& gpu_type, int workers) const override;

 private:
  // (total GPUs, spread over hosts) -> seconds per iteration of the cell
  // with the fewest hosts.
  using Grid = std::map<std::pair<int, bool>, double>;
  struct ModelCells {
    std::map<std::string, std::map<int, Grid>, std::less<>> by_type;  // gpu -> batch -> grid
  };
  std::map<std::string, ModelCells, std::less<>> models_;
  std::string source_;
  double penalty_;
};

}  // namespace cellsched
