// Measured iteration times and the name maps, the readers the other harnesses
// leave out. The first byte picks one:
//   0: `estimate --validate` CSV (read_measurements), then the first rows
//      priced (compare), as the verb does;
//   1: `simulate --oracle measured --cells-table` CSV (load_measured_cells),
//      then the oracle asked for each cell's model on each type;
//   2: `--model-map` / `--gpu-map` strings (parse_name_map);
//   3: `--model-mix` strings (parse_model_mix).
// A reader may reject its input with InputError; anything else is a finding.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/trace_io.h"
#include "estimator/measurements.h"
#include "fuzz/fuzz_util.h"
#include "scheduler/measured_cells.h"

namespace {

void measurements(const std::string& path) {
  using namespace cellsched::estimator;
  std::vector<Measurement> ms = read_measurements(path);
  if (ms.size() > 4) ms.resize(4);  // pricing is the estimator's harness (fuzz_plan); keep runs short
  summarize(compare(ms, "/nonexistent-fuzz", "v100"));
}

void measured_cells(const std::string& path) {
  using namespace cellsched;
  std::vector<MeasuredCell> cells = load_measured_cells(path);
  std::vector<Job> jobs;
  for (const MeasuredCell& c : cells) {
    if (jobs.size() == 8) break;
    Job j;
    j.model = c.model;
    j.batch_size = c.batch;
    j.gpus = c.hosts * c.gpus_per_host;
    jobs.push_back(j);
  }
  const MeasuredCellOracle oracle(std::move(cells), "fuzz", 0.8);
  for (const Job& j : jobs)
    for (const char* type : {"v100", "a100-80", "k80"})
      for (int w : {1, 2, 8}) {
        oracle.throughput(j, type, w, true);
        oracle.throughput(j, type, w, false);
      }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int which = size > 0 ? data[0] % 4 : 0;
  const uint8_t* body = size > 0 ? data + 1 : data;
  const size_t n = size > 0 ? size - 1 : 0;
  try {
    if (which == 0) measurements(cellsched::fuzz::write_input(body, n, ".csv"));
    if (which == 1) measured_cells(cellsched::fuzz::write_input(body, n, ".csv"));
    const std::string text(reinterpret_cast<const char*>(body), n);
    if (which == 2) cellsched::parse_name_map(text, "--model-map");
    if (which == 3) cellsched::parse_model_mix(text);
  } catch (const cellsched::InputError&) {
  }
  return 0;
}
