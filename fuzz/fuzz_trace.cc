// Every trace format through the auto-detecting reader (load_trace), with
// the bundled throughput table (the Philly-style readers draw job types from
// it). A reader may reject the input with InputError; anything else, a
// sanitizer report, an uncaught exception or a hang, is a finding.
#include <cstdint>

#include "core/error.h"
#include "core/throughput.h"
#include "core/trace_io.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const cellsched::ThroughputTable table =
      cellsched::load_gavel_throughputs(CELLSCHED_EXAMPLES "/data/gavel/simulation_throughputs.json");
  // The first byte picks the file's extension (some formats are told by it).
  static const char* const exts[] = {".trace", ".csv", ".json", ".tsv", ".txt"};
  const std::string ext = size > 0 ? exts[data[0] % 5] : ".trace";
  const std::string path = cellsched::fuzz::write_input(size > 0 ? data + 1 : data, size > 0 ? size - 1 : 0, ext);
  cellsched::TraceReadOptions o;
  o.table = &table;
  try {
    cellsched::load_trace(path, o);
  } catch (const cellsched::InputError&) {
  }
  return 0;
}
