// Real training iterations for `cellsched validate`: one worker process of a
// single-process, data-parallel (Gloo all-reduce of the gradients) or
// 2-stage pipeline run (activations and their gradients sent between the
// stages) of a zoo model on the CPU. No LibTorch in this header.
#pragma once

#include <string>
#include <vector>

namespace cellsched::validate {

struct WorkerArgs {
  std::string mode;          // "single", "dp", "pp"
  std::string model;         // zoo name or .yaml
  int rank = 0, world = 1;
  int micro_batches = 1;     // B
  int micro_batch_size = 1;  // samples per micro-batch (split over dp ranks)
  int split = 0;             // pp: first layer of stage 1
  int iterations = 5, warmup = 2, threads = 1;
  std::string store_dir;     // rendezvous (c10d FileStore)
  std::string out_path;      // JSON: {"iteration_ms": [...]}
};

std::vector<std::string> to_argv(const WorkerArgs& a);
WorkerArgs parse_argv(const std::vector<std::string>& argv);  // InputError

// Whether this build can run workers (LibTorch found).
bool available();
// Runs one worker to completion; returns an exit status.
int run_worker(const WorkerArgs& args);

}  // namespace cellsched::validate
