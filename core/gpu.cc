// The built-in GPU catalogue.
//
// Figures are the vendors' public peak numbers for the named board variant
// (datasheets / whitepapers, listed per entry), per GPU as CUDA sees it:
// - fp32_tflops is dense FP32 WITHOUT dual issue: Ampere GA10x (A40, A10) and
//   Ada (L4, L40S) datasheets count both FP32 datapaths of an SM, one of which
//   is shared with INT32; real FP32 kernels (SGEMM, elementwise) reach about
//   the single-path figure, so half the datasheet number is kept here.
// - fp16_tflops is dense tensor-core FP16 (no sparsity); BF16 is the same rate
//   where `bf16` is true. Without tensor cores it is the plain FP16 rate (P100)
//   or the FP32 rate (K80, which has no fast FP16).
// - tf32_tflops is dense TF32 tensor-core (Ampere and later; 0 before).
// - nvlink_gbps is the per-GPU NVLink bandwidth in one direction (the
//   datasheets' "total" figures are bidirectional and are halved here);
//   nvlink_peers is how many GPUs it joins where that is not the whole host
//   (the A40's NVLink bridge joins two boards).
// - pcie_gbps is the host link in one direction: gen3 x16 15.75, gen4 x16
//   31.5, gen5 x16 63.
// - nic_gbps is a default inter-host bandwidth per GPU (one direction): 100 Gb/s
//   EDR/Ethernet for older or PCIe servers, 200 Gb/s HDR per GPU in DGX A100,
//   400 Gb/s NDR per GPU in DGX H100/H200; a cluster may say otherwise.
// - memory_gib: the total nvidia-smi reports (MiB / 1024, ECC on as shipped),
//   not the marketing "GB": A10/A10G 23028 MiB, L4 23034, A40/L40S 46068,
//   T4 15360, K80 11441 per die, P100-16 16280, V100-16 16160, V100-32 32510,
//   A100-40 40960, A100-80 81920, H100 SXM 81559, H200 143771 (public
//   nvidia-smi listings). The GDDR boards had been taken at 24/48/16/12 GiB,
//   6-7 % more than CUDA can allocate.
// - sm_count: from the architecture whitepapers (wave quantization of GEMMs).
// - cuda_fp16_tflops is FP16 on the CUDA cores (packed half2, no tensor
//   cores), what cuBLAS falls back to for a GEMM whose sizes the tensor cores
//   cannot load: 2x FP32 on Volta, Turing and Hopper (V100 31.4, H100 SXM
//   133.8), 4x on GA100 (A100 78), 1x on GA10x and Ada, whose datasheets give
//   it equal to their dual-issue FP32 figure, halved here as fp32_tflops is;
//   the K80 has no fast FP16 (its FP32 rate); the P100's is fp16_tflops.
// Sources: NVIDIA datasheets "Tesla K80" (2 x GK210, 8.73 TFLOPS FP32 boost, 480
// GB/s per board), "Tesla P100 PCIe", "Tesla V100" (SXM2), "T4", "A100 Tensor
// Core GPU" (Table 1 of the A100 whitepaper: FP32 19.5, TF32 156, FP16/BF16 312),
// "A40" (FP32 37.4, TF32 74.8, BF16 149.7, 696 GB/s), "A10" (FP32 31.2, TF32
// 62.5, BF16 125, 600 GB/s), "H100" (SXM5: FP32 67, TF32 494.7, BF16 989.4 dense),
// "L4" (FP32 30.3, TF32 60, BF16 121 dense), "L40S" (FP32 91.6, TF32 183, BF16
// 362.05 dense), "H200" (SXM, 4.8 TB/s).
#include "core/gpu.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "core/error.h"

namespace cellsched {

namespace {

struct Entry {
  GpuSpec spec;
  std::vector<std::string> aliases;  // lower-case, '-' separated
};

std::vector<Entry> build_catalogue() {
  std::vector<Entry> c;
  auto add = [&c](GpuSpec s, std::vector<std::string> aliases) {
    c.push_back(Entry{std::move(s), std::move(aliases)});
  };
  // name, description, fp32, fp16, memory GiB, memory GB/s, NVLink, PCIe, bf16, year,
  // tf32, SMs, arch, NIC GB/s, NVLink peers, CUDA-core fp16.
  // One GK210 die of a Tesla K80 board (a board holds two; CUDA and Gavel count dies).
  add({"k80", "NVIDIA Tesla K80 (one GK210 die, 12 GB)", 4.37, 4.37, 11.17, 240, 0, 15.75, false, 2014,
       0, 13, "kepler", 12.5, 0, 4.37},
      {"tesla-k80", "gk210"});
  // PCIe board, as in Gavel's GCP P100 workers and Alibaba PAI's 2-GPU P100 hosts.
  add({"p100", "NVIDIA Tesla P100 PCIe 16 GB", 9.3, 18.7, 15.9, 732, 0, 15.75, false, 2016, 0, 56,
       "pascal", 12.5, 0, 18.7},
      {"tesla-p100", "p100-16", "p100-16gb", "p100-pcie"});
  add({"v100", "NVIDIA Tesla V100 SXM2 16 GB", 15.7, 125, 15.78, 900, 150, 15.75, false, 2017, 0, 80,
       "volta", 12.5, 0, 31.4},
      {"v100-16", "v100-16gb", "v100-16g", "v100-sxm2", "v100-sxm2-16gb", "tesla-v100"});
  add({"v100-32", "NVIDIA Tesla V100 SXM2 32 GB", 15.7, 125, 31.75, 900, 150, 15.75, false, 2018, 0, 80,
       "volta", 12.5, 0, 31.4},
      {"v100m32", "v100-32gb", "v100-32g", "v100-sxm2-32gb"});
  add({"t4", "NVIDIA T4 16 GB", 8.1, 65, 15, 320, 0, 15.75, false, 2018, 0, 40, "turing", 12.5, 0, 16.2},
      {"tesla-t4"});
  add({"a100-40", "NVIDIA A100 SXM4 40 GB", 19.5, 312, 40, 1555, 300, 31.5, true, 2020, 156, 108,
       "ampere", 25, 0, 78},
      {"a100", "a100-40gb", "a100-40g", "a100-sxm4-40gb"});
  // NVLink bridges join A40s in pairs: a ring over more of them runs at PCIe speed.
  add({"a40", "NVIDIA A40 48 GB", 18.7, 149.7, 44.99, 696, 56.25, 31.5, true, 2020, 74.8, 84, "ampere",
       12.5, 2, 18.7},
      {});
  add({"a100-80", "NVIDIA A100 SXM4 80 GB", 19.5, 312, 80, 2039, 300, 31.5, true, 2020, 156, 108,
       "ampere", 25, 0, 78},
      {"a100-80gb", "a100-80g", "a100-sxm4-80gb"});
  add({"a10", "NVIDIA A10 24 GB", 15.6, 125, 22.49, 600, 0, 31.5, true, 2021, 62.5, 72, "ampere", 12.5, 0, 15.6},
      {});
  add({"h100", "NVIDIA H100 SXM5 80 GB", 67, 989.4, 79.65, 3350, 450, 63, true, 2022, 494.7, 132,
       "hopper", 50, 0, 133.8},
      {"h100-sxm", "h100-sxm5", "h100-80", "h100-80gb"});
  add({"l4", "NVIDIA L4 24 GB", 15.15, 121, 22.49, 300, 0, 31.5, true, 2023, 60, 58, "ada", 12.5, 0, 15.15}, {});
  add({"l40s", "NVIDIA L40S 48 GB", 45.8, 362.05, 44.99, 864, 0, 31.5, true, 2023, 183, 142, "ada", 12.5, 0, 45.8},
      {});
  add({"h200", "NVIDIA H200 SXM 141 GB", 67, 989.4, 140.4, 4800, 450, 63, true, 2024, 494.7, 132,
       "hopper", 50, 0, 133.8},
      {"h200-sxm", "h200-141", "h200-141gb"});
  // A generic CPU host (profiles taken with LibTorch + Gloo). NOMINAL figures
  // for a two-socket server of about 2020 (AVX-512 FMA, 8-channel DDR4); they
  // only keep estimates finite and are not a measurement of any machine.
  add({"cpu", "Generic CPU host (nominal figures)", 2.0, 2.0, 256, 200, 0, 15.75, false, 2020, 0, 0,
       "cpu", 12.5, 0, 2.0},
      {"host", "x86-64"});
  return c;
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = build_catalogue();
  return e;
}

// Lower-case, trimmed, '_' and ' ' -> '-', without a leading "nvidia-"
// ("NVIDIA A100" -> "a100", "Tesla_V100" -> "tesla-v100", an alias).
std::string normalize(std::string_view name) {
  size_t b = 0, e = name.size();
  while (b < e && std::isspace(static_cast<unsigned char>(name[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(name[e - 1]))) --e;
  std::string s;
  for (size_t i = b; i < e; ++i) {
    char ch = static_cast<char>(std::tolower(static_cast<unsigned char>(name[i])));
    if (ch == '_' || ch == ' ') ch = '-';
    s.push_back(ch);
  }
  if (s.rfind("nvidia-", 0) == 0) s.erase(0, 7);
  return s;
}

}  // namespace

const std::vector<GpuSpec>& gpu_catalogue() {
  static const std::vector<GpuSpec> specs = [] {
    std::vector<GpuSpec> v;
    for (const auto& e : entries()) v.push_back(e.spec);
    return v;
  }();
  return specs;
}

const GpuSpec* find_gpu(std::string_view name) {
  const std::string key = normalize(name);
  if (key.empty()) return nullptr;
  const auto& specs = gpu_catalogue();
  const auto& es = entries();
  for (size_t i = 0; i < es.size(); ++i) {
    if (es[i].spec.name == key) return &specs[i];
    if (std::find(es[i].aliases.begin(), es[i].aliases.end(), key) != es[i].aliases.end())
      return &specs[i];
  }
  return nullptr;
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
    default: return "default";
  }
}

Precision parse_precision(std::string_view s) {
  const std::string k = normalize(s);
  if (k == "fp32" || k == "float32") return Precision::FP32;
  if (k == "tf32") return Precision::TF32;
  if (k == "fp16" || k == "float16" || k == "amp") return Precision::FP16;
  if (k == "bf16" || k == "bfloat16") return Precision::BF16;
  if (k == "default" || k == "mixed" || k.empty()) return Precision::Default;
  throw InputError("unknown precision '" + std::string(s) + "' (fp32, tf32, fp16, bf16, default)");
}

Precision default_precision(const GpuSpec& g) {
  if (g.arch == "cpu") return Precision::FP32;
  if (g.bf16) return Precision::BF16;
  if (g.tensor_cores()) return Precision::FP16;
  return Precision::FP32;
}

Precision resolve_precision(Precision p, const GpuSpec& g) {
  if (p == Precision::Default) return default_precision(g);
  if (g.arch == "cpu" && p != Precision::FP32)
    throw InputError(std::string("precision ") + precision_name(p) + " on the CPU: CPU profiles and estimates are fp32");
  if (p == Precision::BF16 && !g.bf16) throw InputError(g.name + " has no bf16 (use fp16 or fp32)");
  if (p == Precision::TF32 && g.tf32_tflops <= 0) throw InputError(g.name + " has no tf32 (Ampere and later; use fp32)");
  return p;
}

int bytes_per_value(Precision p) { return p == Precision::FP16 || p == Precision::BF16 ? 2 : 4; }

double matmul_peak_tflops(const GpuSpec& g, Precision p) {
  switch (p) {
    case Precision::TF32: return g.tf32_tflops > 0 ? g.tf32_tflops : g.fp32_tflops;
    case Precision::FP16:
    case Precision::BF16: return g.fp16_tflops;
    default: return g.fp32_tflops;
  }
}

std::string canonical_gpu_name(std::string_view name) {
  if (const GpuSpec* g = find_gpu(name)) return g->name;
  std::string known;
  for (const auto& g : gpu_catalogue()) {
    if (!known.empty()) known += ", ";
    known += g.name;
  }
  throw InputError("unknown GPU type '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace cellsched
