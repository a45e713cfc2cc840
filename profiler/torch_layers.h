// The profiler's LibTorch layer modules, for code that trains whole models
// (cellsched validate). Includes LibTorch: only LibTorch translation units
// may include this header.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>

#include "core/model.h"

namespace cellsched::profiler {

// Layer `index` of a zoo model (gpt, moe, wrn; whole, tp = 1) as the same
// LibTorch module the profiler times, on the CPU.
struct TorchLayer {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(torch::Tensor)> forward;
  std::function<torch::Tensor(int micro_batch)> input;  // a random input of the layer
};
TorchLayer build_torch_layer(const ModelSpec& model, size_t index);

// The training loss after a model's head: cross-entropy of its output
// (logits or class scores, classes last) against random labels. The profiler
// times it as part of the head layer, as training runs it.
torch::Tensor training_loss(const torch::Tensor& output);

// Pins CPU compute to `threads` threads: LibTorch's intra-op pool and the
// BLAS library's own pool (Debian's LibTorch calls the system BLAS, whose
// OpenBLAS build otherwise starts one thread per core in every process), and
// exports OPENBLAS_NUM_THREADS / OMP_NUM_THREADS for child processes.
void set_cpu_threads(int threads);

// Makes glibc keep freed memory in the heap instead of unmapping large
// blocks, so training loops stop page-faulting their tensors in every
// iteration (what jemalloc or tcmalloc give PyTorch on CPUs).
void keep_freed_memory();

}  // namespace cellsched::profiler
