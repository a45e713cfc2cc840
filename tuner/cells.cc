#include "tuner/cells.h"

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace cellsched {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

db::CellRecord cell_record(const tuner::TuneResult& r, int stages_key, int global_batch,
                           int64_t profile_run_id) {
  db::CellRecord c;
  c.model = r.cell.model;
  c.gpu_type = r.cell.gpu_type;
  c.hosts = r.cell.hosts;
  c.gpus_per_host = r.cell.gpus_per_host;
  c.stages = stages_key;
  c.global_batch = global_batch;
  c.profile_run_id = profile_run_id;
  if (!r.feasible) {
    c.basis = "infeasible";
    c.iteration_ms = c.samples_per_s = c.memory_gib = std::nan("");
    return c;
  }
  const auto& e = r.best().estimate;
  c.basis = estimator::basis_name(e.basis);
  c.iteration_ms = e.iteration_ms;
  c.samples_per_s = e.samples_per_s;
  c.memory_gib = e.memory_bytes / kGiB;
  c.plan = tuner::plan_json(r.best().plan);
  nlohmann::json b = nlohmann::json::parse(tuner::breakdown_json(e));
  b["stages_chosen"] = r.cell.stages;
  nlohmann::json alts = nlohmann::json::array();
  for (size_t i = 1; i < r.pareto.size(); ++i)
    alts.push_back({{"plan", nlohmann::json::parse(tuner::plan_json(r.pareto[i].plan))},
                    {"iteration_ms", r.pareto[i].estimate.iteration_ms},
                    {"memory_gib", r.pareto[i].estimate.memory_bytes / kGiB}});
  b["pareto"] = alts;
  c.breakdown = b.dump();
  return c;
}

std::string plan_summary(const estimator::Plan& plan) {
  std::ostringstream s;
  s << "pp=" << plan.stages.size() << " [";
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const auto& st = plan.stages[i];
    s << (i ? " | " : "") << st.first_layer << "-" << st.first_layer + st.num_layers - 1 << " dp"
      << st.dp << " tp" << st.tp;
  }
  s << "] mb " << plan.micro_batches << "x" << plan.micro_batch_size;
  return s.str();
}

CellOracle::CellOracle(db::CellStore& store, CostModelFactory factory, const Cluster& cluster,
                       tuner::TuneOptions options, std::string source)
    : store_(store), factory_(std::move(factory)), options_(std::move(options)),
      source_(std::move(source)) {
  for (const Node& n : cluster.nodes) per_host_[n.gpu_type] = std::max(per_host_[n.gpu_type], n.gpus);
}

const CellOracle::Entry& CellOracle::lookup(const Job& job, const std::string& gpu_type,
                                            int workers, bool consolidated) const {
  // Shape of the allocation: one host, or spread over hosts of this type.
  int gph = workers, hosts = 1;
  if (!consolidated && workers > 1) {
    const int per_host = per_host_.count(gpu_type) ? per_host_.at(gpu_type) : workers;
    gph = std::min(workers, per_host);
    if (gph == workers) gph = workers / 2;  // spread, though one host could hold it
    while (workers % gph) --gph;
    hosts = workers / gph;
  }
  const std::string model = job.model.empty() ? job.job_type : job.model;
  const int batch = job.batch_size > 0 ? job.batch_size : options_.global_batch;
  const Key key{model, batch, gpu_type, hosts, gph};
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;

  Entry e;
  auto& cm = models_[{model, gpu_type}];
  if (!cm) cm = factory_(model, gpu_type);
  if (cm) {
    const int64_t pid = cm->compute_run_id();
    const auto hit = store_.find(model, gpu_type, hosts, gph, 0, batch);
    if (hit && hit->profile_run_id == pid) {
      ++store_hits_;
      if (hit->basis != "infeasible") {
        e.iterations_per_s = hit->samples_per_s / batch;
        e.plan = plan_summary(tuner::plan_from_json(hit->plan)) + " (" + hit->basis + ")";
      }
    } else {
      try {
        tuner::TuneOptions o = options_;
        o.global_batch = batch;
        estimator::Cell cell{model, gpu_type, hosts, gph, 1};
        std::vector<tuner::TuneResult> per;
        const tuner::TuneResult best = tuner::tune_auto(*cm, cell, o, &per);
        std::vector<db::CellRecord> recs;
        for (const auto& r : per) recs.push_back(cell_record(r, r.cell.stages, batch, pid));
        recs.push_back(cell_record(best, 0, batch, pid));
        store_.save(recs);
        ++tuned_;
        if (best.feasible) {
          e.iterations_per_s = best.best().estimate.samples_per_s / batch;
          e.plan = plan_summary(best.best().plan) + " (" +
                   estimator::basis_name(best.best().estimate.basis) + ")";
        }
      } catch (const InputError&) {
        // An impossible cell (more stages than layers, a batch the GPUs
        // cannot split): the job cannot run so.
      }
    }
  }
  return cache_.emplace(key, std::move(e)).first->second;
}

double CellOracle::throughput(const Job& job, const std::string& gpu_type, int workers,
                              bool consolidated) const {
  if (workers <= 0) return 0;
  return lookup(job, gpu_type, workers, consolidated).iterations_per_s;
}

std::string CellOracle::plan(const Job& job, const std::string& gpu_type, int workers) const {
  if (workers <= 0) return "";
  return lookup(job, gpu_type, workers, true).plan;
}

}  // namespace cellsched
