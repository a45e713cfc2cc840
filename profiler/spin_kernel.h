// A one-thread kernel in PTX that spins n times: a GPU region whose length
// the caller chooses, for checking device timers (test_cuda_profiler and
// cellsched-gpu-smoke). Loaded with cudaLibraryLoadData, so no nvcc step;
// JIT-compiled for the device at its first launch (80 ms on an H100: launch
// once before timing). Checked with ptxas -arch=sm_90.
#pragma once

#include <cuda_runtime.h>

namespace cellsched::profiler {

inline constexpr char kSpinPtx[] = R"(.version 7.0
.target sm_52
.address_size 64
.visible .entry spin(.param .u64 out, .param .u32 n)
{
  .reg .u64 %rd<3>;
  .reg .u32 %r<4>;
  .reg .pred %p;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, 0;
  mov.u32 %r3, 0;
LOOP:
  add.u32 %r3, %r3, %r2;
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p, %r2, %r1;
  @%p bra LOOP;
  cvta.to.global.u64 %rd2, %rd1;
  st.global.u32 [%rd2], %r3;
  ret;
}
)";

// Launches the kernel for n spins on the current device's default stream,
// loading it (and its one-word output buffer) on the first call.
inline cudaError_t launch_spin(unsigned n) {
  static cudaKernel_t kernel = nullptr;
  static unsigned* out = nullptr;
  if (!kernel) {
    cudaLibrary_t lib{};
    if (cudaError_t e = cudaLibraryLoadData(&lib, kSpinPtx, nullptr, nullptr, 0, nullptr, nullptr, 0)) return e;
    if (cudaError_t e = cudaMalloc(&out, sizeof(unsigned))) return e;
    if (cudaError_t e = cudaLibraryGetKernel(&kernel, lib, "spin")) return e;
  }
  void* args[] = {&out, &n};
  return cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), args, 0, nullptr);
}

}  // namespace cellsched::profiler
