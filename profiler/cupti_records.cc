#include "profiler/cupti_records.h"

#include <algorithm>
#include <unordered_map>

namespace cellsched::profiler {

void ActivityRecords::append(ActivityRecords&& o) {
  kernels.insert(kernels.end(), std::make_move_iterator(o.kernels.begin()),
                 std::make_move_iterator(o.kernels.end()));
  correlations.insert(correlations.end(), o.correlations.begin(), o.correlations.end());
  dropped += o.dropped;
}

std::map<uint64_t, double> kernel_ms_by_external_id(const ActivityRecords& records) {
  std::unordered_map<uint32_t, uint64_t> external;  // correlation id -> external id
  for (const auto& c : records.correlations) external[c.correlation_id] = c.external_id;
  std::map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> intervals;
  for (const auto& k : records.kernels) {
    const auto it = external.find(k.correlation_id);
    if (it == external.end() || k.end_ns <= k.start_ns) continue;
    intervals[it->second].emplace_back(k.start_ns, k.end_ns);
  }
  std::map<uint64_t, double> out;
  for (auto& [id, v] : intervals) {
    std::sort(v.begin(), v.end());
    uint64_t busy = 0, cur_start = v[0].first, cur_end = v[0].second;
    for (size_t i = 1; i < v.size(); ++i) {
      if (v[i].first > cur_end) {
        busy += cur_end - cur_start;
        cur_start = v[i].first;
        cur_end = v[i].second;
      } else {
        cur_end = std::max(cur_end, v[i].second);
      }
    }
    busy += cur_end - cur_start;
    out[id] = busy / 1e6;
  }
  return out;
}

CuptiTimer::CuptiTimer(std::unique_ptr<ActivityApi> api, std::function<void()> synchronize)
    : api_(std::move(api)), synchronize_(std::move(synchronize)) {}

void CuptiTimer::start(uint64_t id) { api_->push_external_id(id); }

void CuptiTimer::stop(uint64_t) { api_->pop_external_id(); }

std::map<uint64_t, double> CuptiTimer::collect_ms() {
  if (synchronize_) synchronize_();
  const ActivityRecords records = api_->flush();
  dropped_ += records.dropped;
  return kernel_ms_by_external_id(records);
}

}  // namespace cellsched::profiler
