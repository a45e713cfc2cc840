// The composition root of the profiler: the only file that knows which
// optional backends this build has (every #if on them is here).
#include <cstdlib>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/error.h"
#include "core/parse_util.h"
#include "profiler/backends.h"

namespace cellsched::profiler {

std::vector<std::string> compiled_backends() {
  std::vector<std::string> v;
#if CELLSCHED_HAVE_TORCH
  v.push_back("libtorch");
  v.push_back("gloo");
#endif
#if CELLSCHED_HAVE_CUDA
  v.push_back("cuda");
  v.push_back("cupti");
  v.push_back("nccl");
#endif
  return v;
}

namespace detail {

int cpus_in_list(const std::string& list) {
  int n = 0;
  std::stringstream ss(list);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const auto dash = part.find('-');
    const int a = std::atoi(part.c_str());
    const int b = dash == std::string::npos ? a : std::atoi(part.c_str() + dash + 1);
    if (b >= a) n += b - a + 1;
  }
  return n;
}

int64_t effective_cache_bytes(int64_t reported, int sharing_cpus) {
  if (reported <= 0 || sharing_cpus <= 0) return reported;
  return std::min(reported, int64_t{sharing_cpus} * kCacheBytesPerCpu);
}

int64_t cpu_last_level_cache_bytes() {
  int64_t best = 0;
  int best_level = 0, sharing = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level(dir + "level"), size(dir + "size"), shared(dir + "shared_cpu_list");
    int lv = 0;
    std::string sz, cpus;
    if (!(level >> lv) || !(size >> sz) || sz.empty()) continue;
    int64_t bytes = std::atoll(sz.c_str());
    if (sz.back() == 'K') bytes <<= 10;
    else if (sz.back() == 'M') bytes <<= 20;
    if (lv >= best_level && bytes > 0) {
      best_level = lv, best = bytes;
      sharing = (shared >> cpus) ? cpus_in_list(cpus) : 0;
    }
  }
  return effective_cache_bytes(best, sharing);
}

}  // namespace detail

namespace {

// "cpu" -> -1, "cuda" / "cuda:N" -> N; InputError otherwise.
int parse_device(const std::string& device) {
  if (device == "cpu") return -1;
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) == 0) {
    const auto n = cellsched::detail::to_int(device.substr(5));
    if (n && *n >= 0 && *n < 1024) return static_cast<int>(*n);
  }
  throw InputError("--device: '" + device + "' is not cpu, cuda or cuda:N");
}

}  // namespace

std::unique_ptr<ComputeBackend> make_compute_backend(const ComputeOptions& opt) {
  const int index = parse_device(opt.device);
  if (opt.timer != "auto" && opt.timer != "cupti" && opt.timer != "cuda_events")
    throw InputError("--timer: '" + opt.timer + "' is not auto, cupti or cuda_events");
  if (index < 0) {
#if CELLSCHED_HAVE_TORCH
    return detail::make_torch_backend("cpu", opt.threads, detail::cpu_last_level_cache_bytes(), nullptr, "cpu");
#else
    throw InputError("cpu: this build has no LibTorch (install libtorch-dev and rebuild)");
#endif
  }
#if CELLSCHED_HAVE_CUDA
  const int n = detail::cuda_device_count();
  if (index >= n)
    throw InputError(opt.device + ": no such CUDA device (this machine has " + std::to_string(n) + ")");
  auto timer = detail::make_cuda_timer(index, opt.timer);
#if CELLSCHED_HAVE_TORCH
  return detail::make_torch_backend("cuda:" + std::to_string(index), opt.threads, detail::cuda_l2_cache_bytes(index), std::move(timer),
                                    detail::cuda_device_type(index));
#else
  throw InputError(opt.device + ": this build has no LibTorch to run layers with");
#endif
#else
  throw InputError(opt.device + ": this build has no CUDA toolkit (configure with /usr/local/cuda present)");
#endif
}

std::unique_ptr<Communicator> make_communicator(const CommWorkerArgs& args) {
  if (args.backend == "gloo") {
#if CELLSCHED_HAVE_TORCH
    if (args.local_ranks != 1) throw InputError("gloo: one rank per process");
    return detail::make_gloo_communicator(args);
#else
    throw InputError("gloo: this build has no LibTorch (c10d Gloo); install libtorch-dev libgloo-dev and rebuild");
#endif
  }
  if (args.backend == "nccl") {
#if CELLSCHED_HAVE_CUDA
    return detail::make_nccl_communicator(args);
#else
    throw InputError("nccl: this build has no CUDA toolkit with NCCL");
#endif
  }
  throw InputError("--backend: '" + args.backend + "' is not gloo or nccl");
}

}  // namespace cellsched::profiler
