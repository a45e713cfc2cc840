// A throughput oracle with hand-set per-worker rates, for hand-computed tests.
#pragma once

#include <map>
#include <string>

#include "scheduler/oracle.h"

namespace cellsched::testing {

// throughput = workers x rate[type] x (consolidated ? 1 : spread factor of the type).
class FakeOracle : public ThroughputOracle {
 public:
  std::map<std::string, double> rate;
  double spread_factor = 0.5;
  std::map<std::string, double> type_spread_factor;  // per type, overrides spread_factor
  double throughput(const Job&, const std::string& type, int workers,
                    bool consolidated) const override {
    auto it = rate.find(type);
    if (it == rate.end()) return 0;
    auto f = type_spread_factor.find(type);
    const double spread = f == type_spread_factor.end() ? spread_factor : f->second;
    return workers * it->second * (consolidated || workers == 1 ? 1.0 : spread);
  }
  std::string source() const override { return "fake"; }
};

inline Job make_job(int64_t id, double arrival, int gpus, double iterations,
                    std::string type = "toy") {
  Job j;
  j.id = id;
  j.arrival_s = arrival;
  j.gpus = gpus;
  j.total_iterations = iterations;
  j.job_type = std::move(type);
  return j;
}

}  // namespace cellsched::testing
