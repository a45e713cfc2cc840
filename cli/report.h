// Printing and writing run results (table, JSON, CSV files).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/run.h"

namespace cellsched::cli {

// A count for JSON: an integer where it is whole and exact in a double
// (600, not 600.0), else the number as it is (a fractional count, nan, inf).
nlohmann::json json_count(double x);

// A run that ended with jobs never done, though no --horizon stopped it (the
// policy placed none of them and no job arrives later): says so on `err`,
// since the table's figures then cover the finished jobs only.
void warn_unfinished(const RunRecord& run, double horizon_s, std::ostream& err);
void print_comparison(const std::vector<RunRecord>& runs, std::ostream& out);
nlohmann::json run_to_json(const RunRecord& run, bool with_jobs);
nlohmann::json runs_to_json(const std::vector<RunRecord>& runs);
void write_jobs_csv(const RunRecord& run, std::ostream& out);
// summary.csv, summary.json, jobs-<policy>.csv, utilization-<policy>.csv in `dir`.
void write_run_files(const std::vector<RunRecord>& runs, const std::string& dir);

}  // namespace cellsched::cli
