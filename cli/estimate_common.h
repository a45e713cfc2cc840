// Shared by `estimate`, `tune` and `validate`: choosing profiles from the
// store and printing an estimate.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model.h"
#include "core/profile.h"
#include "estimator/estimator.h"

namespace cellsched::cli {

struct ProfileSelection {
  bool has_compute = true;  // false: no profile to use; a GPU type is then modeled
  ProfileRun compute;
  std::optional<ProfileRun> comm;
};

// Checks ids a user named (0 = none named) before any work: each exists in
// `db_path`, is of its kind, and a compute profile profiles `model`.
// InputError otherwise (a bad --profile failed only after validate had
// stored a comm profile and trained every trial).
void check_profile_ids(const std::string& db_path, const std::string& model, int64_t compute_id, int64_t comm_id);

// The compute profile `compute_id`, else the newest of the model on gpu_type,
// else (a GPU type) the newest on another GPU type (transferred), else the
// newest on any device; the comm profile `comm_id`, else the newest on
// gpu_type, else none. InputError when missing, unless !require_compute and
// gpu_type is a GPU: then has_compute = false (modeled; no database needed).
ProfileSelection select_profiles(const std::string& db_path, const ModelSpec& model, const std::string& gpu_type,
                                 int64_t compute_id, int64_t comm_id, bool require_compute = true);

void print_estimate(std::ostream& out, const estimator::Cell& cell, const estimator::Plan& plan,
                    const estimator::Estimate& e);
// `cellsched estimate --validate FILE`: measured GPU iterations against the
// estimates (cli/validate_gpu.cc).
int run_validate_gpu(const std::vector<std::string>& args);

nlohmann::json estimate_json(const estimator::Cell& cell, const estimator::Plan& plan, const estimator::Estimate& e);

}  // namespace cellsched::cli
