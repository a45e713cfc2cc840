// Trace readers, writer and the synthetic generator.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/throughput.h"

namespace cellsched {

enum class TraceFormat {
  Auto, Gavel, GavelLegacy, Philly, Csv, Tiresias, Crius, Pollux, AlibabaPods, PhillyRaw,
  AlibabaPai, Helios
};

// "auto", "gavel", "gavel-legacy", "philly", "csv", "tiresias", "crius",
// "pollux", "alibaba-pods", "philly-raw", "alibaba-pai", "helios"; throws
// InputError otherwise.
TraceFormat parse_trace_format(const std::string& name);
std::string to_string(TraceFormat format);

struct TraceReadOptions {
  TraceFormat format = TraceFormat::Auto;  // Auto: by extension and first line
  // Philly import: job types are drawn from this table (uniformly among the
  // types measured at the job's scale factor, capped at the table's largest),
  // deterministically from `seed`; iterations = duration x steps/s on
  // `reference_gpu` at that scale factor, as Gavel builds its traces.
  const ThroughputTable* table = nullptr;
  std::string reference_gpu = "v100";
  uint64_t seed = 0;
  long limit = -1;  // read at most this many jobs (< 0: all)
  // Philly import onto models of the zoo instead of Gavel job types (used
  // when not empty): each job gets a (model, global batch) drawn with these
  // weights from `seed`, GPUs = num_gpus rounded down to a power of two (at
  // most 16), and iterations = duration x model_rate(model, batch, gpus), the
  // steps/s on the reference GPU type (from the cell estimates). job_type is
  // "<model>@<batch>".
  struct ModelShare {
    std::string model;
    int batch = 0;
    double weight = 1;
  };
  std::vector<ModelShare> model_mix;
  std::function<double(const std::string& model, int batch, int gpus)> model_rate;
  // Tiresias model names / Pollux applications -> job types of the table
  // ("vgg16" -> "ResNet-50 (batch size 32)"); entries override the defaults
  // documented in docs/formats.md. A value "model@batch" names a zoo model.
  std::map<std::string, std::string> model_map;
  // Alibaba GPU model names -> catalogue types ("G2" -> "t4"); entries
  // override the defaults (T4, P100, V100M16, V100M32, A10).
  std::map<std::string, std::string> gpu_map;
};

// "a=b,c=d" -> {a: b, c: d} (keys and values trimmed; a value may hold
// spaces and parentheses but no comma); throws InputError naming `option`.
std::map<std::string, std::string> parse_name_map(const std::string& spec, const std::string& option);

// "gpt-350m@32:0.5,moe-1.3b@16:0.3,wrn-50-2@64" (weight defaults to 1) ->
// shares; throws InputError on a bad item.
std::vector<TraceReadOptions::ModelShare> parse_model_mix(const std::string& spec);

// Reads a trace; throws InputError with `file:line:` on bad input.
Trace load_trace(const std::string& path, const TraceReadOptions& options = {});

// cellsched's own CSV format (documented in docs/formats.md):
// header `id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command`
// command is a space-joined argv in one quoted field (may be empty).
void write_trace_csv(const Trace& trace, std::ostream& out);

// The most jobs one generated trace holds (Philly's whole trace has 82,247).
inline constexpr long kMaxGeneratedJobs = 10'000'000;

struct GenerateOptions {
  long jobs = 100;                 // number of jobs
  double mean_interarrival_s = 60; // Poisson arrivals (exponential gaps); 0 = all at t=0
  uint64_t seed = 0;
  std::string reference_gpu = "v100";
  // Durations: 10^U(1.5,3) minutes with probability 0.8, else 10^U(3,4) minutes.
  // GPUs: 1/2/4/8 with probabilities 0.70/0.10/0.15/0.05. Job type uniform
  // among the table's types measured at that scale factor on reference_gpu.
};

// Gavel-style synthetic trace; seeded and reproducible (same options -> same trace).
Trace generate_trace(const ThroughputTable& table, const GenerateOptions& options);

struct TraceSummary {
  long jobs = 0;
  double first_arrival_s = 0, last_arrival_s = 0;
  double mean_interarrival_s = 0;
  double total_gpu_iterations = 0;
  std::vector<std::pair<int, long>> gpus_histogram;       // (gpus, count), ascending
  std::vector<std::pair<std::string, long>> job_types;    // (type, count), descending count
  double mean_duration_hint_s = -1;                       // where durations are known
};
TraceSummary summarize(const Trace& trace);

}  // namespace cellsched
