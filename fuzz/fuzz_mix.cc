// The malleable mix CSV (`simulate --malleable MIX`), with the bundled
// throughput table as both the table and the run's oracle, on 32 V100 nodes'
// worth of cluster (`--cluster v100:32`, as the host-mode tests run it).
#include <cstdint>
#include <iostream>

#include "cli/malle_mix.h"
#include "core/cluster.h"
#include "core/error.h"
#include "core/throughput.h"
#include "fuzz/fuzz_util.h"
#include "scheduler/oracle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const cellsched::ThroughputTable table =
      cellsched::load_gavel_throughputs(CELLSCHED_EXAMPLES "/data/gavel/simulation_throughputs.json");
  static const cellsched::TableOracle oracle(table);
  static const cellsched::Cluster cluster = cellsched::parse_cluster_shorthand("v100:32");
  // The reader's notes (a superlinear curve) go to std::cerr; not one per input
  // here (libFuzzer's own lines are printf'd, not std::cerr).
  static const bool quiet = (std::cerr.rdbuf(nullptr), true);
  (void)quiet;
  const std::string path = cellsched::fuzz::write_input(data, size, ".csv");
  try {
    cellsched::cli::load_malleable_mix(path, table, oracle, cluster, 1);
  } catch (const cellsched::InputError&) {
  }
  return 0;
}
