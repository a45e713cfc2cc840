// The built-in GPU catalogue: peak figures of each GPU generation.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cellsched {

struct GpuSpec {
  std::string name;          // canonical lower-case name: "v100", "a100-80", "cpu"
  std::string description;   // "NVIDIA Tesla V100 SXM2 16 GB"
  double fp32_tflops = 0;    // peak dense FP32, non-dual-issue (see gpu.cc)
  double fp16_tflops = 0;    // peak dense FP16 (tensor cores where present; BF16 equal where bf16)
  double memory_gib = 0;     // device memory
  double memory_gbps = 0;    // device memory bandwidth, GB/s
  double nvlink_gbps = 0;    // per-GPU NVLink bandwidth (one direction), GB/s; 0 = none
  double pcie_gbps = 0;      // host link bandwidth (one direction), GB/s
  bool bf16 = false;         // native BF16 support
  int year = 0;              // release year
  double tf32_tflops = 0;    // peak dense TF32 tensor-core; 0 = no TF32
  int sm_count = 0;          // streaming multiprocessors (wave quantization); CPU: cores
  std::string arch;          // "kepler", "pascal", "volta", "turing", "ampere", "ada", "hopper", "cpu"
  double nic_gbps = 12.5;    // default inter-host bandwidth per GPU's ring, GB/s
  int nvlink_peers = 0;      // GPUs one NVLink domain joins (the A40's bridge: 2); 0 = the whole host
  double cuda_fp16_tflops = 0;  // peak dense FP16 on the CUDA cores, off the tensor cores (see gpu.cc)
  // Tensor cores multiply fp16 at 8x the FP32 rate or more; Pascal's packed
  // fp16 (P100: 18.7 against 9.3) is 2x and is not one.
  bool tensor_cores() const { return fp16_tflops > 3 * fp32_tflops; }
};

// Training precision: fp32, tf32 (fp32 storage, TF32 tensor-core matmuls), or
// fp16/bf16 mixed precision (16-bit weights, activations and gradients; fp32
// master weights and optimizer state). Default = the device's default.
enum class Precision { Default, FP32, TF32, FP16, BF16 };
const char* precision_name(Precision p);  // "default", "fp32", "tf32", "fp16", "bf16"
// "fp32", "tf32", "fp16", "bf16", "amp" (= fp16), "mixed"/"default" (= Default);
// InputError otherwise.
Precision parse_precision(std::string_view s);
// What training on `g` uses when nothing says otherwise: bf16 where the type has
// it, fp16 on other tensor-core types, fp32 without tensor cores and on the CPU.
Precision default_precision(const GpuSpec& g);
// `p` resolved on `g` (Default -> default_precision); InputError when the type
// cannot run it (bf16 before Ampere, tf32 before Ampere, 16-bit on the CPU).
Precision resolve_precision(Precision p, const GpuSpec& g);
int bytes_per_value(Precision p);  // 4 for fp32/tf32, 2 for fp16/bf16
// Peak of dense matrix products (GEMM, convolution, attention) at `p` on `g`, TFLOPS.
double matmul_peak_tflops(const GpuSpec& g, Precision p);

// Every GPU type the catalogue knows, oldest first.
const std::vector<GpuSpec>& gpu_catalogue();

// Looks a type up by canonical name or alias ("V100", "v100-16", "V100M32",
// "A100", "h100-sxm"), case-insensitively. nullptr when unknown.
const GpuSpec* find_gpu(std::string_view name);

// Canonical name of a known type; throws InputError naming the alternatives when unknown.
std::string canonical_gpu_name(std::string_view name);

}  // namespace cellsched
