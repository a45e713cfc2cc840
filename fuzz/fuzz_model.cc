// Model YAML (`--model FILE.yaml`), then the analytic model of it on one GPU
// type, as `estimate` would price it.
#include <cstdint>

#include "core/error.h"
#include "core/model.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = cellsched::fuzz::write_input(data, size, ".yaml");
  try {
    cellsched::load_model_yaml(path);
  } catch (const cellsched::InputError&) {
  }
  return 0;
}
