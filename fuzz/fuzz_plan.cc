// `--plan` strings (`dp=2,tp=2,mb=8,layers=6:6`): parsed, checked and
// priced on the analytic model of gpt-125m on 8 A100s in 2 stages.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/model.h"
#include "estimator/estimator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cellsched;
  using namespace cellsched::estimator;
  static const CostModel cm(model_by_name("gpt-125m"), "a100", nullptr, nullptr);
  static const Cell cell = make_cell("gpt-125m", "a100", 8, 2, 8);
  try {
    const Plan p = parse_plan(std::string(reinterpret_cast<const char*>(data), size), cm, cell, 64);
    check_plan(cm, cell, p);
    estimate(cm, cell, p);
  } catch (const InputError&) {
  }
  return 0;
}
