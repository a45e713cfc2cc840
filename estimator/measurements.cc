#include "estimator/measurements.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/gpu.h"
#include "core/model.h"
#include "core/parse_util.h"
#include "core/stats.h"
#include "core/trace_read.h"
#include "estimator/estimator.h"

namespace cellsched::estimator {

namespace {

const std::vector<std::string> kColumns = {"model", "batch", "precision", "gpu_type", "hosts", "gpus_per_host",
                                           "iter_time_s"};

int positive_int(const std::string& path, long line, const std::string& name, std::string_view v) {
  const auto n = detail::to_int(detail::trim(v));
  if (!n || *n < 1 || *n > (1 << 24))
    fail_input(path, line, name + " must be a whole number in [1, 16777216], got '" + std::string(v) + "'");
  return static_cast<int>(*n);
}

std::string model_path(const std::string& model, const std::string& base_dir) {
  if ((detail::ends_with_ci(model, ".yaml") || detail::ends_with_ci(model, ".yml")) && !model.empty() &&
      model[0] != '/')
    return (std::filesystem::path(base_dir) / model).string();
  return model;
}

}  // namespace

double Comparison::error() const { return std::abs(ratio() - 1); }

std::vector<Measurement> read_measurements(const std::string& path) {
  const std::string text = detail::read_file(path);
  const auto lines = detail::split_lines(text);
  std::vector<Measurement> out;
  std::vector<std::string> header;
  int split_col = -1, source_col = -1, optimizer_col = -1, memory_col = -1;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  for (size_t i = 0; i < lines.size(); ++i) {
    const long ln = static_cast<long>(i) + 1;
    const std::string_view raw = detail::trim(lines[i]);
    if (raw.empty() || raw[0] == '#') continue;
    // RFC 4180 fields, as the measured-cells table reads the same file
    // (quoted fields may hold commas; a stray quote is an error).
    std::vector<std::string> f;
    std::string bad_quote;
    if (!detail::split_csv(raw, f, bad_quote)) fail_input(path, ln, bad_quote);
    for (std::string& c : f) c = std::string(detail::trim(c));
    if (header.empty()) {
      header = f;
      if (header.size() < kColumns.size() || !std::equal(kColumns.begin(), kColumns.end(), header.begin()))
        fail_input(path, ln, "the header must start with model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s");
      for (size_t c = kColumns.size(); c < header.size(); ++c) {
        if (header[c] == "split") split_col = static_cast<int>(c);
        if (header[c] == "source") source_col = static_cast<int>(c);
        if (header[c] == "optimizer") optimizer_col = static_cast<int>(c);
        if (header[c] == "peak_memory_gib") memory_col = static_cast<int>(c);
      }
      continue;
    }
    if (f.size() != header.size())
      fail_input(path, ln, std::to_string(f.size()) + " fields, the header has " + std::to_string(header.size()));
    Measurement m;
    m.line = ln;
    m.model = f[0];
    m.batch = positive_int(path, ln, "batch", f[1]);
    try {
      m.precision = parse_precision(f[2]);
      if (m.precision == Precision::Default) throw InputError("say fp32, tf32, fp16 or bf16");
      m.gpu_type = canonical_gpu_name(f[3]);
      // A GPU's measurement at a precision the type has (bf16 on a V100 was
      // refused later, with no line to find it by).
      const GpuSpec& g = *find_gpu(m.gpu_type);
      if (g.arch == "cpu") throw InputError("gpu_type cpu: this file holds GPU measurements (validate checks the CPU)");
      resolve_precision(m.precision, g);
      load_model(model_path(m.model, dir));
    } catch (const InputError& e) {
      fail_input(path, ln, e.what());
    }
    m.hosts = positive_int(path, ln, "hosts", f[4]);
    m.gpus_per_host = positive_int(path, ln, "gpus_per_host", f[5]);
    const auto t = detail::to_double(f[6]);
    // From a microsecond (no training step is shorter) to below 1e6 s: 1e-300 gave errors of 1e62 %.
    if (!t || !(*t >= 1e-6 && *t < 1e6))
      fail_input(path, ln, "iter_time_s must be a number of seconds in [1e-6, 1e6), got '" + f[6] + "'");
    m.iter_time_s = *t;
    if (m.batch % (m.hosts * m.gpus_per_host) != 0)
      fail_input(path, ln, "batch " + f[1] + " does not split over " + std::to_string(m.hosts * m.gpus_per_host) +
                               " GPUs");
    if (split_col >= 0) m.split = f[static_cast<size_t>(split_col)];
    // A misspelled split ("valdation") made a group of its own, and
    // --split validation dropped the row without a word.
    if (!m.split.empty() && m.split != "calibration" && m.split != "validation")
      fail_input(path, ln, "split must be calibration, validation or empty, got '" + m.split + "'");
    if (source_col >= 0) m.source = f[static_cast<size_t>(source_col)];
    if (optimizer_col >= 0 && !f[static_cast<size_t>(optimizer_col)].empty()) {
      m.optimizer = f[static_cast<size_t>(optimizer_col)];
      if (!known_optimizer(m.optimizer))
        fail_input(path, ln, std::string("optimizer must be ") + kOptimizers + ", got '" + m.optimizer + "'");
    }
    if (memory_col >= 0 && !f[static_cast<size_t>(memory_col)].empty()) {
      const std::string& v = f[static_cast<size_t>(memory_col)];
      const auto g = detail::to_double(v);
      if (!g || !std::isfinite(*g) || *g <= 0 || *g >= 1e6)
        fail_input(path, ln, "peak_memory_gib must be a positive number of GiB below 1e6 (or empty), got '" + v + "'");
      m.peak_memory_gib = *g;
    }
    out.push_back(std::move(m));
  }
  if (header.empty()) fail_input(path, 1, "empty file (expected the header " + std::string("model,batch,...") + ")");
  if (out.empty()) fail_input(path, static_cast<long>(lines.size()), "no measurements");
  return out;
}

namespace {

// The modeled data-parallel estimate of one row: the fewest micro-batches
// that fit (a feasible plan), else one micro-batch, marked infeasible.
Comparison modeled(const Measurement& m, const ModelSpec& spec) {
  Options o;
  o.precision = m.precision;
  o.optimizer = m.optimizer;
  const CostModel cm(spec, m.gpu_type, nullptr, nullptr, o);
  Cell cell{spec.name, cm.gpu_type(), m.hosts, m.gpus_per_host, 1};
  const int gpus = cell.gpus();
  Comparison c;
  c.m = m;
  for (int b = 1; b <= m.batch; b *= 2) {
    if (m.batch % b != 0 || (m.batch / b) % gpus != 0) continue;
    Plan p;
    p.micro_batches = b;
    p.micro_batch_size = m.batch / b;
    p.stages = {{0, cm.num_layers(), gpus, 1}};
    const Estimate e = estimate(cm, cell, p);
    if (b == 1 || e.feasible) {
      c.estimated_s = e.iteration_ms / 1000.0;
      c.basis = basis_name(e.basis);
      c.feasible = e.feasible;
      c.micro_batches = b;
      c.estimated_memory_gib = e.memory_bytes / double(int64_t{1} << 30);
    }
    if (e.feasible) break;
  }
  return c;
}

}  // namespace

std::vector<Comparison> compare(const std::vector<Measurement>& ms, const std::string& base_dir,
                                const std::string& transfer_from) {
  const std::string from = transfer_from.empty() ? "" : canonical_gpu_name(transfer_from);
  std::vector<Comparison> out;
  for (const Measurement& m : ms) out.push_back(modeled(m, load_model(model_path(m.model, base_dir))));
  if (from.empty()) return out;
  for (Comparison& c : out) {
    if (c.m.gpu_type == from) continue;
    for (const Comparison& twin : out) {
      const Measurement& t = twin.m;
      if (t.gpu_type != from || t.model != c.m.model || t.batch != c.m.batch || t.precision != c.m.precision ||
          t.hosts != c.m.hosts || t.gpus_per_host != c.m.gpus_per_host || twin.estimated_s <= 0)
        continue;
      c.transferred_s = t.iter_time_s * c.estimated_s / twin.estimated_s;
      break;
    }
  }
  return out;
}

namespace {

Summary summary_of(const std::vector<const Comparison*>& rows) {
  Summary s;
  s.rows = static_cast<int>(rows.size());
  if (rows.empty()) return s;
  std::vector<double> err, mem;
  for (const Comparison* c : rows) {
    err.push_back(c->error());
    if (c->m.peak_memory_gib > 0) mem.push_back(std::abs(c->memory_ratio() - 1));
  }
  s.median_error = median(err);
  s.worst_error = *std::max_element(err.begin(), err.end());
  s.memory_rows = static_cast<int>(mem.size());
  if (!mem.empty()) {
    s.memory_median_error = median(mem);
    s.memory_worst_error = *std::max_element(mem.begin(), mem.end());
  }
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = i + 1; j < rows.size(); ++j) {
      const Measurement &a = rows[i]->m, &b = rows[j]->m;
      if (a.model != b.model || a.batch != b.batch || a.precision != b.precision || a.gpu_type == b.gpu_type ||
          a.hosts * a.gpus_per_host != b.hosts * b.gpus_per_host)
        continue;
      ++s.pairs;
      const bool measured = a.iter_time_s < b.iter_time_s;
      const bool estimated = rows[i]->estimated_s < rows[j]->estimated_s;
      if (measured == estimated) ++s.ordered;
    }
  return s;
}

}  // namespace

Summary summarize_transferred(const std::vector<Comparison>& rows) {
  std::vector<Comparison> moved;
  for (const Comparison& c : rows)
    if (c.transferred_s > 0) {
      moved.push_back(c);
      moved.back().estimated_s = c.transferred_s;
    }
  std::vector<const Comparison*> ptrs;
  for (const Comparison& c : moved) ptrs.push_back(&c);
  return summary_of(ptrs);
}

std::map<std::string, Summary> summarize(const std::vector<Comparison>& rows) {
  std::map<std::string, std::vector<const Comparison*>> by;
  for (const Comparison& c : rows) {
    by[""].push_back(&c);
    if (!c.m.split.empty()) by[c.m.split].push_back(&c);
  }
  std::map<std::string, Summary> out;
  for (const auto& [k, v] : by) out[k] = summary_of(v);
  return out;
}

}  // namespace cellsched::estimator
