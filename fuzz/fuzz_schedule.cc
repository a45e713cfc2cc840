// Schedule JSON (`run --schedule`, `schedule --replay`), checked against a
// node list as at load.
#include <cstdint>
#include <string>

#include "core/cluster.h"
#include "core/error.h"
#include "core/schedule.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const cellsched::Cluster cluster = cellsched::parse_cluster_shorthand("v100:6,k80:4");
  try {
    const cellsched::Schedule s = cellsched::schedule_from_json(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    cellsched::check_schedule(s, cluster);
  } catch (const cellsched::InputError&) {
  }
  return 0;
}
