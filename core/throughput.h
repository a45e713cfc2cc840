// Measured throughput tables (Gavel's JSON).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cellsched {

// Isolated steps/s of a job type at a scale factor (number of workers, i.e.
// GPUs) on a worker type. The value is the whole job's steps/s, as in Gavel.
class ThroughputTable {
 public:
  ThroughputTable() = default;
  // Copies re-point the index's unconsolidated links at their own entries.
  ThroughputTable(const ThroughputTable& other);
  ThroughputTable& operator=(const ThroughputTable& other);
  ThroughputTable(ThroughputTable&&) noexcept = default;
  ThroughputTable& operator=(ThroughputTable&&) noexcept = default;
  // gpu_type as in the file ("v100", "k80_unconsolidated"), job_type as in
  // traces ("ResNet-50 (batch size 64)").
  void set(const std::string& gpu_type, const std::string& job_type, int scale_factor,
           double steps_per_s);
  std::optional<double> get(const std::string& gpu_type, const std::string& job_type,
                            int scale_factor) const;

  std::vector<std::string> gpu_types() const;   // sorted
  std::vector<std::string> job_types() const;   // sorted, distinct
  // Scale factors measured for a job type on a GPU type, ascending.
  std::vector<int> scale_factors(const std::string& gpu_type, const std::string& job_type) const;
  size_t size() const { return table_.size(); }

  // Fast access for the simulators' hot path: one GPU type's figures by job
  // type, (scale factor, steps/s) ascending, and its "_unconsolidated"
  // sibling when the table has one. Null when the type is unknown.
  using Row = std::vector<std::pair<int, double>>;
  struct TypeIndex {
    std::unordered_map<std::string, Row> jobs;
    const TypeIndex* unconsolidated = nullptr;
  };
  const TypeIndex* type_index(const std::string& gpu_type) const {
    const auto it = index_.find(gpu_type);
    return it == index_.end() ? nullptr : &it->second;
  }
  std::string source;  // file it came from

 private:
  std::map<std::tuple<std::string, std::string, int>, double> table_;
  // The same figures hashed by GPU type, then job type: (scale factor,
  // steps/s) ascending. get() and scale_factors() are on the simulators' hot
  // path and must not build keys (string copies) per call.
  std::unordered_map<std::string, TypeIndex> index_;
  void link(const std::string& gpu_type);
};

// Reads Gavel's `simulation_throughputs.json` / `physical_cluster_throughputs.json`:
// `{worker_type: {"('<JobType>', <sf>)": {"null": steps/s, ...pairs}}}`.
// Only the isolated ("null") figures are kept. Throws InputError on bad input.
ThroughputTable load_gavel_throughputs(const std::string& path);

// The model part of a Gavel job type: "ResNet-50 (batch size 64)" -> "ResNet-50",
// and its batch size (64); batch 0 when the name has none.
std::pair<std::string, int> split_job_type(const std::string& job_type);

}  // namespace cellsched
