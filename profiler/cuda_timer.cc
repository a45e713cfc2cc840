// CUDA device timing: the CUPTI activity API (concurrent-kernel records into
// preallocated 4 MB buffers, forced flush, per-region correlation through
// external correlation ids) and CUDA events as the fallback. With the NCCL
// file, the only translation units that include CUDA headers.
#include <cuda_runtime.h>
#include <cupti.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "core/gpu.h"
#include "core/parse_util.h"
#include "profiler/backends.h"
#include "profiler/cupti_parse.h"

namespace cellsched::profiler::detail {

// CUPTI's kernel record struct of this toolkit.
#if CUPTI_API_VERSION >= 130000
using KernelStruct = CUpti_ActivityKernel10;
#elif CUPTI_API_VERSION >= 18
using KernelStruct = CUpti_ActivityKernel9;
#else
using KernelStruct = CUpti_ActivityKernel4;
#endif

ActivityRecords parse_cupti_buffer(uint8_t* buffer, size_t valid_bytes) {
  ActivityRecords out;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const KernelStruct*>(record);
      KernelRecord r;
      r.start_ns = k->start;
      r.end_ns = k->end;
      r.correlation_id = k->correlationId;
      r.device_id = k->deviceId;
      r.stream_id = k->streamId;
      if (k->name) r.name = k->name;
      out.kernels.push_back(std::move(r));
    } else if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      const auto* c = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (c->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        out.correlations.push_back({c->correlationId, c->externalId});
    }
  }
  return out;
}

namespace {

constexpr size_t kBufferBytes = 4 << 20;
constexpr size_t kPreallocated = 8;

std::string cupti_error(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "CUPTI error " + std::to_string(static_cast<int>(r));
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Process-wide CUPTI state: CUPTI's buffer callbacks carry no user pointer,
// and a process has one activity subscriber anyway.
struct CuptiState {
  std::mutex mu;
  std::vector<uint8_t*> free_buffers;  // GUARDED_BY(mu)
  ActivityRecords pending;             // GUARDED_BY(mu)
};

CuptiState& state() {
  static CuptiState* s = new CuptiState;  // never destroyed: CUPTI may call back at exit
  return *s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  CuptiState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.free_buffers.empty()) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  } else {
    *buffer = s.free_buffers.back();
    s.free_buffers.pop_back();
  }
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  ActivityRecords parsed = parse_cupti_buffer(buffer, valid);  // outside the lock
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) parsed.dropped += dropped;
  CuptiState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.pending.append(std::move(parsed));
  s.free_buffers.push_back(buffer);
}

class CuptiActivityApi : public ActivityApi {
  // CUPTI writes an external-correlation record only in front of a runtime or
  // driver API record (cupti_activity.h, cuptiActivityPushExternalCorrelationId),
  // so those kinds must be on although their records are skipped: with kernels
  // and correlations alone, no kernel maps to a region (seen on an H100,
  // CUDA 13.0). Runtime for cudaLaunchKernel, driver for libraries that launch
  // through cuLaunchKernel (cuBLAS, cuDNN).
  static constexpr CUpti_ActivityKind kKinds[] = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
      CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

 public:
  CuptiActivityApi() {
    {
      CuptiState& s = state();
      std::lock_guard<std::mutex> lock(s.mu);
      while (s.free_buffers.size() < kPreallocated)
        s.free_buffers.push_back(static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes)));
    }
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    for (CUpti_ActivityKind k : kKinds)
      if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(k);
    if (r != CUPTI_SUCCESS) {
      for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
      throw std::runtime_error("CUPTI unavailable: " + cupti_error(r));
    }
  }
  ~CuptiActivityApi() override {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  }
  void push_external_id(uint64_t id) override {
    cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  }
  void pop_external_id() override {
    uint64_t last = 0;
    cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  }
  ActivityRecords flush() override {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // never under our lock
    CuptiState& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    ActivityRecords out = std::move(s.pending);
    s.pending = ActivityRecords{};
    return out;
  }
};

class CudaEventTimer : public DeviceTimer {
 public:
  std::string name() const override { return "cuda_events"; }
  void start(uint64_t id) override {
    auto& e = events_[id];
    check_cuda(cudaEventCreate(&e.first), "cudaEventCreate");
    check_cuda(cudaEventCreate(&e.second), "cudaEventCreate");
    check_cuda(cudaEventRecord(e.first, nullptr), "cudaEventRecord");
  }
  void stop(uint64_t id) override {
    check_cuda(cudaEventRecord(events_.at(id).second, nullptr), "cudaEventRecord");
  }
  std::map<uint64_t, double> collect_ms() override {
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::map<uint64_t, double> out;
    for (auto& [id, e] : events_) {
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, e.first, e.second), "cudaEventElapsedTime");
      out[id] = ms;
      cudaEventDestroy(e.first);
      cudaEventDestroy(e.second);
    }
    events_.clear();
    return out;
  }
  ~CudaEventTimer() override {
    for (auto& [id, e] : events_) {
      cudaEventDestroy(e.first);
      cudaEventDestroy(e.second);
    }
  }

 private:
  std::map<uint64_t, std::pair<cudaEvent_t, cudaEvent_t>> events_;
};

}  // namespace

std::unique_ptr<DeviceTimer> make_cuda_timer(int device, const std::string& kind) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  if (kind == "cupti" || kind == "auto") {
    try {
      return std::make_unique<CuptiTimer>(std::make_unique<CuptiActivityApi>(),
                                          [] { check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); });
    } catch (const std::runtime_error&) {
      if (kind == "cupti") throw;  // asked for CUPTI explicitly
    }
  }
  return std::make_unique<CudaEventTimer>();  // CUPTI taken by another tool, or asked for
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::string cuda_device_type(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "";
  const std::string name = cellsched::detail::lower(prop.name);
  const double gib = prop.totalGlobalMem / double(1 << 30);
  std::string token;
  for (char c : name + " ") {
    if (c == ' ' || c == '-' || c == '_') {
      if (!token.empty() && token != "nvidia" && token != "tesla") {
        if (gib > 60) {
          if (const GpuSpec* g = find_gpu(token + "-80")) return g->name;
        } else if (gib > 24 && gib < 48) {
          if (const GpuSpec* g = find_gpu(token + "-40")) return g->name;
          if (const GpuSpec* g = find_gpu(token + "-32")) return g->name;
        }
        if (const GpuSpec* g = find_gpu(token)) return g->name;
      }
      token.clear();
    } else {
      token += c;
    }
  }
  return "";
}

int64_t cuda_l2_cache_bytes(int index) {
  int bytes = 0;
  if (cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, index) != cudaSuccess) return 0;
  return bytes;
}

std::string cuda_versions() {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  auto v = [](int x) { return std::to_string(x / 1000) + "." + std::to_string(x % 1000 / 10); };
  return "runtime " + v(rt) + ", driver " + v(drv);
}

}  // namespace cellsched::profiler::detail
