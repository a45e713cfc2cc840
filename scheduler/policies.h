// Constructors of the built-in policies (private to scheduler/; use make_policy).
#pragma once

#include <memory>

#include "scheduler/policy.h"

namespace cellsched {

std::unique_ptr<Policy> make_fifo();
std::unique_ptr<Policy> make_yarn_cs();

}  // namespace cellsched
