#include <cstdlib>
#include <map>

#include "core/error.h"
#include "validate/train.h"

namespace cellsched::validate {

std::vector<std::string> to_argv(const WorkerArgs& a) {
  return {"--mode", a.mode, "--model", a.model, "--rank", std::to_string(a.rank), "--world",
          std::to_string(a.world), "--micro-batches", std::to_string(a.micro_batches), "--micro-batch-size",
          std::to_string(a.micro_batch_size), "--split", std::to_string(a.split), "--iterations",
          std::to_string(a.iterations), "--warmup", std::to_string(a.warmup), "--threads",
          std::to_string(a.threads), "--store", a.store_dir, "--out", a.out_path};
}

WorkerArgs parse_argv(const std::vector<std::string>& argv) {
  std::map<std::string, std::string> kv;
  for (size_t i = 0; i + 1 < argv.size(); i += 2) kv[argv[i]] = argv[i + 1];
  if (argv.size() % 2) throw InputError("validate worker: odd argument count");
  auto get = [&](const std::string& k) {
    auto it = kv.find(k);
    if (it == kv.end()) throw InputError("validate worker: missing " + k);
    return it->second;
  };
  auto num = [&](const std::string& k) { return std::atoi(get(k).c_str()); };
  WorkerArgs a;
  a.mode = get("--mode");
  a.model = get("--model");
  a.rank = num("--rank");
  a.world = num("--world");
  a.micro_batches = num("--micro-batches");
  a.micro_batch_size = num("--micro-batch-size");
  a.split = num("--split");
  a.iterations = num("--iterations");
  a.warmup = num("--warmup");
  a.threads = num("--threads");
  a.store_dir = get("--store");
  a.out_path = get("--out");
  return a;
}

#ifndef CELLSCHED_VALIDATE_TORCH
bool available() { return false; }
int run_worker(const WorkerArgs&) { return 1; }
#endif

}  // namespace cellsched::validate
