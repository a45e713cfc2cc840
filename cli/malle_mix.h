// The malleable mix of `simulate --malleable`: its reader alone (no CLI
// library), so that the fuzz harness links it (fuzz/fuzz_mix.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/throughput.h"
#include "scheduler/malle.h"
#include "scheduler/oracle.h"

namespace cellsched::cli {

// Reads a malleable mix: CSV with the header
// `name,arrival_s,iterations,max_nodes,rescale_s,curve,declared`; a curve is
// `amdahl:SIGMA:T1`, `points:T1;T2;...` (iterations/s at 1, 2, ... nodes) or
// `table:JOB TYPE` (the throughput table at that many nodes' GPUs) or
// `oracle:JOB TYPE` / `oracle:MODEL@BATCH` (the run's oracle: the table, or
// tuned cells with --oracle cells); an empty
// `declared` is the curve itself. `generate:N[:HOURS]` draws N jobs with
// `seed`: Amdahl sigma 0.01-0.3, 1-10 iterations/s on one node, up to 4-32
// nodes, rescales of 30-120 s, HOURS/10..HOURS (default 500) of one-node work.
// Throws InputError with file:line.
std::vector<MalleableJob> load_malleable_mix(const std::string& spec, const ThroughputTable& table,
                                             const ThroughputOracle& oracle, const Cluster& cluster, uint64_t seed);

}  // namespace cellsched::cli
