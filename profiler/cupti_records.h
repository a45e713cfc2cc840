// CUPTI activity records as plain data, the activity API behind a small
// interface, and the timer built on them (libkineto's seam): the logic that
// turns kernel records into per-region times is tested with synthesized
// records on machines without a GPU. No CUDA header here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "profiler/device_timer.h"

namespace cellsched::profiler {

// A CONCURRENT_KERNEL activity record (times in ns, CUPTI's clock).
struct KernelRecord {
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t correlation_id = 0;  // of the runtime API call that launched it
  uint32_t device_id = 0, stream_id = 0;
  std::string name;
};

// An EXTERNAL_CORRELATION record: API call `correlation_id` was made while
// `external_id` was pushed.
struct ExternalCorrelationRecord {
  uint32_t correlation_id = 0;
  uint64_t external_id = 0;
};

struct ActivityRecords {
  std::vector<KernelRecord> kernels;
  std::vector<ExternalCorrelationRecord> correlations;
  uint64_t dropped = 0;  // records CUPTI reported dropped (buffers too small)
  void append(ActivityRecords&& other);
};

// Per external id, the busy time of its kernels in ms: the union of their
// [start, end) intervals, so kernels that overlap on concurrent streams are
// not counted twice. Kernels without an external id are ignored.
std::map<uint64_t, double> kernel_ms_by_external_id(const ActivityRecords& records);

// The part of CUPTI the timer uses. The real one is CuptiActivityApi
// (cuda_timer.cc); tests use a fake that replays recorded records.
class ActivityApi {
 public:
  virtual ~ActivityApi() = default;
  virtual void push_external_id(uint64_t id) = 0;
  virtual void pop_external_id() = 0;
  // Forced flush of every buffer; returns the records parsed since the last call.
  virtual ActivityRecords flush() = 0;
};

// DeviceTimer over an ActivityApi. `synchronize` waits for the device
// (cudaDeviceSynchronize) before the flush.
class CuptiTimer : public DeviceTimer {
 public:
  CuptiTimer(std::unique_ptr<ActivityApi> api, std::function<void()> synchronize);
  std::string name() const override { return "cupti"; }
  void start(uint64_t id) override;
  void stop(uint64_t id) override;
  std::map<uint64_t, double> collect_ms() override;
  uint64_t dropped() const { return dropped_; }

 private:
  std::unique_ptr<ActivityApi> api_;
  std::function<void()> synchronize_;
  uint64_t dropped_ = 0;
};

}  // namespace cellsched::profiler
