#include "profiler/comm.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/parse_util.h"
#include "core/self_exe.h"
#include "core/stats.h"

namespace cellsched::profiler {

namespace fs = std::filesystem;

const std::vector<std::string>& collective_names() {
  static const std::vector<std::string> v = {"all_reduce", "all_gather", "reduce_scatter",
                                             "all_to_all", "send_recv"};
  return v;
}

std::vector<int64_t> default_sizes(const std::string& backend) {
  const int64_t top = backend == "nccl" ? (int64_t{256} << 20) : (int64_t{4} << 20);
  std::vector<int64_t> v;
  for (int64_t b = 1024; b <= top; b *= 2) v.push_back(b);
  return v;
}

namespace {

std::string join_ints(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

std::vector<std::string> to_argv(const CommWorkerArgs& a) {
  return {"--backend", a.backend, "--rank", std::to_string(a.rank), "--local-ranks",
          std::to_string(a.local_ranks), "--world", std::to_string(a.world), "--store",
          a.store_dir, "--sizes", join_ints(a.sizes), "--collectives", join(a.collectives),
          "--reps", std::to_string(a.repetitions), "--warmup", std::to_string(a.warmup), "--passes", std::to_string(a.passes), "--out",
          a.out_path, "--progress", a.progress_path};
}

CommWorkerArgs parse_worker_argv(const std::vector<std::string>& argv) {
  CommWorkerArgs a;
  auto num = [](const std::string& k, const std::string& v) {
    const auto n = detail::to_int(v);
    if (!n || *n < 0) throw InputError("comm worker: " + k + ": not a non-negative integer: '" + v + "'");
    return *n;
  };
  for (size_t i = 0; i < argv.size(); i += 2) {
    if (i + 1 >= argv.size()) throw InputError("comm worker: option without value: " + argv[i]);
    const std::string& k = argv[i];
    const std::string& v = argv[i + 1];
    if (k == "--backend") a.backend = v;
    else if (k == "--rank") a.rank = static_cast<int>(num(k, v));
    else if (k == "--local-ranks") a.local_ranks = static_cast<int>(num(k, v));
    else if (k == "--world") a.world = static_cast<int>(num(k, v));
    else if (k == "--store") a.store_dir = v;
    else if (k == "--sizes") { for (auto& s : detail::split(v, ',')) if (!s.empty()) a.sizes.push_back(num(k, std::string(s))); }
    else if (k == "--collectives") { for (auto& s : detail::split(v, ',')) if (!s.empty()) a.collectives.emplace_back(s); }
    else if (k == "--reps") a.repetitions = static_cast<int>(num(k, v));
    else if (k == "--warmup") a.warmup = static_cast<int>(num(k, v));
    else if (k == "--passes") a.passes = static_cast<int>(num(k, v));
    else if (k == "--out") a.out_path = v;
    else if (k == "--progress") a.progress_path = v;
    else throw InputError("comm worker: unknown option " + k);
  }
  if (a.passes < 1 || a.passes > std::max(1, a.repetitions)) throw InputError("comm worker: --passes must be in 1..--reps");
  if (a.world < 1 || a.local_ranks < 1 || a.rank + a.local_ranks > a.world || a.out_path.empty() || a.store_dir.empty())
    throw InputError("comm worker: needs --world >= 1, --rank + --local-ranks <= --world, --store and --out");
  return a;
}

int run_comm_worker(const CommWorkerArgs& args) {
  std::unique_ptr<Communicator> comm = make_communicator(args);
  const size_t total = args.collectives.size() * args.sizes.size() * static_cast<size_t>(args.passes);
  size_t done = 0;
  // Pass p takes its share of every (collective, size)'s repetitions in turn.
  std::vector<std::pair<std::string, int64_t>> keys;  // (collective, bytes moved), in order
  std::vector<std::vector<double>> samples;
  for (int pass = 0; pass < args.passes; ++pass) {
    const int reps = (args.repetitions - pass + args.passes - 1) / args.passes;
    size_t k = 0;
    for (const std::string& coll : args.collectives) {
      for (int64_t bytes : args.sizes) {
        const int64_t moved = comm->prepare(coll, bytes);
        if (pass == 0) {
          keys.emplace_back(coll, moved);
          samples.emplace_back();
        }
        for (int r = 0; r < args.warmup + reps; ++r) {
          comm->barrier();  // every rank starts each repetition together
          const double us = comm->run_us();
          if (r >= args.warmup) samples[k].push_back(us);
        }
        ++k;
        ++done;
        if (args.rank == 0 && !args.progress_path.empty()) {
          std::ofstream p(args.progress_path, std::ios::app);
          p << done << " " << total << " " << coll << " " << bytes << "\n";
        }
      }
    }
  }
  nlohmann::json results = nlohmann::json::array();
  for (size_t k = 0; k < keys.size(); ++k)
    results.push_back({{"collective", keys[k].first}, {"bytes", keys[k].second}, {"samples_us", samples[k]}});
  comm->barrier();
  nlohmann::json out = {{"rank", args.rank},        {"local_ranks", args.local_ranks},
                        {"device_type", comm->device_type()}, {"timer", comm->timer()},
                        {"versions", comm->versions()}, {"results", results}};
  const std::string tmp = args.out_path + ".tmp";
  {
    std::ofstream f(tmp);
    f << out.dump();
    if (!f) return 1;
  }
  fs::rename(tmp, args.out_path);
  return 0;
}

CommProfile make_comm_profile(const std::string& backend, const std::string& collective, int ranks,
                              int64_t bytes, const std::vector<std::vector<double>>& per_rank) {
  size_t reps = per_rank.empty() ? 0 : per_rank[0].size();
  for (const auto& s : per_rank) reps = std::min(reps, s.size());
  std::vector<double> slowest(reps, 0.0);
  for (const auto& s : per_rank)
    for (size_t i = 0; i < reps; ++i) slowest[i] = std::max(slowest[i], s[i]);
  CommProfile c;
  c.backend = backend;
  c.collective = collective;
  c.hosts = 1;
  c.devices_per_host = ranks;
  c.link = "same-host";
  c.bytes = bytes;
  c.time_us = median(slowest);
  c.algbw_gbps = c.time_us > 0 ? bytes / (c.time_us * 1e3) : 0;  // bytes/us / 1e3 = GB/s
  c.busbw_gbps = c.algbw_gbps * busbw_factor(collective, ranks);
  c.repetitions = static_cast<int>(reps);
  return c;
}

namespace {

void check_options(const CommOptions& o) {
  if (o.backend != "gloo" && o.backend != "nccl")
    throw InputError("--backend: '" + o.backend + "' is not gloo or nccl");
  if (o.ranks < 1 || o.ranks > 1024) throw InputError("--ranks must be in 1..1024");
  if (o.devices_per_process < 1 || o.ranks % o.devices_per_process != 0)
    throw InputError("--devices-per-process must divide --ranks");
  if (o.backend == "gloo" && o.devices_per_process != 1)
    throw InputError("--devices-per-process: gloo runs one process per rank");
  if (o.repetitions < 1 || o.repetitions > 100000) throw InputError("--reps must be in 1..100000");
  if (o.warmup < 0 || o.warmup > 100000) throw InputError("--warmup must be in 0..100000");
  if (o.passes < 1 || o.passes > o.repetitions) throw InputError("--passes must be in 1..--reps");
  std::set<std::string> known(collective_names().begin(), collective_names().end());
  if (o.collectives.empty()) throw InputError("--collectives: give at least one");
  for (const auto& c : o.collectives)
    if (!known.count(c)) throw InputError("--collectives: unknown collective '" + c + "' (expected " + join(collective_names()) + ")");
  for (int64_t b : o.sizes)
    if (b < 4 || b > (int64_t{16} << 30)) throw InputError("--sizes: " + std::to_string(b) + " bytes is not in 4 B..16 GiB");
  if (o.worker_command.empty()) throw std::logic_error("profile_comm: no worker command");
  if (o.backend == "nccl") {
    // Counted from the device files, not the CUDA runtime: a parent that
    // initialized CUDA could not hand the GPUs to the workers it forks. With
    // none, each worker failed on its own (exit 1, their messages interleaved).
    int gpus = 0;
    while (std::filesystem::exists("/dev/nvidia" + std::to_string(gpus))) ++gpus;
    if (gpus == 0) throw InputError("--backend nccl: this machine has no NVIDIA GPU (no /dev/nvidia0)");
    if (o.ranks > gpus)
      throw InputError("--ranks " + std::to_string(o.ranks) + ": nccl puts one rank on each GPU; this machine has " +
                       std::to_string(gpus));
  }
}

struct Child {
  pid_t pid = -1;
  int status = 0;
  bool done = false;
};

pid_t spawn(const std::vector<std::string>& argv) {
  const pid_t pid = spawn_worker(argv);  // ends with this process
  if (pid < 0) throw std::runtime_error("fork failed");
  return pid;
}

// Waits for every worker; on a failure or the timeout, kills the others and
// says what happened (empty: all exited 0). Reports progress as the workers
// append it to `progress`.
std::string wait_for_workers(std::vector<Child>& children, const CommOptions& opt, const std::string& progress) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(opt.timeout_s * 1000));
  std::string failure;
  size_t last_progress = 0;
  for (int running = static_cast<int>(children.size()); running > 0;) {
    bool reaped = false;
    for (Child& c : children) {
      if (c.done) continue;
      const pid_t r = waitpid(c.pid, &c.status, WNOHANG);
      if (r == c.pid) {
        c.done = true;
        reaped = true;
        --running;
        if (!(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0) && failure.empty())
          failure = "a worker (pid " + std::to_string(c.pid) + ") " +
                    (WIFEXITED(c.status) ? "exited with status " + std::to_string(WEXITSTATUS(c.status))
                                         : "was killed by signal " + std::to_string(WTERMSIG(c.status)));
      }
    }
    if (std::chrono::steady_clock::now() > deadline && failure.empty())
      failure = "the sweep ran past its timeout of " + std::to_string(static_cast<int>(opt.timeout_s)) + " s";
    if (!failure.empty()) {
      for (Child& c : children)
        if (!c.done) kill(c.pid, SIGKILL);
      for (Child& c : children)
        if (!c.done) { waitpid(c.pid, &c.status, 0); c.done = true; }
      break;
    }
    if (opt.progress) {
      std::ifstream pf(progress);
      std::string line, last;
      while (std::getline(pf, line)) last = line;
      std::istringstream ls(last);
      size_t done = 0, total = 0;
      std::string coll, bytes;
      if (ls >> done >> total >> coll >> bytes && done != last_progress) {
        last_progress = done;
        opt.progress(done, total, coll + " " + bytes + " B");
      }
    }
    if (!reaped && running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return failure;
}

// One profile of the workers' outputs: per (collective, bytes), the samples of every rank.
ProfileRun combine_outputs(const std::vector<std::string>& outs, const CommOptions& opt) {
  ProfileRun run;
  run.kind = "comm";
  run.device = opt.backend == "gloo" ? "cpu" : "cuda";
  run.host = host_name();
  run.repetitions = opt.repetitions;
  std::map<std::pair<std::string, int64_t>, std::vector<std::vector<double>>> samples;
  std::vector<std::pair<std::string, int64_t>> order;
  for (const std::string& path : outs) {
    std::ifstream f(path);
    const auto j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.contains("results")) throw std::runtime_error("profile comm: unreadable worker output " + path);
    run.device_type = j.value("device_type", "");
    run.timer = j.value("timer", "");
    for (const auto& [k, v] : j["versions"].items()) run.versions[k] = v.get<std::string>();
    for (const auto& r : j["results"]) {
      const auto key = std::make_pair(r["collective"].get<std::string>(), r["bytes"].get<int64_t>());
      if (!samples.count(key)) order.push_back(key);
      samples[key].push_back(r["samples_us"].get<std::vector<double>>());
    }
  }
  if (!opt.device_type.empty()) run.device_type = opt.device_type;
  for (const auto& key : order)
    run.comms.push_back(make_comm_profile(opt.backend, key.first, opt.ranks, key.second, samples[key]));
  if (opt.progress) opt.progress(order.size(), order.size(), "");
  return run;
}

}  // namespace

ProfileRun profile_comm(const CommOptions& opt) {
  check_options(opt);
  const std::vector<int64_t> sizes = opt.sizes.empty() ? default_sizes(opt.backend) : opt.sizes;
  char tmpl[] = "/tmp/cellsched-comm-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("cannot create a scratch directory in /tmp");
  const fs::path dir = tmpl;
  struct Cleanup {
    fs::path d;
    ~Cleanup() { std::error_code ec; fs::remove_all(d, ec); }
  } cleanup{dir};

  fs::create_directories(dir / "store");
  const int procs = opt.ranks / opt.devices_per_process;
  std::vector<Child> children(procs);
  std::vector<std::string> outs(procs);
  const std::string progress = (dir / "progress").string();
  for (int p = 0; p < procs; ++p) {
    CommWorkerArgs a;
    a.backend = opt.backend;
    a.rank = p * opt.devices_per_process;
    a.local_ranks = opt.devices_per_process;
    a.world = opt.ranks;
    a.store_dir = (dir / "store").string();
    a.sizes = sizes;
    a.collectives = opt.collectives;
    a.repetitions = opt.repetitions;
    a.warmup = opt.warmup;
    a.passes = opt.passes;
    a.out_path = outs[p] = (dir / ("rank" + std::to_string(a.rank) + ".json")).string();
    a.progress_path = progress;
    std::vector<std::string> argv = opt.worker_command;
    for (auto& s : to_argv(a)) argv.push_back(s);
    children[p].pid = spawn(argv);
  }
  if (const std::string failure = wait_for_workers(children, opt, progress); !failure.empty())
    throw std::runtime_error("profile comm: " + failure);
  return combine_outputs(outs, opt);
}

}  // namespace cellsched::profiler
