// Communication profiling: collectives swept over message sizes between real
// processes (one per rank, or one per several GPUs with NCCL), reported as
// nccl-tests does: time, algbw = bytes / time, busbw = algbw x busbw_factor.
// Gloo (LibTorch c10d) on CPUs, NCCL on GPUs; no MPI: ranks meet through a
// file store in a scratch directory.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/profile.h"
#include "profiler/compute.h"

namespace cellsched::profiler {

// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv".
const std::vector<std::string>& collective_names();

// Powers of two from 1 KiB: to 4 MiB (gloo) or 256 MiB (nccl).
std::vector<int64_t> default_sizes(const std::string& backend);

struct CommOptions {
  std::string backend = "gloo";      // "gloo" or "nccl"
  int ranks = 2;                     // group size (devices on this host)
  int devices_per_process = 1;       // nccl: GPUs one process drives (ranks must be a multiple)
  std::vector<int64_t> sizes;        // bytes (nccl-tests' size); empty = default_sizes
  std::vector<std::string> collectives = collective_names();
  int repetitions = 5;               // timed repetitions per size (median of the slowest rank)
  int warmup = 1;
  int passes = 1;                    // interleaved passes over all (collective, size), as ComputeOptions
  std::string device_type;           // catalogue name; "" = "cpu" (gloo) or detected (nccl)
  // The worker's argv prefix (e.g. {"/proc/self/exe", "profile", "comm-worker"});
  // the launcher appends the worker arguments (to_argv).
  std::vector<std::string> worker_command;
  double timeout_s = 600;            // whole sweep; workers are killed after it
  Progress progress;
};

// What one worker process does: its ranks, the rendezvous and what to measure.
struct CommWorkerArgs {
  std::string backend;
  int rank = 0;            // first rank of this process
  int local_ranks = 1;     // ranks (GPUs) this process drives
  int world = 1;
  std::string store_dir;   // rendezvous directory (file store, NCCL unique id)
  std::vector<int64_t> sizes;
  std::vector<std::string> collectives;
  int repetitions = 5, warmup = 1, passes = 1;
  std::string out_path;    // JSON results of this process
  std::string progress_path;  // rank 0 appends one line per finished measurement
};
std::vector<std::string> to_argv(const CommWorkerArgs& a);
CommWorkerArgs parse_worker_argv(const std::vector<std::string>& argv);  // InputError

// One process's view of the group, behind which Gloo or NCCL sits.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string device_type() const = 0;  // "cpu", "h100", ...
  virtual std::string timer() const = 0;        // "steady_clock", "cuda_events"
  virtual std::map<std::string, std::string> versions() const = 0;
  // Allocates buffers for `collective` at `bytes`; returns the bytes it will
  // actually move (rounded to whole elements per rank).
  virtual int64_t prepare(const std::string& collective, int64_t bytes) = 0;
  // Runs the prepared collective once (all local ranks) and returns its time in us.
  virtual double run_us() = 0;
  virtual void barrier() = 0;
};

// The worker's main: measures and writes args.out_path. Returns an exit status.
int run_comm_worker(const CommWorkerArgs& args);

// Launches the workers, waits (killing them after the timeout or when one
// fails), and combines their results (per repetition the slowest rank, then
// the median). InputError for bad options; std::runtime_error when a worker fails.
ProfileRun profile_comm(const CommOptions& opt);

// Builds the records of one (collective, bytes) from per-rank samples in us.
CommProfile make_comm_profile(const std::string& backend, const std::string& collective,
                              int ranks, int64_t bytes,
                              const std::vector<std::vector<double>>& samples_per_rank);

// The communicator for args.backend from those compiled in (backends.cc).
std::unique_ptr<Communicator> make_communicator(const CommWorkerArgs& args);

}  // namespace cellsched::profiler
