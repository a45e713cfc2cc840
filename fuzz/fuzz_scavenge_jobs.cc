// The scavenger's job file (`cellsched scavenge --slurm --jobs FILE`). Its
// command must name an executable file, looked up on PATH as at run time.
#include <cstdint>

#include "cli/scavenge_jobs.h"
#include "core/error.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = cellsched::fuzz::write_input(data, size, ".csv");
  try {
    cellsched::cli::load_scavenge_jobs(path);
  } catch (const cellsched::InputError&) {
  }
  return 0;
}
