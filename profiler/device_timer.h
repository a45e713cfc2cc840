// Device-side timing of marked regions (a layer's forward or backward):
// CUPTI kernel records correlated to the region, or CUDA events around it.
// No CUDA header here: implementations live in cuda_timer.cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace cellsched::profiler {

class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  virtual std::string name() const = 0;  // "cupti", "cuda_events"
  // Marks work launched between start(id) and stop(id) as region `id` (> 0).
  virtual void start(uint64_t id) = 0;
  virtual void stop(uint64_t id) = 0;
  // Waits for the device, then returns each finished region's time in ms and
  // forgets them. CUPTI: union of the region's kernel intervals; events:
  // elapsed time between the two events.
  virtual std::map<uint64_t, double> collect_ms() = 0;
};

}  // namespace cellsched::profiler
