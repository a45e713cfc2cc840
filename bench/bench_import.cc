// Import, and import + simulate, of a generated 10,000-row file in each of
// the field's formats (issue 15; target < 1 s each):
//   BM_Import/<format>            load_trace only
//   BM_ImportSimulate/<format>    load_trace + simulate under fifo
// Files are generated once, deterministically, in the temp directory. The
// Crius/Arena file runs on a measured-cell table (--oracle measured), the
// others on Gavel's table; the Philly log (one job in six with a failed
// attempt) with its failures replayed.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/cluster.h"
#include "core/parse_util.h"
#include "core/throughput.h"
#include "core/trace_io.h"
#include "scheduler/engine.h"
#include "scheduler/measured_cells.h"
#include "scheduler/oracle.h"
#include "scheduler/policy.h"

namespace cellsched {
namespace {

constexpr int kRows = 10000;
const char* kFormats[] = {"tiresias", "crius",  "pollux",    "alibaba-pods",
                          "helios",   "alibaba-pai", "philly-raw"};

const ThroughputTable& table() {
  static const ThroughputTable t = load_gavel_throughputs(
      std::string(CELLSCHED_EXAMPLES) + "/data/gavel/simulation_throughputs.json");
  return t;
}

std::string dir() {
  static const std::string d = [] {
    const auto p = std::filesystem::temp_directory_path() / "cellsched_bench_import";
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return d;
}

// Writes the 10k-row file of `format` (and the cell table) once.
std::string generated(const std::string& format) {
  const std::string path = dir() + "/" + format + ".csv";
  if (std::filesystem::exists(path)) return path;
  detail::Rng rng(15);
  std::ofstream f(path);
  const int gpus[] = {1, 1, 1, 1, 2, 4, 8};
  auto pick_gpus = [&] { return gpus[rng.below(7)]; };
  if (format == "tiresias") {
    const char* models[] = {"vgg16", "resnet50", "alexnet", "inception3", "googlenet"};
    f << "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n";
    for (int i = 0; i < kRows; ++i)
      f << i << ',' << pick_gpus() << ',' << i * 60 << ",1000," << models[rng.below(5)] << ','
        << 60 + rng.below(3600) << ",60\n";
  } else if (format == "crius") {
    const char* models[] = {"bert__760M", "moe__1.3B", "moe__690M", "wide_resnet__2B"};
    f << "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n";
    for (int i = 0; i < kRows; ++i) {
      const int t = 1000000 + i * 60;
      f << "00000000-0000-0000-0000-" << 100000000000 + i << ',' << t << ','
        << 100 + rng.below(5000) << ',' << models[rng.below(4)] << ',' << t + 36000 << ",256,"
        << pick_gpus() << ",a40\n";
    }
    std::ofstream c(dir() + "/cells.csv");
    c << "model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s\n";
    for (const char* m : models)
      for (const char* type : {"a40", "a10"})
        for (int g : {1, 2, 4, 8})
          c << m << ",256,amp," << type << ",1," << g << ',' << (type[1] == '4' ? 1.0 : 1.8) / g
            << '\n';
  } else if (format == "pollux") {
    const char* apps[] = {"cifar10", "ncf", "deepspeech2", "bert", "yolov3", "imagenet"};
    const int batch[] = {512, 8192, 320, 24, 64, 800};
    f << "name,time,application,num_replicas,batch_size\n";
    for (int i = 0; i < kRows; ++i) {
      const size_t a = rng.below(6);
      f << apps[a] << '-' << i << ',' << i * 60 << ',' << apps[a] << ',' << pick_gpus() << ','
        << batch[a] << '\n';
    }
  } else if (format == "helios") {
    f << "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,"
         "queue\n";
    for (int i = 0; i < kRows; ++i) {
      const int s = i * 60;  // seconds into 2020-06-09 (within the day: i * 60 < 86400 x 7)
      char at[32];
      std::snprintf(at, sizeof at, "2020-06-%02d %02d:%02d:%02d", 9 + s / 86400, s / 3600 % 24,
                    s / 60 % 60, s % 60);
      f << 1425511 + i << ",u,vc," << pick_gpus() << ",8,1,COMPLETED," << at << ',' << at << ','
        << at << ',' << 60 + rng.below(3600) << ",0\n";
    }
  } else if (format == "alibaba-pai") {
    const char* types[] = {"V100", "P100", "T4", "MISC"};
    for (int i = 0; i < kRows; ++i) {
      const int t = 5000 + i * 60;
      f << "job" << i << ",worker," << pick_gpus() << ".0,Terminated," << t << ".0,"
        << t + 60 + rng.below(3600) << ".0,600.0,29.3," << (rng.below(4) == 0 ? 50 : 100) << ".0,"
        << types[rng.below(4)] << '\n';
    }
  } else if (format == "philly-raw") {
    f << "[\n";
    for (int i = 0; i < kRows; ++i) {
      const int s = i * 60, e = s + 60 + static_cast<int>(rng.below(3600));
      auto at = [](int x) {
        char b[32];
        std::snprintf(b, sizeof b, "2017-10-%02d %02d:%02d:%02d", 1 + x / 86400, x / 3600 % 24,
                      x / 60 % 60, x % 60);
        return std::string(b);
      };
      std::string gpus;
      for (int g = pick_gpus(); g > 0; --g) gpus += std::string(gpus.empty() ? "" : ", ") + "\"gpu" + std::to_string(g) + "\"";
      f << (i ? ",\n" : "") << "{\"status\": \"Pass\", \"vc\": \"v\", \"jobid\": \"application_" << i
        << "\", \"submitted_time\": \"" << at(s) << "\", \"user\": \"u\", \"attempts\": [";
      if (rng.below(6) == 0)
        f << "{\"start_time\": \"" << at(s + 1) << "\", \"end_time\": \"" << at(s + 30)
          << "\", \"detail\": [{\"ip\": \"m1\", \"gpus\": [" << gpus << "]}]}, ";
      f << "{\"start_time\": \"" << at(s + 40) << "\", \"end_time\": \"" << at(e)
        << "\", \"detail\": [{\"ip\": \"m2\", \"gpus\": [" << gpus << "]}]}]}";
    }
    f << "\n]\n";
  } else {
    f << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
         "deletion_time,scheduled_time\n";
    for (int i = 0; i < kRows; ++i) {
      const int g = rng.below(10) == 0 ? 0 : pick_gpus();
      const int t = i * 60;
      f << "openb-pod-" << i << ",8000,16384," << g << ',' << (rng.below(4) == 0 ? 500 : 1000)
        << ',' << (rng.below(3) == 0 ? "V100M16|V100M32" : "") << ",LS,Succeeded," << t << ','
        << t + 120 + rng.below(3600) << ',' << t + 60 << '\n';
    }
  }
  return path;
}

Trace import(const std::string& format) {
  TraceReadOptions o;
  o.table = &table();
  o.format = parse_trace_format(format);
  return load_trace(generated(format), o);
}

void BM_Import(benchmark::State& state) {
  const std::string format = kFormats[state.range(0)];
  state.SetLabel(format);
  generated(format);
  for (auto _ : state) benchmark::DoNotOptimize(import(format).jobs.size());
  state.counters["rows"] = kRows;
}

void BM_ImportSimulate(benchmark::State& state) {
  const std::string format = kFormats[state.range(0)];
  state.SetLabel(format + " + fifo");
  generated(format);
  const bool measured = format == "crius";
  const Cluster cluster =
      parse_cluster_shorthand(measured ? "a40:256,a10:256" : "v100:128,v100-32:128,p100:128,k80:128");
  long done = 0;
  for (auto _ : state) {
    const Trace trace = import(format);
    std::unique_ptr<ThroughputOracle> oracle;
    if (measured)
      oracle = std::make_unique<MeasuredCellOracle>(load_measured_cells(dir() + "/cells.csv"), "bench");
    else
      oracle = std::make_unique<TableOracle>(table());
    oracle = std::make_unique<TypeRestrictedOracle>(std::move(oracle));
    auto policy = make_policy("fifo");
    SimOptions so;
    so.replay_failures = format == "philly-raw";
    const RunRecord run = simulate(trace, cluster, *oracle, *policy, so);
    done = run.metrics.completed;
  }
  state.counters["jobs_done"] = static_cast<double>(done);
}

BENCHMARK(BM_Import)->DenseRange(0, 6)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ImportSimulate)->DenseRange(0, 6)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cellsched

BENCHMARK_MAIN();
