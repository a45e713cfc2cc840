// Cluster readers: the YAML node list (also the runner's --nodes), the PAI
// machine list and Alibaba 2023 node list (CSV), and the shorthand
// (`v100:36,k80:8`). The first byte picks which.
#include <cstdint>
#include <string>

#include "core/cluster.h"
#include "core/error.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t kind = data[0] % 3;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  try {
    if (kind == 0) {
      cellsched::parse_cluster_shorthand(std::string(reinterpret_cast<const char*>(body), n));
    } else {
      const std::string path = cellsched::fuzz::write_input(body, n, kind == 1 ? ".yaml" : ".csv");
      cellsched::load_cluster(path, {{"G2", "t4"}});
    }
  } catch (const cellsched::InputError&) {
  }
  return 0;
}
