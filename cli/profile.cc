// `cellsched profile compute|comm|list|show|export` (and the hidden
// `comm-worker`, the process `profile comm` launches once per rank).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/report.h"
#include "core/error.h"
#include "core/gpu.h"
#include "core/model.h"
#include "core/parse_util.h"
#include "core/self_exe.h"
#include "db/profile_store.h"
#include "db/store.h"
#include "profiler/comm.h"
#include "profiler/compute.h"

namespace cellsched::cli {
namespace {

// `unique`: a value given twice is refused (it was measured and stored twice).
std::vector<int> int_list(const std::string& opt, const std::string& text, bool unique = false) {
  std::vector<int> v;
  for (const auto& item : split_list(text)) {
    const auto n = detail::to_int(item);
    if (!n || *n < 1 || *n > 1000000) throw InputError("--" + opt + ": '" + item + "' is not an integer in [1, 1000000]");
    if (unique && std::find(v.begin(), v.end(), *n) != v.end())
      throw InputError("--" + opt + ": " + item + " is given twice");
    v.push_back(static_cast<int>(*n));
  }
  if (v.empty()) throw InputError("--" + opt + ": empty list");
  return v;
}

// "4096", "4K", "1M", "1G"; a range "1K..4M" expands to the powers of two in it.
int64_t parse_bytes(const std::string& s) {
  std::string t(detail::trim(s));
  int64_t mult = 1;
  if (!t.empty()) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(t.back())));
    if (u == 'K' || u == 'M' || u == 'G') {
      mult = u == 'K' ? 1024 : u == 'M' ? (1 << 20) : (int64_t{1} << 30);
      t.pop_back();
    }
  }
  const auto n = detail::to_int(t);
  if (!n || *n < 1 || *n > (int64_t{1} << 40) / mult) throw InputError("--sizes: '" + s + "' is not a size (e.g. 4096, 64K, 1M)");
  return *n * mult;
}

std::vector<int64_t> size_list(const std::string& text) {
  std::vector<int64_t> v;
  for (const auto& item : split_list(text)) {
    const auto dots = item.find("..");
    if (dots == std::string::npos) {
      v.push_back(parse_bytes(item));
      continue;
    }
    const int64_t lo = parse_bytes(item.substr(0, dots)), hi = parse_bytes(item.substr(dots + 2));
    if (lo > hi) throw InputError("--sizes: range '" + item + "' runs backwards");
    for (int64_t b = lo; b <= hi; b *= 2) v.push_back(b);
  }
  if (v.empty()) throw InputError("--sizes: empty list");
  return v;
}

std::string human_bytes(double b) {
  if (b >= double(1 << 30)) return fixed(b / double(1 << 30), 1) + " GiB";
  if (b >= double(1 << 20)) return fixed(b / double(1 << 20), 1) + " MiB";
  if (b >= 1024) return fixed(b / 1024, 1) + " KiB";
  return fixed(b, 0) + " B";
}

// A one-line progress bar on stderr, only when it is a terminal.
profiler::Progress progress_bar(const std::string& label) {
  if (!stderr_is_tty()) return {};
  return [label](size_t done, size_t total, const std::string& what) {
    const int width = 30;
    const int filled = total ? static_cast<int>(width * done / total) : width;
    std::cerr << "\r" << label << " [" << std::string(filled, '#') << std::string(width - filled, '.')
              << "] " << done << "/" << total << " " << what << "\033[K" << std::flush;
    if (done == total) std::cerr << "\r\033[K" << std::flush;
  };
}

nlohmann::json to_json(const ProfileRun& r) {
  // An unstored run (--no-db) has no id: null, as the text header shows none.
  nlohmann::json j = {{"id", r.id > 0 ? nlohmann::json(r.id) : nlohmann::json(nullptr)},
                      {"created_at", r.created_at},
                      {"kind", r.kind},     {"model", r.model},
                      {"device", r.device}, {"device_type", r.device_type},
                      {"host", r.host},     {"timer", r.timer},
                      {"threads", r.threads}, {"repetitions", r.repetitions},
                      {"versions", r.versions}};
  if (r.kind == "compute") {
    j["mem_gbps"] = r.mem_gbps;
    j["cache_flush_bytes"] = r.cache_flush_bytes;
    j["mem_gbps_streams"] = r.mem_gbps_streams;
    j["layers"] = nlohmann::json::array();
    for (const auto& l : r.layers)
      j["layers"].push_back({{"layer_index", l.layer_index}, {"layer_name", l.layer_name},
                             {"shape_key", l.shape_key}, {"tp_degree", l.tp_degree},
                             {"micro_batch", l.micro_batch}, {"param_bytes", json_count(l.param_bytes)},
                             {"activation_bytes", json_count(l.activation_bytes)}, {"flops", json_count(l.flops)},
                             {"fwd_ms", l.fwd_ms}, {"bwd_ms", l.bwd_ms},
                             {"fwd_spread_ms", l.fwd_spread_ms}, {"bwd_spread_ms", l.bwd_spread_ms},
                             {"repetitions", l.repetitions}});
  } else {
    j["comms"] = nlohmann::json::array();
    for (const auto& c : r.comms)
      j["comms"].push_back({{"backend", c.backend}, {"collective", c.collective},
                            {"hosts", c.hosts}, {"devices_per_host", c.devices_per_host},
                            {"link", c.link}, {"bytes", c.bytes}, {"time_us", c.time_us},
                            {"algbw_gbps", c.algbw_gbps}, {"busbw_gbps", c.busbw_gbps},
                            {"repetitions", c.repetitions}});
  }
  return j;
}

void print_compute(const ProfileRun& r, const ModelSpec* model, std::ostream& out) {
  std::map<std::string, int> count;  // layers per shape
  if (model)
    for (const auto& l : model->layers) ++count[l.shape_key];
  Table t({"layer", "x", "tp", "mb", "params", "GFLOP", "fwd ms", "+-", "bwd ms", "+-", "GFLOP/s"});
  for (const auto& l : r.layers) {
    const double s = (l.fwd_ms + l.bwd_ms) / 1e3;
    t.add({l.layer_name, model ? std::to_string(count[l.shape_key]) : "-", std::to_string(l.tp_degree),
           std::to_string(l.micro_batch), human_bytes(l.param_bytes), fixed(l.flops / 1e9, 3),
           fixed(l.fwd_ms, 3), fixed(l.fwd_spread_ms, 3), fixed(l.bwd_ms, 3), fixed(l.bwd_spread_ms, 3),
           s > 0 ? fixed(3 * l.flops / 1e9 / s, 1) : "-"});
  }
  t.print(out);
}

void print_comm(const ProfileRun& r, std::ostream& out) {
  Table t({"collective", "ranks", "bytes", "time us", "algbw GB/s", "busbw GB/s"});
  for (const auto& c : r.comms)
    t.add({c.collective, std::to_string(c.hosts) + "x" + std::to_string(c.devices_per_host),
           std::to_string(c.bytes), fixed(c.time_us, 1), fixed(c.algbw_gbps, 3), fixed(c.busbw_gbps, 3)});
  t.print(out);
}

void print_header(const ProfileRun& r, std::ostream& out) {
  // An unstored run (--no-db) has no id: "profile (comm)", not "profile 0 (comm)".
  out << "profile " << (r.id > 0 ? std::to_string(r.id) + " " : "") << "(" << r.kind << ") "
      << (r.model.empty() ? "" : r.model + " ") << "on " << r.device << " [" << r.device_type << "], host " << r.host
      << ", timer " << r.timer;
  if (r.threads) out << ", " << count_of(r.threads, "thread");
  out << ", " << count_of(r.repetitions, "rep");
  if (r.kind == "compute") {
    out << ", " << (r.cache_flush_bytes ? "caches flushed (" + human_bytes(double(r.cache_flush_bytes)) + ")" : "warm caches");
    if (r.mem_gbps > 0) out << ", memory " << fixed(r.mem_gbps, 1) << " GB/s";
    if (r.mem_gbps_streams.size() > 1) {
      out << " (per process with";
      for (size_t k = 1; k < r.mem_gbps_streams.size(); ++k)
        out << (k > 1 ? "," : "") << " " << k + 1 << " streaming: " << fixed(r.mem_gbps_streams[k], 1);
      out << ")";
    }
  }
  if (!r.created_at.empty()) out << ", " << r.created_at;
  for (const auto& [k, v] : r.versions) out << ", " << k << " " << v;
  out << "\n";
}

// --gpu-type's catalogue name, refused when it contradicts where the times
// are measured: a CPU's (--device cpu, Gloo) filed as an H100's priced the
// H100 5x slower than the model, as "measured"; a GPU's filed as the CPU's
// would price the CPU.
std::string checked_gpu_type(const std::string& s, bool on_cpu, const std::string& where) {
  if (s.empty()) return s;
  const std::string name = canonical_gpu_name(s);
  const GpuSpec* g = find_gpu(name);
  const bool cpu_type = g && g->arch == "cpu";
  if (on_cpu && !cpu_type)
    throw InputError("--gpu-type " + s + ": " + where + " measures the CPU; its times are not a " + name +
                     "'s (omit --gpu-type, or profile on a " + name + ")");
  if (!on_cpu && cpu_type)
    throw InputError("--gpu-type " + s + ": " + where + " measures a GPU, not the CPU");
  return name;
}

// Stores the run unless --no-db; the store is opened only after measuring, so
// bad input leaves no file behind. True when it was stored.
bool save_run(ProfileRun& run, const po::variables_map& vm, const std::string& db_path) {
  if (vm.count("no-db")) return false;
  db::ProfileStore::open(db_path).save(run);
  return true;
}

// With --json: prints the run and its wall time and returns true.
bool print_json(const ProfileRun& run, const po::variables_map& vm, double secs) {
  if (!vm.count("json")) return false;
  nlohmann::json j = to_json(run);
  j["wall_s"] = secs;
  std::cout << j.dump(2) << "\n";
  return true;
}

int profile_compute(const std::vector<std::string>& args) {
  po::options_description opt("profile compute options");
  std::string model_name, device, gpu_type, mbs, tps, timer, input_shape, db_path;
  int reps = 0, warmup = -1, threads = 0, passes = 1, extra_passes = 0;
  std::string flush = "auto";
  opt.add_options()
      ("model", po::value(&model_name)->required(), "zoo name (gpt-350m, moe-tiny, wrn-28-10, ...), a .yaml description or a TorchScript .pt")
      ("device", po::value(&device)->default_value("cpu"), "cpu or cuda:N")
      ("gpu-type", po::value(&gpu_type), "catalogue name to file the profile under (default: cpu / detected GPU)")
      ("micro-batches", po::value(&mbs)->default_value("1,2"), "micro-batch sizes")
      ("tp", po::value(&tps)->default_value("1,2,4,8"), "tensor-parallel degrees (1, 2, 4, 8)")
      ("reps", po::value(&reps), "timed repetitions per measurement (default 3 on cpu, 20 on cuda)")
      ("warmup", po::value(&warmup), "untimed repetitions first (default 1 on cpu, 5 on cuda)")
      ("passes", po::value(&passes)->default_value(1),
       "interleaved passes: each pass times its share of the repetitions of every layer in turn, so a "
       "slow phase of the host spreads over all layers (1 = back to back)")
      ("extra-passes", po::value(&extra_passes)->default_value(0),
       "at most this many more passes over the layers whose passes disagree (the median pass more than 10 % "
       "above the fastest), so a slow phase of the host that hit most passes does not set their median")
      ("threads", po::value(&threads)->default_value(0), "CPU threads for LibTorch and BLAS (0 = their own defaults)")
      ("timer", po::value(&timer)->default_value("auto"), "cuda: auto, cupti or cuda_events")
      ("cache-flush-mib", po::value(&flush)->default_value("auto"),
       "MiB rewritten before each timed forward/backward, so layers start from cold caches as inside a "
       "model (auto: none when the model's weights and gradients fit in the cache, else 4 x the "
       "cache, >= 64; 0 = warm caches)")
      ("input-shape", po::value(&input_shape), "TorchScript: one sample's input shape, e.g. 16 or 3,32,32")
      ("db", po::value(&db_path)->default_value(default_db_path()), "SQLite file")
      ("no-db", "do not store the profile")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse("cellsched profile compute --model NAME [--device cpu|cuda:N] [options]", args, opt, {}, vm)) return 0;
  profiler::ComputeOptions o;
  o.device = device;
  o.device_type = checked_gpu_type(gpu_type, device == "cpu", "--device " + device);
  o.micro_batches = int_list("micro-batches", mbs, true);
  o.tp_degrees = int_list("tp", tps, true);
  if (std::find(o.tp_degrees.begin(), o.tp_degrees.end(), 1) == o.tp_degrees.end())
    std::cerr << "note: without --tp 1 this profile cannot price an estimate (every estimate needs the layers at "
                 "tp 1); estimate and tune pass over it when they choose a profile\n";
  const bool cpu = device == "cpu";
  o.repetitions = vm.count("reps") ? reps : (cpu ? 3 : 20);
  o.warmup = vm.count("warmup") ? warmup : (cpu ? 1 : 5);
  check_flag_range("warmup", o.warmup, 0, 100000);
  o.passes = passes;
  o.extra_passes = extra_passes;
  check_flag_range("threads", threads, 0, 4096);  // 1e8 hung, starting threads
  o.threads = threads;
  o.timer = timer;
  if (flush != "auto") {
    const auto mib = cellsched::detail::to_int(flush);
    if (!mib || *mib < 0 || *mib > 65536) throw InputError("--cache-flush-mib: '" + flush + "' is not auto or 0..65536");
    o.cache_flush_bytes = *mib << 20;
  }
  ModelSpec model = load_model(model_name);
  if (vm.count("input-shape")) {
    if (model.family != "torchscript")
      throw InputError("--input-shape: " + model.name + " is a " + model.family +
                       " model with its own input; the flag is for a TorchScript file");
    model.input_shape = int_list("input-shape", input_shape);
  }
  o.progress = progress_bar("profiling " + model.name);
  if (!vm.count("no-db")) db::check_db_file(db_path, true);  // named before measuring, not after
  auto backend = profiler::make_compute_backend(o);
  const auto t0 = std::chrono::steady_clock::now();
  ProfileRun run = profiler::profile_compute(*backend, model, o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool stored = save_run(run, vm, db_path);
  if (print_json(run, vm, secs)) return 0;
  print_header(run, std::cout);
  print_compute(run, &model, std::cout);
  double fwd = 0, bwd = 0;
  for (const auto& l : run.layers) (fwd += l.fwd_ms), (bwd += l.bwd_ms);
  std::cout << run.layers.size() << " measurements of " << model.layers.size() << " layers in "
            << fixed(secs, 1) << " s (timed medians: forward " << fixed(fwd / 1e3, 2) << " s, backward "
            << fixed(bwd / 1e3, 2) << " s per repetition)";
  if (stored) std::cout << "; stored as profile " << run.id << " in " << db_path;
  std::cout << "\n";
  return 0;
}

std::vector<std::string> worker_command() {
  const std::string self = self_executable();
  return {self.empty() ? std::string("/proc/self/exe") : self, "profile", "comm-worker"};
}

// A collective's time that falls by half or more as its size grows is the
// host's noise, not the link (a 3.6 ms scheduler stall at 1 KB against 245 us
// at 2 KB): said per series, once, since the estimator fits through it.
void note_noisy_comm(const ProfileRun& run, std::ostream& err) {
  std::map<std::string, std::vector<const CommProfile*>> series;
  for (const CommProfile& c : run.comms)
    series[c.collective + " " + std::to_string(c.hosts) + "x" + std::to_string(c.devices_per_host)].push_back(&c);
  for (auto& [name, points] : series) {
    std::sort(points.begin(), points.end(), [](const auto* a, const auto* b) { return a->bytes < b->bytes; });
    const CommProfile* slowest = nullptr;
    for (const CommProfile* p : points) {
      if (slowest && p->time_us * 2 <= slowest->time_us) {
        err << "note: " << name << ": " << p->bytes << " B took " << fixed(p->time_us, 1) << " us, " << slowest->bytes
            << " B " << fixed(slowest->time_us, 1) << " us: a time that falls as the size grows is the host's noise "
            << "(a busy machine?): rerun it idle, or with --passes 3 (the median of interleaved passes)\n";
        break;
      }
      if (!slowest || p->time_us > slowest->time_us) slowest = p;
    }
  }
}

int profile_comm(const std::vector<std::string>& args) {
  po::options_description opt("profile comm options");
  std::string backend, sizes, colls, gpu_type, db_path;
  int ranks = 2, dpp = 1, reps = 0, warmup = -1, passes = 1;
  double timeout = 600;
  opt.add_options()
      ("backend", po::value(&backend)->default_value("gloo"), "gloo (CPU processes) or nccl (GPUs)")
      ("ranks", po::value(&ranks)->default_value(2), "group size: processes (gloo) or GPUs (nccl)")
      ("devices-per-process", po::value(&dpp)->default_value(1), "nccl: GPUs one process drives")
      ("sizes", po::value(&sizes), "message sizes: list and/or ranges of powers of two (default 1K..4M gloo, 1K..256M nccl)")
      ("collectives", po::value(&colls), "all_reduce,all_gather,reduce_scatter,all_to_all,send_recv (default all)")
      ("reps", po::value(&reps), "timed repetitions per size (default 5 gloo, 20 nccl)")
      ("warmup", po::value(&warmup), "untimed repetitions first (default 1 gloo, 5 nccl)")
      ("passes", po::value(&passes)->default_value(1),
       "interleaved passes over all collectives and sizes, each taking its share of the repetitions")
      ("gpu-type", po::value(&gpu_type), "catalogue name to file the profile under")
      ("timeout", po::value(&timeout)->default_value(600), "seconds before the workers are killed")
      ("db", po::value(&db_path)->default_value(default_db_path()), "SQLite file")
      ("no-db", "do not store the profile")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse("cellsched profile comm --backend gloo|nccl --ranks N [options]", args, opt, {}, vm)) return 0;
  profiler::CommOptions o;
  o.backend = backend;
  o.ranks = ranks;
  // One rank has no one to talk to: its "all-reduce" read 4,757 GB/s. A
  // smoke test of the code path may run it; no estimate may use it.
  if (ranks == 1 && !vm.count("no-db"))
    throw InputError("--ranks 1: a collective needs two ranks to measure a link (--no-db runs it as a smoke test)");
  o.devices_per_process = dpp;
  if (vm.count("sizes")) o.sizes = size_list(sizes);
  if (vm.count("collectives")) o.collectives = split_list(colls);
  const bool gloo = backend == "gloo";
  o.repetitions = vm.count("reps") ? reps : (gloo ? 5 : 20);
  o.warmup = vm.count("warmup") ? warmup : (gloo ? 1 : 5);
  check_flag_range("warmup", o.warmup, 0, 100000);
  o.passes = passes;
  o.device_type = checked_gpu_type(gpu_type, gloo, "--backend " + backend);
  check_flag_range("timeout", timeout, 0.001, 1e6);  // 1e308 became a negative int deeper
  o.timeout_s = timeout;
  o.worker_command = worker_command();
  if (!vm.count("no-db")) db::check_db_file(db_path, true);
  o.progress = progress_bar(backend + " x" + std::to_string(ranks));
  const auto t0 = std::chrono::steady_clock::now();
  ProfileRun run = profiler::profile_comm(o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  note_noisy_comm(run, std::cerr);
  const bool stored = save_run(run, vm, db_path);
  if (print_json(run, vm, secs)) return 0;
  print_header(run, std::cout);
  print_comm(run, std::cout);
  std::cout << run.comms.size() << " measurements in " << fixed(secs, 1) << " s";
  if (stored) std::cout << "; stored as profile " << run.id << " in " << db_path;
  std::cout << "\n";
  return 0;
}

int profile_comm_worker(const std::vector<std::string>& args) {
  return profiler::run_comm_worker(profiler::parse_worker_argv(args));
}

db::ProfileStore open_existing(const std::string& path) {
  if (path != ":memory:" && !std::filesystem::exists(path))
    throw InputError(path + ": no such database (run `cellsched profile compute` first, or pass --db)");
  return db::ProfileStore::open(path);
}

int profile_list(const std::vector<std::string>& args) {
  po::options_description opt("profile list options");
  std::string path;
  opt.add_options()("db", po::value(&path)->default_value(default_db_path()), "SQLite file")("json", "print JSON");
  po::variables_map vm;
  if (!parse("cellsched profile list [--db PATH] [--json]", args, opt, {}, vm)) return 0;
  const auto list = open_existing(path).list();
  if (vm.count("json")) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& s : list)
      a.push_back({{"id", s.id}, {"created_at", s.created_at}, {"kind", s.kind}, {"model", s.model},
                   {"device", s.device}, {"device_type", s.device_type}, {"host", s.host},
                   {"timer", s.timer}, {"threads", s.threads}, {"repetitions", s.repetitions},
                   {"records", s.records}});
    std::cout << a.dump(2) << "\n";
    return 0;
  }
  Table t({"profile", "created (UTC)", "kind", "model", "device", "type", "host", "timer", "reps", "records"});
  for (const auto& s : list)
    t.add({std::to_string(s.id), s.created_at, s.kind, s.model.empty() ? "-" : s.model, s.device,
           s.device_type, s.host, s.timer, std::to_string(s.repetitions), std::to_string(s.records)});
  t.print(std::cout);
  return 0;
}

ProfileRun load_or_fail(const db::ProfileStore& store, const std::string& path, int64_t id) {
  auto r = store.load(id);
  if (!r) throw InputError(path + ": no profile " + std::to_string(id) + " (see cellsched profile list)");
  return *r;
}

int profile_show(const std::vector<std::string>& args) {
  po::options_description opt("profile show options");
  std::string path;
  int64_t id = 0;
  opt.add_options()("id", po::value(&id)->required(), "profile id")
      ("db", po::value(&path)->default_value(default_db_path()), "SQLite file")("json", "print JSON");
  po::positional_options_description pos;
  pos.add("id", 1);
  po::variables_map vm;
  if (!parse("cellsched profile show ID [--db PATH] [--json]", args, opt, pos, vm)) return 0;
  const ProfileRun r = load_or_fail(open_existing(path), path, id);
  if (vm.count("json")) {
    std::cout << to_json(r).dump(2) << "\n";
    return 0;
  }
  print_header(r, std::cout);
  if (r.kind == "compute") {
    std::optional<ModelSpec> model;
    try {
      model = load_model(r.model);
    } catch (const InputError&) {
    }
    print_compute(r, model ? &*model : nullptr, std::cout);
  } else {
    print_comm(r, std::cout);
  }
  return 0;
}

void write_csv(const ProfileRun& r, std::ostream& out) {
  auto q = [](const std::string& s) { return detail::csv_field(s); };
  auto d = [](double v) { return detail::format_double(v); };
  if (r.kind == "compute") {
    out << "profile_id,model,device_type,layer_index,layer_name,shape_key,tp_degree,micro_batch,"
           "param_bytes,activation_bytes,flops,fwd_ms,bwd_ms,fwd_spread_ms,bwd_spread_ms,repetitions\n";
    for (const auto& l : r.layers)
      out << r.id << "," << q(r.model) << "," << q(r.device_type) << "," << l.layer_index << ","
          << q(l.layer_name) << "," << q(l.shape_key) << "," << l.tp_degree << "," << l.micro_batch << ","
          << d(l.param_bytes) << "," << d(l.activation_bytes) << "," << d(l.flops) << "," << d(l.fwd_ms)
          << "," << d(l.bwd_ms) << "," << d(l.fwd_spread_ms) << "," << d(l.bwd_spread_ms) << ","
          << l.repetitions << "\n";
  } else {
    out << "profile_id,device_type,backend,collective,hosts,devices_per_host,link,bytes,time_us,"
           "algbw_gbps,busbw_gbps,repetitions\n";
    for (const auto& c : r.comms)
      out << r.id << "," << q(r.device_type) << "," << c.backend << "," << c.collective << "," << c.hosts
          << "," << c.devices_per_host << "," << q(c.link) << "," << c.bytes << "," << d(c.time_us) << ","
          << d(c.algbw_gbps) << "," << d(c.busbw_gbps) << "," << c.repetitions << "\n";
  }
}

int profile_export(const std::vector<std::string>& args) {
  po::options_description opt("profile export options");
  std::string path, format, out_path;
  int64_t id = 0;
  opt.add_options()("id", po::value(&id)->required(), "profile id")
      ("format", po::value(&format)->default_value("csv"), "csv or json")
      ("output,o", po::value(&out_path), "file (default: standard output)")
      ("db", po::value(&path)->default_value(default_db_path()), "SQLite file");
  po::positional_options_description pos;
  pos.add("id", 1);
  po::variables_map vm;
  if (!parse("cellsched profile export ID [--format csv|json] [-o FILE] [--db PATH]", args, opt, pos, vm)) return 0;
  if (format != "csv" && format != "json") throw InputError("--format: '" + format + "' is not csv or json");
  if (vm.count("output")) check_out_file("output", out_path);
  const ProfileRun r = load_or_fail(open_existing(path), path, id);
  std::ofstream file;
  if (vm.count("output")) {
    file.open(out_path);
    if (!file) throw InputError(out_path + ": cannot write");
  }
  std::ostream& out = vm.count("output") ? static_cast<std::ostream&>(file) : std::cout;
  if (format == "json")
    out << to_json(r).dump(2) << "\n";
  else
    write_csv(r, out);
  return 0;
}

}  // namespace

int cmd_profile(const std::vector<std::string>& args) {
  static const std::map<std::string, int (*)(const std::vector<std::string>&)> subs = {
      {"compute", profile_compute}, {"comm", profile_comm}, {"comm-worker", profile_comm_worker},
      {"list", profile_list},       {"show", profile_show}, {"export", profile_export}};
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: cellsched profile compute|comm|list|show|export [options]\n"
                 "  compute  time forward and backward of each distinct layer shape\n"
                 "  comm     time collectives over message sizes (gloo or nccl)\n"
                 "  list     stored profiles\n  show ID  one profile\n  export ID  CSV or JSON\n";
    return args.empty() ? 2 : 0;
  }
  const auto it = subs.find(args[0]);
  if (it == subs.end()) throw InputError("unknown profile command '" + args[0] + "' (compute, comm, list, show, export)");
  return it->second(std::vector<std::string>(args.begin() + 1, args.end()));
}

}  // namespace cellsched::cli
