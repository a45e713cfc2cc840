// `cellsched validate`'s report (cli/validate_report.cc).
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/profile.h"
#include "validate/trials.h"

namespace cellsched::cli {

// The compute profile's layers with their own spread (IQR over repetitions).
nlohmann::json validate_profile_layers_json(const ProfileRun& p);
// What was seen of the host, and the verdict.
nlohmann::json validate_host_json(const validate::HostObservation& h, const validate::HostVerdict& v);
// The report as text (tables) and as a Markdown file.
void print_validate_text(std::ostream& out, const nlohmann::json& report);
void write_validate_markdown(const std::string& path, const nlohmann::json& report);

}  // namespace cellsched::cli
