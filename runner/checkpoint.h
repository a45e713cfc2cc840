// Consolidation of forked copies: their checkpoints (PyTorch state dicts)
// averaged, weighted by the iterations each copy trained. The LibTorch
// implementation lives in its own target (cellsched_runner_torch); the
// runner sees only this interface.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace cellsched::runner {

class CheckpointAverager {
 public:
  virtual ~CheckpointAverager() = default;
  virtual std::string name() const = 0;
  // Writes sum_i w_i * state_i / sum_i w_i (per tensor; tensors that are not
  // floating point, e.g. step counters, come from the input with the largest
  // weight) to `output`, atomically (temporary file + rename). Throws
  // std::runtime_error when an input cannot be read or the dicts disagree.
  virtual void average(const std::vector<std::string>& inputs, const std::vector<double>& weights,
                       const std::string& output) const = 0;
};

// LibTorch (torch::pickle_load / pickle_save: the files torch.save writes and
// torch.load reads); null when this build has no LibTorch. Only
// cellsched-torch links it.
std::unique_ptr<CheckpointAverager> make_torch_averager();

// The same averaging in a child process, `helper average --out OUT --weights
// W,... IN...` (helper = the path of cellsched-torch), so that the runner's
// process loads no LibTorch. Throws std::runtime_error with the helper's
// message when it fails.
std::unique_ptr<CheckpointAverager> make_process_averager(const std::string& helper);

}  // namespace cellsched::runner
