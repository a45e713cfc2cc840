// Gavel's throughput JSON (`--throughputs`).
#include <cstdint>

#include "core/error.h"
#include "core/throughput.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = cellsched::fuzz::write_input(data, size, ".json");
  try {
    cellsched::load_gavel_throughputs(path);
  } catch (const cellsched::InputError&) {
  }
  return 0;
}
