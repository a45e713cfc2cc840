// `cellsched trace generate|inspect|convert`, `cellsched cluster`, `cellsched gpus`.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/report.h"
#include "core/cluster.h"
#include "core/error.h"
#include "core/gpu.h"
#include "core/throughput.h"
#include "core/trace_io.h"

namespace cellsched::cli {
namespace {

// Writes to `path`, or stdout for "-"; a file appears only when complete.
// A device or pipe (/dev/null, a FIFO) is written in place: renaming onto it
// would replace /dev/null with a plain file. A link is followed, not replaced.
void write_csv(const Trace& trace, const std::string& given) {
  namespace fs = std::filesystem;
  if (given == "-") {
    write_trace_csv(trace, std::cout);
    return;
  }
  std::error_code ec;
  const fs::file_status st = fs::status(given, ec);
  if (fs::is_directory(st)) throw InputError(given + ": is a folder (-o names the CSV file)");
  if (fs::is_regular_file(st) || !fs::exists(st)) check_out_file("output", given);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    std::ofstream f(given);
    if (!f) throw InputError(given + ": cannot write");
    write_trace_csv(trace, f);
    if (!f.flush()) throw InputError(given + ": write failed");
    return;
  }
  std::string path = given;
  if (fs::is_symlink(fs::symlink_status(given, ec))) {
    const fs::path target = fs::weakly_canonical(given, ec);
    if (!ec && !target.empty()) path = target.string();
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) throw InputError(path + ": cannot write");
    write_trace_csv(trace, f);
    if (!f) throw InputError(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw InputError(path + ": cannot write");
}

int trace_generate(const std::vector<std::string>& args) {
  po::options_description opt("trace generate options");
  std::string throughputs, out;
  GenerateOptions g;
  opt.add_options()
      ("jobs", po::value(&g.jobs)->default_value(100), "number of jobs")
      ("interarrival", po::value(&g.mean_interarrival_s)->default_value(60), "mean inter-arrival time, seconds, up to 1e7 (Poisson arrivals; 0: all at t=0)")
      ("seed", seed_value(&g.seed), "random seed (same seed, same trace)")
      ("reference-gpu", po::value(&g.reference_gpu)->default_value("v100"), "GPU type whose throughput turns durations into iterations")
      ("throughputs", po::value(&throughputs)->default_value(default_throughputs()), "throughput table the job types come from")
      ("output,o", po::value(&out)->default_value("-"), "output CSV (- for stdout)");
  po::variables_map vm;
  if (!parse("cellsched trace generate [options]", args, opt, {}, vm)) return 0;
  check_flag_range("jobs", static_cast<double>(g.jobs), 1, kMaxGeneratedJobs);
  check_flag_range("interarrival", g.mean_interarrival_s, 0, 1e7);
  g.reference_gpu = reference_gpu_flag(g.reference_gpu);
  const ThroughputTable table = load_gavel_throughputs(throughputs);
  const Trace trace = generate_trace(table, g);
  // Each flag within its range, their product can pass the 1e12 s every
  // reader holds arrivals to: a trace no verb could read back (exit 0).
  if (!trace.jobs.empty() && trace.jobs.back().arrival_s > 1e12)
    throw InputError("--jobs " + std::to_string(g.jobs) + " at --interarrival " + num(g.mean_interarrival_s) +
                     " s: the last job would arrive after 1e12 s, past what a trace may span; fewer jobs or a "
                     "shorter --interarrival");
  write_csv(trace, out);
  if (out != "-") std::cerr << "wrote " << count_of(static_cast<long>(g.jobs), "job") << " to " << out << "\n";
  return 0;
}

struct ReadArgs {
  std::string path, format, throughputs, ref_gpu, model_map, gpu_map;
  uint64_t seed = 0;
  long limit = -1;
};

void add_read_options(po::options_description& opt, ReadArgs& r) {
  opt.add_options()
      ("trace", po::value(&r.path)->required(), "trace file")
      ("format", po::value(&r.format)->default_value("auto"), kTraceFormatHelp)
      ("throughputs", po::value(&r.throughputs)->default_value(default_throughputs()), "throughput table (Philly import)")
      ("seed", seed_value(&r.seed), "seed for the Philly import's job types")
      ("reference-gpu", po::value(&r.ref_gpu)->default_value("v100"), "reference GPU type (Philly import)")
      ("limit", po::value(&r.limit)->default_value(-1), "read only the first N jobs, by arrival (-1: all)")
      ("model-map", po::value(&r.model_map), kModelMapHelp)
      ("gpu-map", po::value(&r.gpu_map), kGpuMapHelp);
}

Trace read(const ReadArgs& r, ThroughputTable& table) {
  TraceReadOptions ro;
  ro.format = parse_trace_format(r.format);
  ro.seed = r.seed;
  ro.reference_gpu = reference_gpu_flag(r.ref_gpu);
  check_limit(r.limit);
  ro.limit = r.limit;
  if (!r.model_map.empty()) ro.model_map = parse_name_map(r.model_map, "--model-map");
  if (!r.gpu_map.empty()) ro.gpu_map = parse_name_map(r.gpu_map, "--gpu-map");
  table = load_gavel_throughputs(r.throughputs);
  ro.table = &table;
  return load_trace(r.path, ro);
}

int trace_inspect(const std::vector<std::string>& args) {
  po::options_description opt("trace inspect options");
  ReadArgs r;
  add_read_options(opt, r);
  opt.add_options()("json", "print JSON");
  po::positional_options_description pos;
  pos.add("trace", 1);
  po::variables_map vm;
  if (!parse("cellsched trace inspect TRACE [options]", args, opt, pos, vm)) return 0;
  ThroughputTable table;
  const Trace trace = read(r, table);
  const TraceSummary s = summarize(trace);
  if (vm.count("json")) {
    nlohmann::json j = {{"trace", trace.name}, {"format", trace.format}, {"jobs", s.jobs},
                        {"first_arrival_s", s.first_arrival_s}, {"last_arrival_s", s.last_arrival_s},
                        {"mean_interarrival_s", s.mean_interarrival_s},
                        {"total_gpu_iterations", s.total_gpu_iterations},
                        {"mean_duration_s", nullptr}};
    // A count is an integer where it is whole (imports can make fractional
    // iterations); no duration in the trace is null, not -1.
    j["total_gpu_iterations"] = json_count(s.total_gpu_iterations);
    if (s.mean_duration_hint_s >= 0) j["mean_duration_s"] = s.mean_duration_hint_s;
    nlohmann::json hist = nlohmann::json::object();
    for (const auto& [g, c] : s.gpus_histogram) hist[std::to_string(g)] = c;
    j["gpus"] = hist;
    nlohmann::json types = nlohmann::json::object();
    for (const auto& [t, c] : s.job_types) types[t] = c;
    j["job_types"] = types;
    nlohmann::json notes = nlohmann::json::array();
    for (const auto& [what, n] : trace.import_notes) notes.push_back({{"what", what}, {"count", n}});
    j["import_notes"] = notes;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "trace          " << trace.name << " (" << trace.format << ")\n"
            << "jobs           " << s.jobs << "\n"
            << "arrivals       " << fixed(s.first_arrival_s, 0) << " s .. "
            << fixed(s.last_arrival_s, 0) << " s (" << hours(s.last_arrival_s - s.first_arrival_s)
            << " h), mean gap " << fixed(s.mean_interarrival_s, 1) << " s\n";
  if (s.mean_duration_hint_s >= 0)
    std::cout << "mean duration  " << fixed(s.mean_duration_hint_s, 1) << " s\n";
  std::cout << "\n";
  Table gt({"GPUs", "jobs", "share"});
  for (const auto& [g, c] : s.gpus_histogram)
    gt.add({std::to_string(g), std::to_string(c), fixed(100.0 * c / std::max(1L, s.jobs), 1) + "%"});
  gt.print(std::cout);
  std::cout << "\n";
  Table tt({"job type", "jobs"});
  for (const auto& [t, c] : s.job_types) tt.add({t, std::to_string(c)});
  tt.print(std::cout);
  if (!trace.import_notes.empty()) {
    std::cout << "\n";
    Table nt({"import (read, mapped, skipped)", "rows"});
    for (const auto& [what, n] : trace.import_notes) nt.add({what, std::to_string(n)});
    nt.print(std::cout);
  }
  return 0;
}

int trace_convert(const std::vector<std::string>& args) {
  po::options_description opt("trace convert options");
  ReadArgs r;
  std::string out;
  add_read_options(opt, r);
  opt.add_options()("output,o", po::value(&out)->default_value("-"), "output CSV (- for stdout)");
  po::positional_options_description pos;
  pos.add("trace", 1);
  po::variables_map vm;
  if (!parse("cellsched trace convert TRACE -o OUT.csv [options]", args, opt, pos, vm)) return 0;
  std::error_code ec;  // -o TRACE wrote the converted CSV over the trace it read
  if (out != "-" && std::filesystem::equivalent(out, r.path, ec))
    throw InputError("-o " + out + " is the trace being converted: write the CSV elsewhere");
  ThroughputTable table;
  const Trace trace = read(r, table);
  write_csv(trace, out);
  if (out != "-") std::cerr << "wrote " << count_of(static_cast<long>(trace.jobs.size()), "job") << " to " << out << "\n";
  return 0;
}

}  // namespace

int cmd_trace(const std::vector<std::string>& args) {
  const std::string sub = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  if (sub == "generate") return trace_generate(rest);
  if (sub == "inspect") return trace_inspect(rest);
  if (sub == "convert") return trace_convert(rest);
  if (sub == "--help" || sub == "-h") {
    std::cout << "usage: cellsched trace generate|inspect|convert [options] (each takes --help)\n"
                 "  generate  a Gavel-style synthetic trace (job types, sizes, Poisson arrivals)\n"
                 "  inspect   what a trace file holds: format, jobs, sizes, arrivals, import notes\n"
                 "  convert   any supported trace into cellsched's own CSV\n";
    return 0;
  }
  if (sub.empty()) throw InputError("usage: cellsched trace generate|inspect|convert [options]");
  throw InputError("unknown subcommand '" + sub + "' (usage: cellsched trace generate|inspect|convert [options])");
}

int cmd_cluster(const std::vector<std::string>& args) {
  po::options_description opt("cluster options");
  std::string spec, misc, gpu_map;
  opt.add_options()
      ("cluster", po::value(&spec)->required(), "YAML node list, PAI 2020 machine CSV, Alibaba 2023 node CSV, or shorthand")
      ("gpu-map", po::value(&gpu_map), kGpuMapHelp)
      ("yaml", "print the cluster as a YAML node list")
      ("json", "print JSON");
  po::positional_options_description pos;
  pos.add("cluster", 1);
  po::variables_map vm;
  if (!parse("cellsched cluster SPEC [--yaml|--json]", args, opt, pos, vm)) return 0;
  const auto map = gpu_map.empty() ? std::map<std::string, std::string>{} : parse_name_map(gpu_map, "--gpu-map");
  const Cluster c = load_cluster(spec, map);
  if (vm.count("yaml") && vm.count("json")) throw InputError("--yaml and --json contradict each other");
  // Here the map applies to the cluster alone: a key it has no machine of is
  // a typo ("MSIC") or a case slip ("g2"), which was ignored.
  for (const auto& [key, type] : map)
    if (std::find(c.gpu_models.begin(), c.gpu_models.end(), key) == c.gpu_models.end()) {
      std::string models;
      for (const std::string& m : c.gpu_models) models += (models.empty() ? "" : ", ") + m;
      throw InputError("--gpu-map " + key + "=" + type + ": " + spec + " has no GPU machine of model '" + key + "'" +
                       (models.empty() ? " (a map applies to PAI and Alibaba machine lists)"
                                       : " (its models: " + models + "; names are matched exactly)"));
    }
  for (const std::string& n : c.notes) std::cerr << "note: " << spec << ": " << n << "\n";
  if (vm.count("yaml")) {
    std::cout << cluster_to_yaml(c);
    return 0;
  }
  if (vm.count("json")) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const Node& n : c.nodes)
      nodes.push_back({{"name", n.name}, {"address", n.address}, {"gpu_type", n.gpu_type}, {"gpus", n.gpus}});
    std::cout << nlohmann::json{{"name", c.name}, {"gpus", c.total_gpus()}, {"nodes", nodes}, {"notes", c.notes}}.dump(2)
              << "\n";
    return 0;
  }
  std::cout << "cluster " << c.name << ": " << count_of(static_cast<long>(c.nodes.size()), "node") << ", "
            << count_of(c.total_gpus(), "GPU") << "\n\n";
  Table t({"GPU type", "nodes", "GPUs"});
  for (const std::string& type : c.gpu_types()) {
    long nodes = 0;
    for (const Node& n : c.nodes) nodes += n.gpu_type == type;
    t.add({type, std::to_string(nodes), std::to_string(c.gpus_of_type(type))});
  }
  t.print(std::cout);
  return 0;
}

int cmd_gpus(const std::vector<std::string>& args) {
  po::options_description opt("gpus options");
  opt.add_options()("json", "print JSON");
  po::variables_map vm;
  if (!parse("cellsched gpus [--json]", args, opt, {}, vm)) return 0;
  if (vm.count("json")) {
    nlohmann::json a = nlohmann::json::array();
    for (const GpuSpec& g : gpu_catalogue())
      a.push_back({{"name", g.name}, {"description", g.description}, {"fp32_tflops", g.fp32_tflops},
                   {"fp16_tflops", g.fp16_tflops}, {"memory_gib", g.memory_gib},
                   {"memory_gbps", g.memory_gbps}, {"nvlink_gbps", g.nvlink_gbps},
                   {"pcie_gbps", g.pcie_gbps}, {"bf16", g.bf16}, {"year", g.year},
                   {"tf32_tflops", g.tf32_tflops}, {"cuda_fp16_tflops", g.cuda_fp16_tflops},
                   {"sm_count", g.sm_count}, {"arch", g.arch}, {"nic_gbps", g.nic_gbps},
                   {"nvlink_peers", g.nvlink_peers}});
    std::cout << a.dump(2) << "\n";
    return 0;
  }
  Table t({"type", "FP32 TF", "FP16 TF", "mem GiB", "mem GB/s", "NVLink GB/s", "PCIe GB/s", "BF16",
           "year", "description"});
  for (const GpuSpec& g : gpu_catalogue())
    t.add({g.name, fixed(g.fp32_tflops, 1), fixed(g.fp16_tflops, 1), fixed(g.memory_gib, 0),
           fixed(g.memory_gbps, 0), fixed(g.nvlink_gbps, 0), fixed(g.pcie_gbps, 0),
           g.bf16 ? "yes" : "no", std::to_string(g.year), g.description});
  t.print(std::cout);
  return 0;
}

}  // namespace cellsched::cli
