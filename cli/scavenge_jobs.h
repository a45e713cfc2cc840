// The job file of `cellsched scavenge --jobs FILE`: its reader alone (no CLI
// library), so that the fuzz harness links it (fuzz/fuzz_scavenge_jobs.cc).
#pragma once

#include <string>
#include <vector>

#include "runner/scavenger.h"

namespace cellsched::cli {

// CSV with the header name,iterations,max_nodes,rescale_s,curve,command; the
// command is the rest of the line, one argv element per field (no quoting, no
// shell), and its first element must be an executable file (found on PATH).
// A curve is empty (amdahl:0.1) or amdahl:SIGMA. Throws InputError with
// file:line.
std::vector<runner::ScavengeJob> load_scavenge_jobs(const std::string& path);

}  // namespace cellsched::cli
