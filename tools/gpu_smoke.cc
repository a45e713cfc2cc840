// cellsched-gpu-smoke: the profiler's CUDA code paths (CUPTI and CUDA-event
// timers, device detection, NCCL collectives) on a real GPU, with no LibTorch,
// SQLite or Boost in the process, so it can be built here and run on a
// machine that has only the NVIDIA driver and the CUDA/CUPTI/NCCL runtimes.
//
//   cellsched-gpu-smoke            exit 0 when every check held, 1 otherwise
//
// It prints what it measured; tools/gpu-lent-check.sh runs it on a lent GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "profiler/backends.h"
#include "profiler/spin_kernel.h"

namespace {

using namespace cellsched::profiler;

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

void timer_check(const std::string& kind) {
  try {
    auto timer = detail::make_cuda_timer(0, kind);
    // Warm-up outside any region: the first launch JIT-compiles the PTX (80 ms
    // on an H100), which would otherwise land in region 1.
    check(launch_spin(10) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, kind + ": warm-up launch");
    const unsigned lengths[3] = {1000, 1000000, 10000000};
    for (int i = 0; i < 3; ++i) {
      timer->start(i + 1);
      check(launch_spin(lengths[i]) == cudaSuccess, kind + ": launch the spin kernel");
      timer->stop(i + 1);
    }
    const auto ms = timer->collect_ms();
    const bool all = ms.count(1) && ms.count(2) && ms.count(3);
    check(all, kind + ": every region timed (" + std::to_string(ms.size()) + " of 3 from " + timer->name() + ")");
    if (!all) return;
    std::printf("     %s (%s): 1e3 spins %.4f ms, 1e6 spins %.4f ms, 1e7 spins %.4f ms\n", timer->name().c_str(),
                kind.c_str(), ms.at(1), ms.at(2), ms.at(3));
    check(ms.at(1) > 0 && ms.at(2) > ms.at(1) && ms.at(3) > ms.at(2), kind + ": longer kernels take longer");
    // The loop is serial: 10x the spins should take about 10x the time.
    const double r = ms.at(3) / ms.at(2);
    check(r > 5 && r < 15, kind + ": 1e7 / 1e6 spins = " + std::to_string(r) + " (expected about 10)");
  } catch (const std::exception& e) {
    check(false, kind + ": " + e.what());
  }
}

void nccl_check() {
  try {
    CommWorkerArgs a;
    a.backend = "nccl";
    a.world = 1;
    a.local_ranks = 1;
    a.store_dir = (std::filesystem::temp_directory_path() / "cellsched-gpu-smoke").string();
    std::filesystem::create_directories(a.store_dir);
    std::filesystem::remove(std::filesystem::path(a.store_dir) / "nccl_id");
    auto comm = detail::make_nccl_communicator(a);
    std::printf("     NCCL %s on %s, timer %s\n", detail::nccl_version().c_str(), comm->device_type().c_str(),
                comm->timer().c_str());
    for (const char* coll : {"all_reduce", "all_gather", "broadcast"}) {
      for (int64_t bytes : {int64_t{1} << 10, int64_t{1} << 20, int64_t{256} << 20}) {
        const int64_t moved = comm->prepare(coll, bytes);
        comm->run_us();  // warm-up
        std::vector<double> us;
        for (int i = 0; i < 5; ++i) us.push_back(comm->run_us());
        std::sort(us.begin(), us.end());
        std::printf("     %-10s %10ld B  median %9.1f us  %8.1f GB/s\n", coll, long(moved), us[2],
                    moved / us[2] / 1e3);
        check(us[0] > 0, std::string("nccl ") + coll + " " + std::to_string(moved) + " B timed");
      }
    }
    comm->barrier();
  } catch (const std::exception& e) {
    check(false, std::string("nccl: ") + e.what());
  }
}

}  // namespace

int main() {
  const int n = detail::cuda_device_count();
  std::printf("CUDA devices: %d (%s)\n", n, detail::cuda_versions().c_str());
  if (n == 0) {
    std::printf("no CUDA device: nothing to check\n");
    return 1;
  }
  const std::string type = detail::cuda_device_type(0);
  std::printf("device 0: catalogue type '%s', L2 %.1f MiB\n", type.c_str(),
              detail::cuda_l2_cache_bytes(0) / 1048576.0);
  check(!type.empty(), "device 0 is a catalogue type");
  check(detail::cuda_l2_cache_bytes(0) > 0, "device 0 reports its L2");
  timer_check("cuda_events");
  timer_check("cupti");
  timer_check("auto");
  nccl_check();
  std::printf("%s: %d check(s) failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
