// Internal: the backend constructors that backends.cc (the composition root)
// chooses between. Each is defined in its own translation unit, compiled only
// when its toolkit is found; nothing outside profiler/ includes this.
#pragma once

#include <memory>
#include <string>

#include "profiler/comm.h"
#include "profiler/compute.h"
#include "profiler/device_timer.h"

namespace cellsched::profiler::detail {

// torch_compute.cc (LibTorch): `device` is "cpu" or "cuda:N"; `timer` times
// CUDA regions (nullptr on the CPU: steady clock).
// `cache_bytes`: the device's last-level cache (CPU) or L2 (GPU).
std::unique_ptr<ComputeBackend> make_torch_backend(const std::string& device, int threads, int64_t cache_bytes,
                                                   std::unique_ptr<DeviceTimer> timer,
                                                   const std::string& detected_type);
std::string torch_version();

// cuda_timer.cc (CUDA runtime + CUPTI). `kind`: "cupti", "cuda_events" or "auto".
// Throws std::runtime_error when the requested timer cannot start.
std::unique_ptr<DeviceTimer> make_cuda_timer(int device, const std::string& kind);
// Number of CUDA devices (0 when there is no driver or device).
int cuda_device_count();
// Catalogue name of device `index` from its name ("NVIDIA H100 80GB HBM3" -> "h100"), or "".
std::string cuda_device_type(int index);
std::string cuda_versions();  // "runtime 13.0, driver 13.0"
// L2 cache bytes of device `index` (0 when it cannot tell).
int64_t cuda_l2_cache_bytes(int index);
// backends.cc: the CPU's last-level cache as this machine's CPUs can use it:
// the sysfs size (0 when it cannot tell), capped at kCacheBytesPerCpu per CPU
// that shares it. A virtual machine reports the host socket's whole cache
// (480 MiB seen on a 2-CPU VM), of which its CPUs get a share; server parts
// carry 1.5-5 MiB per core, so 8 MiB is generous.
inline constexpr int64_t kCacheBytesPerCpu = int64_t{8} << 20;
int64_t effective_cache_bytes(int64_t reported, int sharing_cpus);
int cpus_in_list(const std::string& list);  // "0-3,8" -> 5
int64_t cpu_last_level_cache_bytes();

// gloo_comm.cc (LibTorch c10d + Gloo), nccl_comm.cc (NCCL).
std::unique_ptr<Communicator> make_gloo_communicator(const CommWorkerArgs& args);
std::unique_ptr<Communicator> make_nccl_communicator(const CommWorkerArgs& args);
std::string nccl_version();

}  // namespace cellsched::profiler::detail
