// The built-in GPU catalogue: peak figures of each GPU generation.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cellsched {

struct GpuSpec {
  std::string name;          // canonical lower-case name: "v100", "a100-80", "cpu"
  std::string description;   // "NVIDIA Tesla V100 SXM2 16 GB"
  double fp32_tflops = 0;    // peak dense FP32
  double fp16_tflops = 0;    // peak dense FP16/BF16 tensor-core (FP16 where no BF16)
  double memory_gib = 0;     // device memory
  double memory_gbps = 0;    // device memory bandwidth, GB/s
  double nvlink_gbps = 0;    // per-GPU NVLink bandwidth (one direction), GB/s; 0 = none
  double pcie_gbps = 0;      // host link bandwidth (one direction), GB/s
  bool bf16 = false;         // native BF16 support
  int year = 0;              // release year
};

// Every GPU type the catalogue knows, oldest first.
const std::vector<GpuSpec>& gpu_catalogue();

// Looks a type up by canonical name or alias ("V100", "v100-16", "V100M32",
// "A100", "h100-sxm"), case-insensitively. nullptr when unknown.
const GpuSpec* find_gpu(std::string_view name);

// Canonical name of a known type; throws InputError naming the alternatives when unknown.
std::string canonical_gpu_name(std::string_view name);

}  // namespace cellsched
