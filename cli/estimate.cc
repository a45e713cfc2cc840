// `cellsched estimate` and `cellsched tune`: price a plan of a cell, or find
// the best plans of cells, from the profiles in the store.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/estimate_common.h"
#include "tuner/cells.h"
#include "core/error.h"
#include "core/gpu.h"
#include "db/cell_store.h"
#include "db/profile_store.h"
#include "tuner/tuner.h"

namespace cellsched::cli {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

namespace {

void check_id_signs(int64_t compute_id, int64_t comm_id) {
  if (compute_id < 0) throw InputError("--profile: an id is a whole number from 1, got " + std::to_string(compute_id));
  if (comm_id < 0) throw InputError("--comm-profile: an id is a whole number from 1, got " + std::to_string(comm_id));
}

std::string no_database(const std::string& db_path, int64_t compute_id, int64_t comm_id) {
  return db_path + ": no such database, so no profile " + std::to_string(compute_id ? compute_id : comm_id);
}

// Profile `id` of `kind` from the store; a compute profile must profile `model`.
ProfileRun load_profile(const db::ProfileStore& store, const std::string& db_path, int64_t id,
                        const std::string& kind, const std::string& model) {
  auto run = store.load(id);
  if (!run) throw InputError(db_path + ": no profile " + std::to_string(id) + " (see cellsched profile list)");
  if (run->kind != kind)
    throw InputError(db_path + ": profile " + std::to_string(id) + " is a " + run->kind + " profile, not a " + kind + " one");
  if (kind == "compute" && run->model != model)
    throw InputError(db_path + ": profile " + std::to_string(id) + " profiles model '" + run->model + "', not '" + model + "'");
  return std::move(*run);
}

// Whether a compute profile holds every layer shape of `model` at tp 1 (what
// every estimate needs).
bool covers(const ProfileRun& run, const ModelSpec& model) {
  std::set<std::string> shapes;
  for (const LayerProfile& lp : run.layers)
    if (lp.tp_degree == 1) shapes.insert(lp.shape_key);
  return std::all_of(model.layers.begin(), model.layers.end(),
                     [&](const LayerSpec& l) { return shapes.count(l.shape_key) > 0; });
}

// The newest compute profile of `model` for gpu_type, else (a GPU type) on
// another GPU type, else (unless modeling is allowed) on any device; 0: none.
// Profiles are stored under the model's name, so another model of that name
// (a YAML file naming itself after a zoo model) may have the newest: the
// newest whose layers are the model's is taken, and only where none is, the
// newest by name (whose error then says which layer is missing).
int64_t newest_compute(const db::ProfileStore& store, const ModelSpec& model, const std::string& gpu_type, bool gpu,
                       bool require_compute) {
  std::vector<db::ProfileSummary> runs;
  for (auto& s : store.list())  // newest first
    if (s.kind == "compute" && s.model == model.name) runs.push_back(std::move(s));
  std::map<int64_t, bool> covering;  // each run loaded once
  const auto first = [&](auto&& wanted) -> int64_t {
    for (const auto& s : runs) {
      if (!wanted(s)) continue;
      auto [it, fresh] = covering.try_emplace(s.id, false);
      if (fresh) {
        const auto run = store.load(s.id);
        it->second = run && covers(*run, model);
      }
      if (it->second) return s.id;
    }
    return 0;
  };
  // Said where a stored profile under this name is passed over, since the
  // tier below may then model the type instead of refusing.
  const auto passed_over = [&] {
    for (const auto& [id, ok] : covering)
      if (!ok) {
        std::cerr << "note: compute profile " << id << " is stored under " << model.name
                  << " but lacks its layers at tp 1 (another model of that name, or a --tp run); not used\n";
        return;
      }
  };
  const auto on_gpu = [](const db::ProfileSummary& s) {
    return find_gpu(s.device_type) && find_gpu(s.device_type)->arch != "cpu";
  };
  if (const int64_t id = first([&](const auto& s) { return s.device_type == gpu_type; })) return id;
  if (gpu) {  // another GPU type's profile transfers; a CPU profile adds nothing
    if (const int64_t id = first(on_gpu)) return id;
    if (!require_compute) {  // modeled
      passed_over();
      return 0;
    }
  }
  if (const int64_t id = first([](const auto&) { return true; })) return id;
  if (const int64_t id = store.latest_compute(model.name, gpu_type)) return id;
  if (gpu)
    for (const auto& s : runs)
      if (on_gpu(s)) return s.id;
  return store.latest_compute(model.name, "");
}

// The newest comm profile of gpu_type, preferring one that holds the
// collectives estimates use (all-reduce for gradients, send/recv between
// stages) over a newer partial one (a quick send/recv check priced the
// gradient all-reduce from the catalogue: 0.08 ms where 4.0 ms was measured).
int64_t newest_comm(const db::ProfileStore& store, const std::string& gpu_type) {
  int64_t newest = 0, with_all_reduce = 0;
  for (const auto& s : store.list()) {  // newest first
    if (s.kind != "comm" || !find_gpu(s.device_type) || find_gpu(s.device_type)->name != gpu_type) continue;
    if (!newest) newest = s.id;
    const auto run = store.load(s.id);
    if (!run) continue;
    bool all_reduce = false, send_recv = false;
    for (const CommProfile& c : run->comms) {
      all_reduce = all_reduce || c.collective == "all_reduce";
      send_recv = send_recv || c.collective == "send_recv";
    }
    if (all_reduce && send_recv) return s.id;
    if (all_reduce && !with_all_reduce) with_all_reduce = s.id;
  }
  return with_all_reduce ? with_all_reduce : newest;
}

}  // namespace

void check_profile_ids(const std::string& db_path, const std::string& model, int64_t compute_id, int64_t comm_id) {
  check_id_signs(compute_id, comm_id);
  if (compute_id == 0 && comm_id == 0) return;
  if (db_path != ":memory:" && !std::filesystem::exists(db_path))
    throw InputError(no_database(db_path, compute_id, comm_id));
  const auto store = db::ProfileStore::open(db_path);
  if (compute_id) load_profile(store, db_path, compute_id, "compute", model);
  if (comm_id) load_profile(store, db_path, comm_id, "comm", model);
}

ProfileSelection select_profiles(const std::string& db_path, const ModelSpec& model, const std::string& gpu_type,
                                 int64_t compute_id, int64_t comm_id, bool require_compute) {
  check_id_signs(compute_id, comm_id);
  const bool gpu = find_gpu(gpu_type) && find_gpu(gpu_type)->arch != "cpu";
  ProfileSelection sel;
  if (db_path != ":memory:" && !std::filesystem::exists(db_path)) {
    if (compute_id || comm_id) throw InputError(no_database(db_path, compute_id, comm_id));
    if (!require_compute && gpu) {
      sel.has_compute = false;  // nothing stored: the analytic model prices the GPU type
      sel.compute.kind = "compute";
      return sel;
    }
    throw InputError(db_path + ": no such database (run `cellsched profile compute --model " + model.name +
                     "` first, or pass --db)");
  }
  const auto store = db::ProfileStore::open(db_path);
  if (compute_id == 0) compute_id = newest_compute(store, model, gpu_type, gpu, require_compute);
  if (compute_id != 0) {
    sel.compute = load_profile(store, db_path, compute_id, "compute", model.name);
  } else if (gpu && !require_compute) {
    sel.has_compute = false;
    sel.compute.kind = "compute";
  } else {
    throw InputError(db_path + ": no compute profile of model " + model.name +
                     " (run `cellsched profile compute --model " + model.name + "`, or pass --profile ID)");
  }
  if (comm_id == 0) comm_id = newest_comm(store, gpu_type);
  if (comm_id != 0) sel.comm = load_profile(store, db_path, comm_id, "comm", model.name);
  return sel;
}

nlohmann::json estimate_json(const estimator::Cell& cell, const estimator::Plan& plan,
                             const estimator::Estimate& e) {
  nlohmann::json j = nlohmann::json::parse(tuner::breakdown_json(e));
  j["cell"] = {{"model", cell.model}, {"gpu_type", cell.gpu_type}, {"hosts", cell.hosts},
               {"gpus_per_host", cell.gpus_per_host}, {"gpus", cell.gpus()}, {"stages", cell.stages}};
  j["plan"] = nlohmann::json::parse(tuner::plan_json(plan));
  j["memory_gib"] = e.memory_bytes / kGiB;
  return j;
}

void print_estimate(std::ostream& out, const estimator::Cell& cell, const estimator::Plan& plan,
                    const estimator::Estimate& e) {
  out << "cell: " << cell.model << " on " << cell.hosts << " x " << cell.gpus_per_host << " " << cell.gpu_type
      << ", " << count_of(cell.stages, "stage") << "; " << count_of(plan.micro_batches, "micro-batch") << " of "
      << plan.micro_batch_size << " (global batch " << plan.global_batch() << ")"
      << (plan.recompute ? ", activations recomputed" : "") << "\n";
  Table t({"stage", "layers", "dp", "tp", "fwd ms", "bwd ms", "tp comm ms", "send ms", "sync ms", "optim ms",
           "memory GiB"});
  for (size_t j = 0; j < e.stages.size(); ++j) {
    const auto& s = e.stages[j];
    t.add({std::to_string(j), std::to_string(s.first_layer) + "-" + std::to_string(s.first_layer + s.num_layers - 1),
           std::to_string(s.dp), std::to_string(s.tp), fixed(s.fwd_ms, 3), fixed(s.bwd_ms, 3),
           fixed(s.tp_comm_ms, 3), fixed(s.send_ms, 3), fixed(s.grad_sync_ms, 3), fixed(s.optimizer_ms, 3),
           fixed(s.memory_bytes / kGiB, 3)});
  }
  t.print(out);
  out << "iteration: " << fixed(e.iteration_ms, 3) << " ms = pipeline compute " << fixed(e.pipeline_compute_ms, 3)
      << " + pipeline comm " << fixed(e.pipeline_comm_ms, 3) << " + gradient sync and optimizer "
      << fixed(e.sync_ms, 3) << "\n";
  out << "throughput: " << fixed(e.samples_per_s, 2) << " samples/s\n";
  out << "memory: " << fixed(e.memory_bytes / kGiB, 3) << " GiB per GPU of " << fixed(e.memory_capacity_bytes / kGiB, 1)
      << " GiB usable" << (e.feasible ? "" : " -- INFEASIBLE: " + e.infeasible_reason) << "\n";
  out << "basis: " << estimator::basis_name(e.basis) << "; precision: " << precision_name(e.precision) << "\n";
  for (const auto& n : e.notes) out << "  note: " << n << "\n";
}

namespace {

struct Common {
  std::string model, gpu_type, db_path, optimizer = "adam", precision;
  int gpus = 1, gpus_per_host = 8, batch = 64;
  int64_t profile = 0, comm_profile = 0;
  double memory_fraction = 0.9;
};

void add_common(po::options_description& opt, Common& c) {
  opt.add_options()
      ("model", po::value(&c.model)->required(), "zoo name or model .yaml")
      ("gpu-type", po::value(&c.gpu_type)->required(), "catalogue GPU type (see cellsched gpus)")
      ("gpus", po::value(&c.gpus)->default_value(1), "GPUs in the cell")
      ("gpus-per-host", po::value(&c.gpus_per_host)->default_value(8), "GPUs per host (cells above span hosts)")
      ("batch", po::value(&c.batch)->default_value(64), "global batch (samples per iteration)")
      ("optimizer", po::value(&c.optimizer)->default_value("adam"), "adam, sgd or sgd-momentum as PyTorch runs them by default (one pass per line of the update), or "
       "adam-fused (one kernel: fused=True, apex, DeepSpeed)")
      ("precision", po::value(&c.precision),
       "fp32, tf32, fp16 or bf16 (16-bit: mixed, fp32 master weights); default: the model's, else bf16/fp16 "
       "where the GPU type has it, fp32 on the CPU")
      ("memory-fraction", po::value(&c.memory_fraction)->default_value(0.9), "usable share of device memory")
      ("db", po::value(&c.db_path)->default_value(default_db_path()), "SQLite file with the profiles")
      ("profile", po::value(&c.profile)->default_value(0), "compute profile id (default: newest matching)")
      ("comm-profile", po::value(&c.comm_profile)->default_value(0), "comm profile id (default: newest on the GPU type)")
      ("json", "print JSON");
}

struct Loaded {
  ModelSpec model;
  ProfileSelection profiles;
  std::optional<estimator::CostModel> cm;
};

Loaded load(const Common& c) {
  // Named here, where the flag is: deeper, estimate's plan parser would call
  // -5 "not divisible by mb" and the tuner would not name the value.
  if (c.batch < 1) throw InputError("--batch must be >= 1, got " + std::to_string(c.batch));
  Loaded l;
  l.model = load_model(c.model);
  const std::string type = canonical_gpu_name(c.gpu_type);
  l.profiles = select_profiles(c.db_path, l.model, type, c.profile, c.comm_profile, false);
  estimator::Options o;
  o.optimizer = c.optimizer;
  if (!c.precision.empty()) o.precision = parse_precision(c.precision);
  if (!(c.memory_fraction > 0 && c.memory_fraction <= 1)) throw InputError("--memory-fraction must be in (0, 1]");
  o.memory_fraction = c.memory_fraction;
  l.cm.emplace(l.model, type, l.profiles.has_compute ? &l.profiles.compute : nullptr,
               l.profiles.comm ? &*l.profiles.comm : nullptr, o);
  return l;
}

int parse_stages(const std::string& s) {
  if (s == "auto") return 0;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < 1 || v > 4096) throw InputError("--stages must be a positive integer or auto");
  return static_cast<int>(v);
}

}  // namespace

int cmd_estimate(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--validate" || a.rfind("--validate=", 0) == 0) return run_validate_gpu(args);
  po::options_description opt("estimate options");
  Common c;
  int stages = 1;
  std::string plan_spec;
  add_common(opt, c);
  opt.add_options()
      ("stages", po::value(&stages)->default_value(1), "pipeline stages")
      ("plan", po::value(&plan_spec)->default_value(""),
       "dp=D,tp=T,mb=B[,mbs=M][,layers=L0:L1...][,recompute=1]; per-stage values separated by ':'");
  po::variables_map vm;
  if (!parse("cellsched estimate --model M --gpu-type T --gpus N --stages S --plan dp=2,tp=2,mb=8 [options]\n"
             "       cellsched estimate --validate FILE (measured GPU iterations vs estimates; --validate --help)",
             args, opt, {}, vm))
    return 0;
  Loaded l = load(c);
  const estimator::Cell cell =
      estimator::make_cell(l.model.name, l.cm->gpu_type(), c.gpus, stages, c.gpus_per_host);
  const estimator::Plan plan = estimator::parse_plan(plan_spec, *l.cm, cell, c.batch);
  const estimator::Estimate e = estimator::estimate(*l.cm, cell, plan);
  if (vm.count("json")) {
    auto j = estimate_json(cell, plan, e);
    j["profile_run_id"] = l.cm->compute_run_id();
    j["comm_profile_run_id"] = l.cm->comm_run_id();  // 0: links from the catalogue
    std::cout << j.dump(2) << "\n";
  } else {
    print_estimate(std::cout, cell, plan, e);
  }
  return 0;
}

namespace {

// One stored cell as a table row: its stages' layers and shapes, and its micro-batching.
std::vector<std::string> cell_row(const db::CellRecord& r) {
  std::string p = "-", mb = "-";
  const bool inf = r.basis == "infeasible";
  if (!inf) {
    const auto plan = tuner::plan_from_json(r.plan);
    p.clear();
    for (const auto& s : plan.stages)
      p += (p.empty() ? "" : " | ") + std::to_string(s.num_layers) + "L " + std::to_string(s.dp) + "x" +
           std::to_string(s.tp);
    mb = std::to_string(plan.micro_batches) + "x" + std::to_string(plan.micro_batch_size) +
         (plan.recompute ? " recompute" : "");
  }
  return {std::to_string(r.hosts * r.gpus_per_host), std::to_string(r.hosts), r.stages ? std::to_string(r.stages) : "auto",
          r.basis, inf ? "-" : fixed(r.iteration_ms, 3), inf ? "-" : fixed(r.samples_per_s, 2),
          inf ? "-" : fixed(r.memory_gib, 2), mb, p};
}

nlohmann::json finite_or_null(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }

// `tune --all`: every cell of 1, 2, 4 ... --gpus GPUs at every stage count, stored.
int tune_every_cell(const Loaded& l, const Common& c, const tuner::TuneOptions& to, db::CellStore* store, bool json) {
  const estimator::CostModel& cm = *l.cm;
  const int64_t pid = cm.compute_run_id();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<db::CellRecord> recs;
  for (int n = 1; n <= c.gpus; n *= 2) {
    std::vector<tuner::TuneResult> per;
    const auto base = estimator::make_cell(l.model.name, cm.gpu_type(), n, 1, c.gpus_per_host);
    const auto best = tuner::tune_auto(cm, base, to, &per);
    for (const auto& r : per) recs.push_back(cell_record(r, r.cell.stages, c.batch, pid));
    recs.push_back(cell_record(best, 0, c.batch, pid));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (store) store->save(recs);
  if (json) {
    nlohmann::json a = nlohmann::json::array();
    // "auto" rows (the best over stage counts) say so and give the stage
    // count they chose (a 0 there read as a count and doubled real rows);
    // an infeasible cell has no stages, time, memory nor plan: null.
    for (const auto& r : recs) {
      const bool feasible = r.basis != "infeasible";
      const auto stages = !feasible ? nlohmann::json()
                          : r.stages ? nlohmann::json(r.stages)
                                     : nlohmann::json(tuner::plan_from_json(r.plan).stages.size());
      a.push_back({{"gpus", r.hosts * r.gpus_per_host}, {"hosts", r.hosts}, {"stages", stages},
                   {"auto", r.stages == 0}, {"feasible", feasible}, {"basis", r.basis},
                   {"iteration_ms", feasible ? finite_or_null(r.iteration_ms) : nlohmann::json()},
                   {"samples_per_s", feasible ? finite_or_null(r.samples_per_s) : nlohmann::json()},
                   {"memory_gib", feasible ? finite_or_null(r.memory_gib) : nlohmann::json()},
                   {"plan", feasible ? nlohmann::json::parse(r.plan) : nlohmann::json()}});
    }
    std::cout << nlohmann::json{{"model", l.model.name}, {"gpu_type", cm.gpu_type()}, {"cells", a},
                                {"tune_seconds", secs}, {"profile_run_id", pid},
                                {"comm_profile_run_id", cm.comm_run_id()}}.dump(2) << "\n";
    return 0;
  }
  Table t({"gpus", "hosts", "stages", "basis", "iteration ms", "samples/s", "memory GiB", "mb", "plan (stage: layers dp x tp)"});
  t.left_align(8);  // long text last, unpadded: rows stay as wide as their own plan
  for (const auto& r : recs) t.add(cell_row(r));
  t.print(std::cout);
  std::cout << recs.size() << " cells tuned in " << fixed(secs * 1000, 1) << " ms"
            << (store ? "; stored in " + c.db_path : "") << "\n";
  return 0;
}

// Whether a stored plan was tuned under the options of this run: the same
// plan priced now gives the stored time, memory and capacity. Another
// --optimizer, --precision, --memory-fraction or comm profile does not, and
// its "best" plan is stale (it answered INFEASIBLE, exit 0, where another
// plan fits).
bool tuned_like_this(const db::CellRecord& hit, const estimator::Estimate& e) {
  const auto b = nlohmann::json::parse(hit.breakdown, nullptr, false);
  const auto same = [&](const char* key, double now) {
    const auto it = b.find(key);
    return it != b.end() && it->is_number() && std::abs(it->get<double>() - now) <= 1e-9 * std::max(1.0, std::abs(now));
  };
  return e.feasible && same("iteration_ms", e.iteration_ms) && same("memory_bytes", e.memory_bytes) &&
         same("memory_capacity_bytes", e.memory_capacity_bytes);
}

// A cell the store already holds, tuned from the same profile under the same
// options: printed, true. Otherwise false: the caller tunes it again.
bool answer_from_store(const db::CellStore& store, const estimator::CostModel& cm, estimator::Cell cell,
                       int stages, int batch, bool json) {
  const auto hit = store.find(cell.model, cell.gpu_type, cell.hosts, cell.gpus_per_host, stages, batch);
  if (!hit || hit->profile_run_id != cm.compute_run_id() || hit->basis == "infeasible") return false;
  const auto plan = tuner::plan_from_json(hit->plan);
  cell.stages = static_cast<int>(plan.stages.size());
  const auto e = estimator::estimate(cm, cell, plan);
  if (!tuned_like_this(*hit, e)) return false;
  if (json) {
    auto j = estimate_json(cell, plan, e);
    j["from_store"] = hit->id;
    j["profile_run_id"] = cm.compute_run_id();
    j["comm_profile_run_id"] = cm.comm_run_id();
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "from the store (cell estimate " << hit->id << ", " << hit->created_at << ")\n";
    print_estimate(std::cout, cell, plan, e);
  }
  return true;
}

// The best plan of a tuned cell and its Pareto alternatives.
void print_tuned(const tuner::TuneResult& r, double secs, int64_t pid, int64_t comm_pid, bool json,
                 const std::string& stored_in) {
  if (json) {
    auto j = estimate_json(r.cell, r.best().plan, r.best().estimate);
    j["tune_seconds"] = secs;
    j["profile_run_id"] = pid;
    j["comm_profile_run_id"] = comm_pid;
    nlohmann::json alts = nlohmann::json::array();
    for (const auto& p : r.pareto)
      alts.push_back({{"plan", nlohmann::json::parse(tuner::plan_json(p.plan))},
                      {"iteration_ms", p.estimate.iteration_ms}, {"memory_gib", p.estimate.memory_bytes / kGiB}});
    j["pareto"] = alts;
    std::cout << j.dump(2) << "\n";
    return;
  }
  print_estimate(std::cout, r.cell, r.best().plan, r.best().estimate);
  if (r.pareto.size() > 1) {
    std::cout << "pareto (time vs memory):\n";
    for (const auto& p : r.pareto)
      std::cout << "  " << fixed(p.estimate.iteration_ms, 3) << " ms, " << fixed(p.estimate.memory_bytes / kGiB, 3)
                << " GiB: " << tuner::plan_json(p.plan) << "\n";
  }
  std::cout << "tuned in " << fixed(secs * 1000, 2) << " ms"
            << (stored_in.empty() ? "" : "; stored in " + stored_in) << "\n";
}

}  // namespace

int cmd_tune(const std::vector<std::string>& args) {
  po::options_description opt("tune options");
  Common c;
  std::string stages_s = "auto";
  int pareto = 4;
  add_common(opt, c);
  opt.add_options()
      ("stages", po::value(&stages_s)->default_value("auto"), "pipeline stages, or auto (every count dividing --gpus)")
      ("all", "tune every cell of 1, 2, 4 ... --gpus GPUs and every stage count; store them all")
      ("pareto", po::value(&pareto)->default_value(4), "plans kept per cell (time vs memory)")
      ("force", "tune again even when the store holds the cell (a cell tuned under other options, "
                "--optimizer, --precision, --memory-fraction or comm profile, is tuned again anyway)")
      ("no-recompute", "plans without activation recomputation only (implies --no-db: stored cells consider it)")
      ("no-db", "do not read or write cell estimates (implied by --precision: the store keeps default-precision cells)");
  po::variables_map vm;
  if (!parse("cellsched tune --model M --gpu-type T --gpus N [--stages auto|S] [--all] [options]", args, opt, {}, vm))
    return 0;
  const bool json = vm.count("json") > 0;
  const int stages = parse_stages(stages_s);
  check_flag_range("pareto", pareto, 1, 1000);  // 0 and -1 kept one plan, as 1 does
  Loaded l = load(c);
  const estimator::CostModel& cm = *l.cm;
  tuner::TuneOptions to;
  to.global_batch = c.batch;
  to.pareto_size = pareto;
  to.recompute = !vm.count("no-recompute");
  const int64_t pid = cm.compute_run_id();
  // The store's key has no precision: a cell at an explicit precision is neither read nor stored.
  const bool use_db = !vm.count("no-db") && c.precision.empty() && to.recompute;
  std::optional<db::CellStore> store;
  if (use_db) store.emplace(db::CellStore::open(c.db_path));
  if (vm.count("all")) return tune_every_cell(l, c, to, store ? &*store : nullptr, json);

  estimator::Cell cell = estimator::make_cell(l.model.name, cm.gpu_type(), c.gpus, std::max(stages, 1), c.gpus_per_host);
  // Repeated queries come from the store (when priced from the same profile).
  if (store && !vm.count("force") && answer_from_store(*store, cm, cell, stages, c.batch, json)) return 0;
  std::vector<tuner::TuneResult> per;
  const auto t0 = std::chrono::steady_clock::now();
  const tuner::TuneResult r = stages == 0 ? tuner::tune_auto(cm, cell, to, &per) : tuner::tune_cell(cm, cell, to);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.shapes == 0)  // no memory question: the cell cannot hold this batch at all
    throw InputError("no plan of " + std::to_string(c.gpus) + " GPUs splits a global batch of " +
                     std::to_string(c.batch) + " (each data-parallel replica takes whole samples, and tensor "
                     "parallelism stays inside a host): raise --batch or lower --gpus");
  if (store) {
    std::vector<db::CellRecord> recs;
    for (const auto& p : per) recs.push_back(cell_record(p, p.cell.stages, c.batch, pid));
    recs.push_back(cell_record(r, stages, c.batch, pid));
    store->save(recs);
  }
  if (!r.feasible) {
    std::string why = "no plan of " + std::to_string(c.gpus) + " " + cm.gpu_type() + " GPUs fits " + l.model.name +
                      " in memory";
    // Gradient accumulation splits the batch in power-of-two counts that divide it.
    const long split = c.batch & -c.batch;
    if (split < c.batch)
      why += " (micro-batch counts tried: powers of two dividing " + std::to_string(c.batch) + ", up to " +
             std::to_string(split) + ")";
    if (json)  // a script reads the answer as it reads estimate's: feasible false, and why
      std::cout << nlohmann::json{{"model", l.model.name}, {"gpu_type", cm.gpu_type()}, {"gpus", c.gpus},
                                  {"feasible", false}, {"infeasible_reason", why}, {"tune_seconds", secs}}.dump(2)
                << "\n";
    std::cerr << "cellsched tune: " << why << "\n";
    return 1;
  }
  print_tuned(r, secs, pid, cm.comm_run_id(), json, store ? c.db_path : "");
  return 0;
}

}  // namespace cellsched::cli
