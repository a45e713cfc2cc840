// The CUDA path. Device-free: a raw CUPTI activity buffer synthesized with
// cupti.h's record structs goes through the same parser the buffer-completed
// callback uses. With a device (tools/gpu-check.sh): CUPTI and CUDA-event
// timers around a real kernel, and NCCL between processes. Without a device
// those skip.
#include <cuda_runtime.h>
#include <cupti.h>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "profiler/backends.h"
#include "profiler/comm.h"
#include "profiler/cupti_parse.h"
#include "profiler/spin_kernel.h"

namespace cellsched::profiler {
namespace {

#if CUPTI_API_VERSION >= 130000
using KernelStruct = CUpti_ActivityKernel10;
#elif CUPTI_API_VERSION >= 18
using KernelStruct = CUpti_ActivityKernel9;
#else
using KernelStruct = CUpti_ActivityKernel4;
#endif

template <class T>
void put(std::vector<uint8_t>& buf, const T& rec) {
  const size_t at = buf.size();
  buf.resize(at + ((sizeof(T) + 7) / 8) * 8, 0);
  std::memcpy(buf.data() + at, &rec, sizeof(T));
}

TEST(CuptiBuffer, SynthesizedRecordsParseAndCorrelate) {
  std::vector<uint8_t> buf;
  static const char kName[] = "ampere_sgemm_128x64_nn";
  for (uint32_t i = 0; i < 3; ++i) {
    KernelStruct k;
    std::memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 1000000 * (i + 1);
    k.end = k.start + 250000;
    k.correlationId = 40 + i;
    k.deviceId = 0;
    k.streamId = 7;
    k.name = kName;
    put(buf, k);
    CUpti_ActivityExternalCorrelation c;
    std::memset(&c, 0, sizeof c);
    c.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    c.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    c.externalId = i < 2 ? 5 : 6;  // two kernels in region 5, one in region 6
    c.correlationId = 40 + i;
    put(buf, c);
  }
  const ActivityRecords r = detail::parse_cupti_buffer(buf.data(), buf.size());
  ASSERT_EQ(r.kernels.size(), 3u);
  ASSERT_EQ(r.correlations.size(), 3u);
  EXPECT_EQ(r.kernels[1].name, kName);
  EXPECT_EQ(r.kernels[2].stream_id, 7u);
  const auto ms = kernel_ms_by_external_id(r);
  EXPECT_DOUBLE_EQ(ms.at(5), 0.5);
  EXPECT_DOUBLE_EQ(ms.at(6), 0.25);
}

bool have_device() { return detail::cuda_device_count() > 0; }

void check_timer(const std::string& kind) {
  auto timer = detail::make_cuda_timer(0, kind);
  ASSERT_TRUE(timer);
  // Warm-up outside the regions: the first launch JIT-compiles the PTX, which
  // took 80 ms on an H100 (longer than 1e7 spins).
  ASSERT_EQ(launch_spin(10), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  timer->start(1);
  ASSERT_EQ(launch_spin(1000), cudaSuccess);
  timer->stop(1);
  timer->start(2);
  ASSERT_EQ(launch_spin(10000000), cudaSuccess);
  timer->stop(2);
  const auto ms = timer->collect_ms();
  ASSERT_EQ(ms.count(1), 1u) << timer->name();
  ASSERT_EQ(ms.count(2), 1u) << timer->name();
  EXPECT_GT(ms.at(1), 0);
  EXPECT_GT(ms.at(2), ms.at(1)) << timer->name();
  std::printf("%s: short kernel %.4f ms, long kernel %.4f ms\n", timer->name().c_str(), ms.at(1), ms.at(2));
}

TEST(CudaDevice, CudaEventsTimeARealKernel) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  check_timer("cuda_events");
}

TEST(CudaDevice, CuptiTimesARealKernel) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  check_timer("cupti");
}

TEST(CudaDevice, DeviceTypeIsInTheCatalogue) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  std::printf("device 0: %s (%s)\n", detail::cuda_device_type(0).c_str(), detail::cuda_versions().c_str());
  EXPECT_FALSE(detail::cuda_device_type(0).empty());
}

TEST(CudaDevice, NcclBetweenProcesses) {
  const int n = detail::cuda_device_count();
  if (n == 0) GTEST_SKIP() << "no CUDA device";
  CommOptions o;
  o.backend = "nccl";
  o.ranks = n >= 2 ? 2 : 1;
  o.sizes = {1 << 10, 1 << 20, 64 << 20};
  o.repetitions = 5;
  o.worker_command = {CELLSCHED_BINARY, "profile", "comm-worker"};
  o.timeout_s = 300;
  const ProfileRun r = profile_comm(o);
  ASSERT_EQ(r.comms.size(), 5u * 3);
  for (const auto& c : r.comms) {
    EXPECT_GT(c.time_us, 0) << c.collective;
    std::printf("%-14s %10ld B %10.1f us busbw %8.2f GB/s\n", c.collective.c_str(), long(c.bytes), c.time_us, c.busbw_gbps);
  }
}

}  // namespace
}  // namespace cellsched::profiler
