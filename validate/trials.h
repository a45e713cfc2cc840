// Repeated, interleaved trials for `cellsched validate`, and the check of
// whether the host was busy while they ran. Plain functions; no LibTorch.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace cellsched::validate {

// The order in which `trials` trials of `configs` configurations run:
// round-robin (trial 0 of every configuration, then trial 1, ...), so a slow
// phase of the host spreads over all configurations instead of landing on one.
// Each entry is (trial, configuration).
std::vector<std::pair<int, int>> interleaved_order(int configs, int trials);

// Where a round's co-location probe pairs run: after which of the round's
// `configs` configuration trials (0-based positions, ascending), `pairs` of
// them spread evenly, the last after the round's last trial. A pair beside
// each part of the round samples the phases of the host that the rows'
// trials saw, not only the phase at the round's end. With more pairs than
// trials some positions repeat; empty when either count is below 1.
std::vector<int> probe_positions(int configs, int pairs);

// Profiling and training interleaved too: round t of the trials runs after
// profiling pass t * passes / trials (0-based), so the profile's passes and
// the trial rounds sample the same phases of the host. With one pass every
// round runs after the profile, as before.
int round_after_pass(int round, int passes, int trials);

// A sample's median and spread (quartiles by linear interpolation between
// order statistics; min and max).
struct Spread {
  double median = 0, q1 = 0, q3 = 0, min = 0, max = 0;
  int n = 0;
};
Spread summarize(std::vector<double> samples);

// The co-location factor: how much slower the same training step runs as two
// processes at once, one per CPU, each iteration waiting for the slower of
// the two (`together_ms`), than as one process alone (`alone_ms`). With one
// of each per probe round (equal sizes, paired by index) it is the median of
// the rounds' ratios; otherwise the ratio of the medians. Pairs with a time
// that is not positive are skipped; 1 when nothing sensible is left.
double colocation_factor(const std::vector<double>& alone_ms, const std::vector<double>& together_ms);

// CPU time of the whole machine and of this process with its waited-for
// children, in seconds, read from /proc/stat and getrusage.
struct CpuClock {
  double machine_busy_s = 0, machine_total_s = 0;  // summed over CPUs
  double own_s = 0;                                // this process and its reaped children
};
CpuClock read_cpu_clock();

// Seconds of a fixed arithmetic loop run on every CPU at once (the slowest
// thread): a host whose other work takes CPUs from the runs makes it slower.
double calibration_s(int cpus);

// Seconds of a fixed memory-bound pass on every CPU at once (the slowest
// thread streams over 64 MiB of its own, several times): contention for
// memory bandwidth or the last-level cache, which the arithmetic loop does not
// feel (a neighbour on a shared host, for one), makes it slower.
double memory_calibration_s(int cpus);

// What was seen of the host around a validation run.
struct HostObservation {
  int cpus = 1;
  double load_at_start = 0;           // 1-minute load average before anything ran
  CpuClock start, end;                // around the whole run
  std::vector<double> calibration_s;  // before the profiles, before each round of trials and after the last
  std::vector<double> memory_calibration_s;  // at the same moments
};

struct HostVerdict {
  bool busy = false;
  double others_cpu_share = 0;    // of the machine's CPU time, taken by other processes
  double calibration_ratio = 1;   // slowest / fastest calibration
  double memory_calibration_ratio = 1;  // the same for the memory-bound pass
  std::vector<std::string> reasons;  // empty when idle
};

// Busy when other processes took more than 10 % of the machine's CPU time
// during the run, or when the calibration loop's (or the memory pass's)
// slowest round was more than 15 % slower than its fastest. The load average is reported, not judged: it
// trails by a minute, so it still counts a previous run of validate itself.
HostVerdict judge_host(const HostObservation& h);

}  // namespace cellsched::validate
