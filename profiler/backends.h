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
// backends.cc: one instance of the CPU's last-level cache, from sysfs (0 when it cannot tell).
int64_t cpu_last_level_cache_bytes();

// gloo_comm.cc (LibTorch c10d + Gloo), nccl_comm.cc (NCCL).
std::unique_ptr<Communicator> make_gloo_communicator(const CommWorkerArgs& args);
std::unique_ptr<Communicator> make_nccl_communicator(const CommWorkerArgs& args);
std::string nccl_version();

}  // namespace cellsched::profiler::detail
