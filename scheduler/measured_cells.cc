#include "scheduler/measured_cells.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/gpu.h"
#include "core/trace_read.h"

namespace cellsched {

namespace {
const char* const kColumns = "model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s";
}

// The same file `cellsched estimate --validate` reads: `#` lines are comments,
// the header starts with the seven columns, and columns after them (split,
// optimizer, source, ...) are read past.
std::vector<MeasuredCell> load_measured_cells(const std::string& path) {
  std::string text = detail::read_file(path);
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  const auto lines = detail::split_lines(text);
  std::vector<MeasuredCell> cells;
  std::map<std::tuple<std::string, int, std::string, std::string, int, int>, long> seen;
  detail::for_each_row(path, lines, "measured-cell", kColumns,
                       [&](const detail::Ctx& c, const std::vector<std::string>& f) {
    MeasuredCell m;
    m.line = c.line;
    m.model = std::string(detail::trim(f[0]));
    if (m.model.empty()) c.fail("empty model");
    m.batch = c.positive_int(f[1], "batch");
    m.precision = detail::lower(detail::trim(f[2]));
    if (m.precision.empty()) c.fail("empty precision");
    const std::string type(detail::trim(f[3]));
    if (!find_gpu(type))
      c.fail("unknown gpu_type '" + type + "' (cellsched gpus lists the known ones)");
    m.gpu_type = canonical_gpu_name(type);
    m.hosts = c.positive_int(f[4], "hosts");
    m.gpus_per_host = c.positive_int(f[5], "gpus_per_host");
    if (static_cast<long>(m.hosts) * m.gpus_per_host > 1000000) c.fail("too many GPUs");
    m.iter_time_s = c.number(f[6], "iter_time_s");
    if (!(m.iter_time_s >= 1e-6 && m.iter_time_s < 1e6))  // 1e308: a job that never ends
      c.fail("iter_time_s must be a number of seconds in [1e-6, 1e6), got " + c.quoted(f[6]));
    const auto key = std::make_tuple(m.model, m.batch, m.precision, m.gpu_type, m.hosts,
                                     m.gpus_per_host);
    if (auto [it, fresh] = seen.emplace(key, c.line); !fresh)
      c.fail("the same cell as line " + std::to_string(it->second));
    cells.push_back(std::move(m));
  }, /*leading=*/true);
  if (cells.empty()) fail_input(path, 0, "no cells");
  return cells;
}

MeasuredCellOracle::MeasuredCellOracle(std::vector<MeasuredCell> cells, std::string source,
                                       double locality_penalty, std::string precision)
    : source_(std::move(source)), penalty_(locality_penalty) {
  if (!(penalty_ > 0 && penalty_ <= 1))
    throw InputError("locality penalty must be in (0, 1], got " + std::to_string(penalty_));
  precision = detail::lower(precision);
  // The precision used per model: the one asked for, else the first in the file.
  std::map<std::string, std::string> use;
  for (const MeasuredCell& m : cells)
    if (precision.empty() || m.precision == precision) use.emplace(m.model, m.precision);
  if (use.empty()) throw InputError(source_ + ": no cell has precision '" + precision + "'");
  std::map<std::tuple<std::string, std::string, int, int, bool>, int> hosts_of;
  for (const MeasuredCell& m : cells) {
    auto u = use.find(m.model);
    if (u == use.end() || u->second != m.precision) continue;
    ModelCells& mc = models_[m.model];
    const auto key = std::make_pair(m.hosts * m.gpus_per_host, m.hosts > 1);
    int& hosts = hosts_of[{m.model, m.gpu_type, m.batch, key.first, key.second}];
    Grid& grid = mc.by_type[m.gpu_type][m.batch];
    if (hosts == 0 || m.hosts < hosts) {
      hosts = m.hosts;
      grid[key] = m.iter_time_s;
    }
  }
}

double MeasuredCellOracle::throughput(const Job& job, const std::string& gpu_type, int workers,
                                      bool consolidated) const {
  if (workers <= 0) return 0;
  const std::string& model = job.model.empty() ? job.job_type : job.model;
  const auto mc = models_.find(model);
  if (mc == models_.end()) return 0;
  const auto by_type = mc->second.by_type.find(gpu_type);
  if (by_type == mc->second.by_type.end()) return 0;
  // The batch whose cells are used (of those measured on this type), and
  // the factor from its iterations to the job's (samples/s held).
  const std::map<int, Grid>& batches = by_type->second;
  auto chosen = batches.begin();
  double factor = 1;
  if (job.batch_size > 0) {
    double best = -1;
    for (auto b = batches.begin(); b != batches.end(); ++b) {
      const double d = std::fabs(std::log(static_cast<double>(b->first) / job.batch_size));
      if (best < 0 || d < best) best = d, chosen = b;
    }
    factor = static_cast<double>(chosen->first) / job.batch_size;
  }
  const Grid& grid = chosen->second;
  const bool spread = !consolidated && workers > 1;
  if (auto it = grid.find({workers, spread}); it != grid.end()) return factor / it->second;
  if (auto it = grid.find({workers, !spread}); it != grid.end())
    return factor / it->second * (spread ? penalty_ : 1.0);
  // The largest measured total below, the wanted locality first.
  auto it = grid.lower_bound({workers, false});
  if (it == grid.begin()) return 0;
  --it;
  const int w = it->first.first;
  if (it->first.second != spread && it != grid.begin() && std::prev(it)->first.first == w) --it;
  const bool basis_spread = it->first.second;
  return factor / it->second * workers / w * (spread && !basis_spread ? penalty_ : 1.0);
}

std::string MeasuredCellOracle::plan(const Job& job, const std::string& gpu_type,
                                     int workers) const {
  return throughput(job, gpu_type, workers, true) > 0 ? "measured" : "";
}

}  // namespace cellsched
