// `cellsched estimate --validate FILE`: the estimator against real GPU
// measurements (estimator/measurements.h describes the CSV). No LibTorch.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/estimate_common.h"
#include "core/error.h"
#include "core/gpu.h"
#include "estimator/measurements.h"

namespace cellsched::cli {

namespace {

std::string percent(double x) { return fixed(100 * x, 1) + "%"; }

void print_summary(std::ostream& out, const std::string& name, const estimator::Summary& s) {
  out << (name.empty() ? "all" : name) << ": " << s.rows << " rows, median |error| " << percent(s.median_error)
      << ", worst " << percent(s.worst_error) << ", GPU-type pairs ordered " << s.ordered << "/" << s.pairs;
  if (s.pairs > 0) out << " (" << percent(static_cast<double>(s.ordered) / s.pairs) << ")";
  if (s.memory_rows > 0)
    out << "; memory: " << s.memory_rows << " rows, median |error| " << percent(s.memory_median_error) << ", worst "
        << percent(s.memory_worst_error);
  out << "\n";
}

}  // namespace

int run_validate_gpu(const std::vector<std::string>& args) {
  po::options_description opt("estimate --validate options");
  std::string file, split, from;
  opt.add_options()
      ("validate", po::value(&file)->required(),
       "CSV of measured iterations: model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s"
       "[,split][,optimizer][,peak_memory_gib][,source]; batch = global samples per iteration")
      ("split", po::value(&split)->default_value(""), "only rows of this split (e.g. validation)")
      ("transfer-from", po::value(&from)->default_value(""),
       "also price each row as a transfer from its twin measured on this GPU type (same model, batch, "
       "precision and GPUs): that row's time x the modeled ratio of the two types")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse("cellsched estimate --validate FILE [--split S] [--transfer-from TYPE] [--json]", args, opt, {}, vm))
    return 0;
  if (!from.empty()) {
    from = canonical_gpu_name(from);
    if (find_gpu(from)->arch == "cpu") throw InputError("--transfer-from cpu: the rows are GPU measurements; name a GPU type");
  }
  if (!split.empty() && split != "calibration" && split != "validation")
    throw InputError("--split must be calibration or validation, got '" + split + "'");
  auto ms = estimator::read_measurements(file);
  if (!split.empty()) {
    std::erase_if(ms, [&](const estimator::Measurement& m) { return m.split != split; });
    if (ms.empty()) throw InputError(file + ": no rows of split '" + split + "'");
  }
  const auto rows = estimator::compare(ms, std::filesystem::path(file).parent_path().string(), from);
  const auto sums = estimator::summarize(rows);
  const estimator::Summary moved = estimator::summarize_transferred(rows);
  if (vm.count("json")) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& c : rows)
      a.push_back({{"line", c.m.line}, {"model", c.m.model}, {"batch", c.m.batch},
                   {"precision", precision_name(c.m.precision)}, {"gpu_type", c.m.gpu_type},
                   {"hosts", c.m.hosts}, {"gpus_per_host", c.m.gpus_per_host}, {"split", c.m.split},
                   {"measured_s", c.m.iter_time_s}, {"estimated_s", c.estimated_s}, {"ratio", c.ratio()},
                   {"basis", c.basis}, {"feasible", c.feasible}, {"micro_batches", c.micro_batches},
                   {"transferred_s", c.transferred_s > 0 ? nlohmann::json(c.transferred_s) : nlohmann::json()},
                   {"estimated_memory_gib", c.estimated_memory_gib},
                   {"peak_memory_gib", c.m.peak_memory_gib > 0 ? nlohmann::json(c.m.peak_memory_gib) : nlohmann::json()}});
    nlohmann::json s = nlohmann::json::object();
    for (const auto& [k, v] : sums)
      s[k.empty() ? "all" : k] = {{"rows", v.rows}, {"median_error", v.median_error}, {"worst_error", v.worst_error},
                                  {"pairs", v.pairs}, {"ordered", v.ordered}, {"memory_rows", v.memory_rows},
                                  // no row measured memory: no error to give (0.0 read as perfect)
                                  {"memory_median_error", v.memory_rows ? nlohmann::json(v.memory_median_error) : nlohmann::json()},
                                  {"memory_worst_error", v.memory_rows ? nlohmann::json(v.memory_worst_error) : nlohmann::json()}};
    if (!from.empty())
      s["transferred"] = {{"from", from}, {"rows", moved.rows}, {"median_error", moved.median_error},
                          {"worst_error", moved.worst_error}, {"pairs", moved.pairs}, {"ordered", moved.ordered}};
    std::cout << nlohmann::json{{"file", file}, {"rows", a}, {"summary", s}}.dump(2) << "\n";
    return 0;
  }
  std::vector<std::string> head = {"line", "model", "batch", "prec", "GPU type", "GPUs", "split", "measured s",
                                   "modeled s", "ratio", "accum", "basis"};
  if (!from.empty()) head.insert(head.end(), {"transferred s", "ratio"});
  const bool memory = std::any_of(rows.begin(), rows.end(), [](const auto& c) { return c.m.peak_memory_gib > 0; });
  if (memory) head.insert(head.end(), {"peak GiB", "est GiB", "mem ratio"});
  Table t(head);
  for (const auto& c : rows) {
    std::vector<std::string> r = {std::to_string(c.m.line), c.m.model, std::to_string(c.m.batch),
                                  precision_name(c.m.precision), c.m.gpu_type,
                                  std::to_string(c.m.hosts * c.m.gpus_per_host), c.m.split.empty() ? "-" : c.m.split,
                                  fixed(c.m.iter_time_s, 4), fixed(c.estimated_s, 4), fixed(c.ratio(), 2),
                                  std::to_string(c.micro_batches), c.basis + (c.feasible ? "" : " (over memory)")};
    if (!from.empty()) {
      r.push_back(c.transferred_s > 0 ? fixed(c.transferred_s, 4) : "-");
      r.push_back(c.transferred_s > 0 ? fixed(c.transferred_s / c.m.iter_time_s, 2) : "-");
    }
    if (memory) {
      const bool has = c.m.peak_memory_gib > 0;
      r.push_back(has ? fixed(c.m.peak_memory_gib, 1) : "-");
      r.push_back(fixed(c.estimated_memory_gib, 1));
      r.push_back(has ? fixed(c.memory_ratio(), 2) : "-");
    }
    t.add(r);
  }
  t.print(std::cout);
  for (const auto& [k, v] : sums) print_summary(std::cout, k, v);
  if (!from.empty()) print_summary(std::cout, "transferred from " + from, moved);
  return 0;
}

}  // namespace cellsched::cli
