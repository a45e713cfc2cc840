// Real GPU measurements and the estimator's figures for them, side by side
// (`cellsched estimate --validate FILE`). The file is a CSV with the header
//   model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s
// and optionally more columns after these: `split` (e.g. calibration /
// validation) groups the summary, `optimizer` (adam, adam-fused, sgd,
// sgd-momentum; default adam) prices the step, `peak_memory_gib` (one GPU's measured peak, e.g.
// torch.cuda.max_memory_allocated; empty when not measured) is compared with
// the estimate's memory, `source` is kept as text, others are ignored.
// model: a zoo name or a model .yaml (relative paths from the CSV's folder);
// batch: the global batch, samples per iteration over all GPUs; precision:
// fp32, tf32, fp16, bf16 (or amp = fp16); iter_time_s: measured seconds per
// iteration. Plain C++; no LibTorch.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/gpu.h"

namespace cellsched::estimator {

struct Measurement {
  long line = 0;  // in the file
  std::string model;  // as written
  int batch = 0;
  Precision precision = Precision::FP32;
  std::string gpu_type;  // canonical
  int hosts = 1, gpus_per_host = 1;
  double iter_time_s = 0;
  std::string split;  // "" when the file has no split column
  std::string source;
  std::string optimizer = "adam";
  double peak_memory_gib = 0;  // 0: not measured
};

// Reads and checks the file; `file:line:` InputError on any bad row (unknown
// model, GPU type or precision, a count < 1, a time that is not a positive
// finite number below 1e6 s, a wrong header).
std::vector<Measurement> read_measurements(const std::string& path);

struct Comparison {
  Measurement m;
  double estimated_s = 0;
  std::string basis;
  bool feasible = true;  // the data-parallel plan fits in memory
  int micro_batches = 1; // gradient-accumulation steps the plan needed to fit
  double estimated_memory_gib = 0;  // one GPU's memory under that plan
  // Transferred (compare's `transfer_from`): the same model, batch, precision
  // and GPU count measured on that type, times the modeled ratio of the two
  // types; 0 when the file has no such row (or the row is on that type).
  double transferred_s = 0;
  double ratio() const { return estimated_s / m.iter_time_s; }
  double error() const;  // |estimated / measured - 1|
  double memory_ratio() const { return m.peak_memory_gib > 0 ? estimated_memory_gib / m.peak_memory_gib : 0; }
};

struct Summary {
  int rows = 0;
  double median_error = 0, worst_error = 0;
  int pairs = 0, ordered = 0;  // GPU-type pairs of equal model, batch, precision and GPUs
  // Over the rows with a measured peak memory: |estimated / measured - 1|.
  int memory_rows = 0;
  double memory_median_error = 0, memory_worst_error = 0;
};

// Each measurement priced as plain data parallelism over its GPUs with the
// row's optimizer, modeled (no profile of the GPU type is used): one
// micro-batch per iteration, or the fewest gradient-accumulation steps (a
// power of two) with which the plan fits in memory. With `transfer_from` (a
// GPU type), each row that has a twin measured on that type is also priced as
// a transfer: the twin's measured time x modeled(this type) / modeled(that
// type), i.e. the measured efficiency carried over through the analytic
// model, as the `transferred` basis does per layer.
std::vector<Comparison> compare(const std::vector<Measurement>& ms, const std::string& base_dir,
                                const std::string& transfer_from = "");

// Over the rows' transferred estimates (rows without one left out).
Summary summarize_transferred(const std::vector<Comparison>& rows);

// Over every row, and per split ("" = all).
std::map<std::string, Summary> summarize(const std::vector<Comparison>& rows);

}  // namespace cellsched::estimator
