// The built-in GPU catalogue.
//
// Figures are the vendors' public peak numbers for the named board variant
// (datasheets / whitepapers), per GPU as CUDA sees it:
// - fp16_tflops is dense tensor-core FP16/BF16 (no sparsity); for GPUs without
//   tensor cores it is the plain FP16 rate (P100) or the FP32 rate (K80, which
//   has no fast FP16).
// - nvlink_gbps is the per-GPU NVLink bandwidth in one direction (the
//   datasheets' "total" figures are bidirectional and are halved here).
// - pcie_gbps is the host link in one direction: gen3 x16 15.75, gen4 x16
//   31.5, gen5 x16 63.
// - memory_gib: 16/32/40/80 GB HBM parts are binary-sized, so the marketing
//   "GB" equals GiB; boards with GDDR follow the datasheet.
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
  // One GK210 die of a Tesla K80 board (a board holds two; CUDA and Gavel count dies).
  add({"k80", "NVIDIA Tesla K80 (one GK210 die, 12 GB)", 4.37, 4.37, 12, 240, 0, 15.75, false, 2014},
      {"tesla-k80", "gk210"});
  // PCIe board, as in Gavel's GCP P100 workers and Alibaba PAI's 2-GPU P100 hosts.
  add({"p100", "NVIDIA Tesla P100 PCIe 16 GB", 9.3, 18.7, 16, 732, 0, 15.75, false, 2016},
      {"tesla-p100", "p100-16", "p100-16gb", "p100-pcie"});
  add({"v100", "NVIDIA Tesla V100 SXM2 16 GB", 15.7, 125, 16, 900, 150, 15.75, false, 2017},
      {"v100-16", "v100-16gb", "v100-sxm2", "v100-sxm2-16gb", "tesla-v100"});
  add({"v100-32", "NVIDIA Tesla V100 SXM2 32 GB", 15.7, 125, 32, 900, 150, 15.75, false, 2018},
      {"v100m32", "v100-32gb", "v100-sxm2-32gb"});
  add({"t4", "NVIDIA T4 16 GB", 8.1, 65, 16, 320, 0, 15.75, false, 2018}, {"tesla-t4"});
  add({"a100-40", "NVIDIA A100 SXM4 40 GB", 19.5, 312, 40, 1555, 300, 31.5, true, 2020},
      {"a100", "a100-40gb", "a100-sxm4-40gb"});
  add({"a40", "NVIDIA A40 48 GB", 37.4, 149.7, 48, 696, 56.25, 31.5, true, 2020}, {});
  add({"a100-80", "NVIDIA A100 SXM4 80 GB", 19.5, 312, 80, 2039, 300, 31.5, true, 2020},
      {"a100-80gb", "a100-sxm4-80gb"});
  add({"a10", "NVIDIA A10 24 GB", 31.2, 125, 24, 600, 0, 31.5, true, 2021}, {});
  add({"h100", "NVIDIA H100 SXM5 80 GB", 67, 989.4, 80, 3350, 450, 63, true, 2022},
      {"h100-sxm", "h100-sxm5", "h100-80", "h100-80gb"});
  add({"l4", "NVIDIA L4 24 GB", 30.3, 121, 24, 300, 0, 31.5, true, 2023}, {});
  add({"l40s", "NVIDIA L40S 48 GB", 91.6, 362.05, 48, 864, 0, 31.5, true, 2023}, {});
  // 141 GB marketing; nvidia-smi reports 143,771 MiB (140.4 GiB).
  add({"h200", "NVIDIA H200 SXM 141 GB", 67, 989.4, 140.4, 4800, 450, 63, true, 2024},
      {"h200-sxm", "h200-141", "h200-141gb"});
  // A generic CPU host (profiles taken with LibTorch + Gloo). NOMINAL figures
  // for a two-socket server of about 2020 (AVX-512 FMA, 8-channel DDR4); they
  // only keep estimates finite and are not a measurement of any machine.
  add({"cpu", "Generic CPU host (nominal figures)", 2.0, 2.0, 256, 200, 0, 15.75, false, 2020},
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
