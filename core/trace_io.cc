// Trace readers and writer (the generator and summaries: trace_generate.cc).
//
// Conventions shared by every reader:
// - Line numbers in errors are 1-based physical lines of the file.
// - Blank lines are skipped; a trailing '\r' is dropped.
// - Jobs are sorted stably by arrival time, then ids are reassigned 0..n-1
//   in that order (so a job's id is its rank in the arrival order, ties in
//   file order). `limit` keeps the first `limit` jobs of that order.
#include "core/trace_io.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <ostream>

#include "core/error.h"
#include "core/gpu.h"
#include "core/parse_util.h"
#include "core/trace_read.h"

namespace cellsched {

namespace {

using detail::trim;

using detail::Ctx;

std::vector<std::string> split_argv(std::string_view s) {
  std::vector<std::string> argv;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    if (j > i) argv.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return argv;
}

std::string join_argv(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

void set_model_from_type(Job& j) {
  auto [model, batch] = split_job_type(j.job_type);
  j.model = model;
  j.batch_size = batch;
}

void finish(Trace& t, long limit) {
  const auto earlier = [](const Job& a, const Job& b) { return a.arrival_s < b.arrival_s; };
  // Most traces come in arrival order; moving 82,247 jobs through a merge
  // sort anyway was a tenth of reading the Philly trace.
  if (!std::is_sorted(t.jobs.begin(), t.jobs.end(), earlier))
    std::stable_sort(t.jobs.begin(), t.jobs.end(), earlier);
  if (limit >= 0 && static_cast<size_t>(limit) < t.jobs.size()) t.jobs.resize(limit);
  for (size_t i = 0; i < t.jobs.size(); ++i) t.jobs[i].id = static_cast<int64_t>(i);
}

// ---- Gavel TSV (current 10 fields, legacy 7 fields) -------------------------

// Gavel's SLO is a multiple of the job's duration (scheduler.py: deadline =
// SLO * duration + arrival). The trace carries no duration, so it is taken as
// total_steps / isolated steps/s on options.reference_gpu from options.table.
void read_gavel(const std::string& path, const std::vector<std::string_view>& lines,
                bool legacy, const TraceReadOptions& options, Trace& t) {
  const size_t want = legacy ? 7 : 10;
  long line_no = 0;
  for (std::string_view line : lines) {
    ++line_no;
    if (trim(line).empty()) continue;
    Ctx c{path, line_no};
    const auto f = detail::split(line, '\t');
    if (f.size() != want)
      c.fail("expected " + std::to_string(want) + " tab-separated fields (" +
             (legacy ? "Gavel legacy" : "Gavel") + " trace), got " + std::to_string(f.size()));
    Job j;
    j.job_type = std::string(trim(f[0]));
    if (j.job_type.empty()) c.fail("empty job type");
    set_model_from_type(j);
    j.command = split_argv(f[1]);
    if (legacy) {
      // job_type command num_steps_arg needs_data_dir total_steps arrival scale_factor
      j.total_iterations = c.positive(f[4], "total_steps");
      j.arrival_s = c.non_negative(f[5], "arrival_time");
      j.gpus = c.positive_int(f[6], "scale_factor");
    } else {
      // job_type command working_dir num_steps_arg needs_data_dir total_steps
      // scale_factor priority_weight SLO arrival
      j.total_iterations = c.positive(f[5], "total_steps");
      j.gpus = c.positive_int(f[6], "scale_factor");
      j.weight = c.number(f[7], "priority_weight");  // range: check_job
      const double slo = c.number(f[8], "SLO");
      j.arrival_s = c.non_negative(f[9], "arrival_time");
      if (slo >= 0) {
        if (!options.table)
          c.fail("SLO " + std::string(trim(f[8])) +
                 " is a multiple of the job's duration; a throughput table is needed to "
                 "turn it into a deadline");
        const auto tp = options.table->get(options.reference_gpu, j.job_type, j.gpus);
        if (!tp || *tp <= 0)
          c.fail("SLO needs the job's duration, but job type '" + j.job_type + "' at " +
                 std::to_string(j.gpus) + " GPUs has no throughput on '" +
                 options.reference_gpu + "'");
        const double duration = j.total_iterations / *tp;
        j.deadline_s = j.arrival_s + slo * duration;
      }
    }
    c.add(std::move(j), t);
  }
}

// ---- Philly (Pollux's philly.csv) ------------------------------------------

void read_philly(const std::string& path, const std::vector<std::string_view>& lines,
                 const TraceReadOptions& options, Trace& t) {
  const bool mix = !options.model_mix.empty();
  if (mix && !options.model_rate)
    fail_input(path, 0, "a Philly import onto a model mix needs the models' throughputs");
  if (!mix && !options.table)
    fail_input(path, 0, "a Philly trace needs a throughput table to assign job types");
  double mix_total = 0;
  for (const auto& m : options.model_mix) mix_total += m.weight;
  const auto by_sf = mix ? std::map<int, std::vector<std::string>>{{1, {""}}}
                         : detail::types_by_scale(*options.table, options.reference_gpu);
  if (by_sf.empty())
    fail_input(path, 0,
               "the throughput table has no job type measured on '" + options.reference_gpu + "'");
  detail::Rng rng(options.seed);
  std::vector<int64_t> stamps;
  long line_no = 0;
  bool header = false;
  for (std::string_view line : lines) {
    ++line_no;
    if (trim(line).empty()) continue;
    Ctx c{path, line_no};
    if (!header) {
      if (trim(line).substr(0, 18) != "timestamp,duration")
        c.fail("expected the Philly header 'timestamp,duration,num_gpus,gpu_time,cluster'");
      header = true;
      continue;
    }
    const auto f = detail::split(line, ',');
    if (f.size() != 5)
      c.fail("expected 5 fields (timestamp,duration,num_gpus,gpu_time,cluster), got " +
             std::to_string(f.size()));
    int64_t ts = 0;
    if (!detail::parse_timestamp(f[0], ts))
      c.fail("bad timestamp '" + std::string(trim(f[0])) + "' (expected YYYY-MM-DD HH:MM:SS)");
    const double duration = c.positive(f[1], "duration");
    const int num_gpus = c.positive_int(f[2], "num_gpus");
    c.non_negative(f[3], "gpu_time");
    if (mix) {
      // Weighted draw of a (model, batch); GPUs a power of two up to 16.
      double u = rng.uniform() * mix_total;
      size_t k = 0;
      while (k + 1 < options.model_mix.size() && u >= options.model_mix[k].weight)
        u -= options.model_mix[k++].weight;
      const auto& m = options.model_mix[k];
      Job j;
      j.model = m.model;
      j.batch_size = m.batch;
      j.job_type = m.model + "@" + std::to_string(m.batch);
      j.gpus = 1;
      while (j.gpus * 2 <= std::min(num_gpus, 16)) j.gpus *= 2;
      const double rate = options.model_rate(m.model, m.batch, j.gpus);
      if (!(rate > 0))
        c.fail("model " + m.model + " (batch " + std::to_string(m.batch) + ") cannot run on " +
               std::to_string(j.gpus) + " x " + options.reference_gpu);
      j.total_iterations = std::max(1.0, std::round(duration * rate));
      j.duration_hint_s = duration;
      stamps.push_back(ts);
      j.arrival_s = 0;  // made relative below (a timestamp before 1970 read as a negative arrival)
      c.add(std::move(j), t);
      continue;
    }
    // The job's scale factor: the largest one measured that is <= num_gpus
    // (jobs larger than the table's largest scale factor are capped to it).
    auto it = by_sf.upper_bound(num_gpus);
    if (it == by_sf.begin())
      c.fail("no job type is measured at " + std::to_string(num_gpus) + " GPU(s) or fewer on '" +
             options.reference_gpu + "'");
    --it;
    const int sf = it->first;
    if (sf < num_gpus) detail::count_note(t, detail::scale_note(num_gpus, sf));
    const auto& types = it->second;
    Job j;
    j.job_type = types[rng.below(types.size())];
    set_model_from_type(j);
    j.gpus = sf;
    const double tp = *options.table->get(options.reference_gpu, j.job_type, sf);
    j.total_iterations = std::max(1.0, std::round(duration * tp));
    j.duration_hint_s = duration;
    stamps.push_back(ts);
    j.arrival_s = 0;  // made relative below (a timestamp before 1970 read as a negative arrival)
    c.add(std::move(j), t);
  }
  if (!header) fail_input(path, 0, "empty file");
  if (!stamps.empty()) {
    const int64_t first = *std::min_element(stamps.begin(), stamps.end());
    for (size_t i = 0; i < t.jobs.size(); ++i)
      t.jobs[i].arrival_s = static_cast<double>(stamps[i] - first);
  }
}

}  // namespace

std::vector<TraceReadOptions::ModelShare> parse_model_mix(const std::string& spec) {
  std::vector<TraceReadOptions::ModelShare> out;
  for (std::string_view item : detail::split(spec, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    TraceReadOptions::ModelShare m;
    const auto colon = item.find(':');
    std::string_view head = item.substr(0, colon);
    if (colon != std::string_view::npos) {
      const auto w = detail::to_double(trim(item.substr(colon + 1)));
      if (!w || !(*w > 0))
        throw InputError("--model-mix: bad weight in '" + std::string(item) + "'");
      m.weight = *w;
    }
    const auto at = head.find('@');
    m.model = std::string(trim(head.substr(0, at)));
    if (at != std::string_view::npos) {
      const auto b = detail::to_int(trim(head.substr(at + 1)));
      if (!b || *b <= 0) throw InputError("--model-mix: bad batch in '" + std::string(item) + "'");
      m.batch = static_cast<int>(*b);
    }
    if (m.model.empty()) throw InputError("--model-mix: no model in '" + std::string(item) + "'");
    out.push_back(std::move(m));
  }
  if (out.empty()) throw InputError("--model-mix: empty");
  return out;
}

namespace {

// ---- cellsched CSV ----------------------------------------------------------

const char* const kCsvHeader =
    "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command";
// Two optional trailing columns: the trace's own job name and the GPU types
// the job may use ('|'-joined); written only when some job has them.
const char* const kCsvExtra = ",name,gpu_types";

void read_csv(const std::string& path, const std::vector<std::string_view>& lines, Trace& t) {
  const std::string extended = std::string(kCsvHeader) + kCsvExtra;
  auto header_fields = detail::split(kCsvHeader, ',');
  long line_no = 0;
  bool header = false;
  std::vector<std::string> f;
  std::string err;
  detail::FirstSeen ids("id"), names("name");
  std::vector<std::pair<size_t, long long>> given_ids;  // (row, id)
  for (std::string_view line : lines) {
    ++line_no;
    if (trim(line).empty()) continue;
    Ctx c{path, line_no};
    if (!detail::split_csv(line, f, err)) c.fail(err);
    if (!header) {
      if (detail::header_is(line, extended)) header_fields = detail::split(extended, ',');
      else if (!detail::header_is(line, kCsvHeader))
        c.fail(std::string("expected the header '") + kCsvHeader + "' (optionally followed by '" +
               (kCsvExtra + 1) + "')");
      header = true;
      continue;
    }
    if (f.size() != header_fields.size())
      c.fail("expected " + std::to_string(header_fields.size()) + " fields, got " +
             std::to_string(f.size()));
    auto blank = [](const std::string& s) { return trim(s).empty(); };
    Job j;
    if (const auto id = detail::to_int(f[0]); id) {
      ids.add(path, line_no, std::to_string(*id));
      given_ids.emplace_back(t.jobs.size(), *id);
    } else if (!blank(f[0])) {
      c.fail("id must be an integer, got '" + f[0] + "'");
    }
    j.arrival_s = c.non_negative(f[1], "arrival_s");
    j.job_type = f[2];
    if (blank(j.job_type)) c.fail("empty job_type");
    auto [model, batch] = split_job_type(j.job_type);
    j.model = blank(f[3]) ? model : f[3];
    j.batch_size = blank(f[4]) ? batch : c.non_negative_int(f[4], "batch_size");
    j.total_iterations = c.positive(f[5], "iterations");
    j.gpus = c.positive_int(f[6], "gpus");
    j.weight = blank(f[7]) ? 1.0 : c.number(f[7], "weight");  // range: check_job
    j.deadline_s = blank(f[8]) ? -1.0 : c.number(f[8], "deadline_s");
    if (j.deadline_s < 0) j.deadline_s = -1;
    j.duration_hint_s = blank(f[9]) ? -1.0 : c.number(f[9], "duration_s");
    if (j.duration_hint_s < 0) j.duration_hint_s = -1;
    j.command = split_argv(f[10]);
    if (f.size() > 11) {
      j.name = f[11];
      if (!blank(j.name)) names.add(path, line_no, j.name);
      for (std::string_view g : detail::split(f[12], '|')) {
        if (trim(g).empty()) continue;
        try {  // the catalogue's name, as the cluster's nodes carry it
          j.gpu_types.push_back(canonical_gpu_name(trim(g)));
        } catch (const InputError& e) {
          c.fail("gpu_types: " + std::string(e.what()));
        }
      }
    }
    c.add(std::move(j), t);
  }
  if (!header) fail_input(path, 0, "empty file");
  // Jobs are numbered 0.. by arrival; ids that are not already that row
  // numbering (1000, 7) would be lost, so they become the names of the jobs
  // that have none, as every other reader keeps the trace's own ids.
  const bool own_ids = std::any_of(given_ids.begin(), given_ids.end(), [](const auto& p) {
    return p.second != static_cast<long long>(p.first);
  });
  if (own_ids)
    for (const auto& [index, id] : given_ids)
      if (index < t.jobs.size() && trim(t.jobs[index].name).empty()) t.jobs[index].name = std::to_string(id);
}

TraceFormat detect(const std::string& path, const std::vector<std::string_view>& lines) {
  long line_no = 0;
  for (std::string_view line : lines) {
    ++line_no;
    if (trim(line).empty()) continue;
    const std::string_view l = trim(line);
    if (const TraceFormat f = detail::field_format_of_header(l); f != TraceFormat::Auto) return f;
    if (l.front() == '[' || l.front() == '{') return TraceFormat::PhillyRaw;  // the only JSON one
    if (l.substr(0, 18) == "timestamp,duration") return TraceFormat::Philly;
    if (l.substr(0, 12) == "id,arrival_s") return TraceFormat::Csv;
    if (line.find('\t') != std::string_view::npos) {
      const size_t n = detail::split(line, '\t').size();
      if (n == 10) return TraceFormat::Gavel;
      if (n == 7) return TraceFormat::GavelLegacy;
      fail_input(path, line_no,
                 "cannot tell the trace format: " + std::to_string(n) +
                     " tab-separated fields (Gavel traces have 10, legacy ones 7)");
    }
    fail_input(path, line_no,
               "cannot tell the trace format from the header '" + std::string(l.substr(0, 120)) +
                   "': expected cellsched CSV (id,arrival_s,...), Philly (timestamp,duration,...), "
                   "Tiresias (job_id,num_gpu,...), Crius (job_id,submission_time,...), Pollux "
                   "(name,time,application,...), Alibaba 2023 pods (name,cpu_milli,...), Helios "
                   "(job_id,user,vc,...), Philly's JSON job log, or a tab-separated Gavel trace; --format names it (the PAI 2020 "
                   "task table has no header: --format alibaba-pai)");
  }
  fail_input(path, 0, "empty file: cannot tell the trace format");
}

}  // namespace

TraceFormat parse_trace_format(const std::string& name) {
  const std::string n = detail::lower(trim(name));
  if (n == "auto") return TraceFormat::Auto;
  if (n == "gavel") return TraceFormat::Gavel;
  if (n == "gavel-legacy") return TraceFormat::GavelLegacy;
  if (n == "philly") return TraceFormat::Philly;
  if (n == "csv") return TraceFormat::Csv;
  if (n == "tiresias") return TraceFormat::Tiresias;
  if (n == "crius" || n == "arena") return TraceFormat::Crius;
  if (n == "pollux") return TraceFormat::Pollux;
  if (n == "alibaba-pods" || n == "alibaba-2023") return TraceFormat::AlibabaPods;
  if (n == "philly-raw") return TraceFormat::PhillyRaw;
  if (n == "alibaba-pai" || n == "pai") return TraceFormat::AlibabaPai;
  if (n == "helios") return TraceFormat::Helios;
  throw InputError("unknown trace format '" + name +
                   "' (known: auto, gavel, gavel-legacy, philly, csv, tiresias, crius, pollux, "
                   "alibaba-pods, philly-raw, alibaba-pai, helios)");
}

std::string to_string(TraceFormat format) {
  switch (format) {
    case TraceFormat::Auto: return "auto";
    case TraceFormat::Gavel: return "gavel";
    case TraceFormat::GavelLegacy: return "gavel-legacy";
    case TraceFormat::Philly: return "philly";
    case TraceFormat::Csv: return "csv";
    case TraceFormat::Tiresias: return "tiresias";
    case TraceFormat::Crius: return "crius";
    case TraceFormat::Pollux: return "pollux";
    case TraceFormat::AlibabaPods: return "alibaba-pods";
    case TraceFormat::PhillyRaw: return "philly-raw";
    case TraceFormat::AlibabaPai: return "alibaba-pai";
    case TraceFormat::Helios: return "helios";
  }
  return "auto";
}

Trace load_trace(const std::string& path, const TraceReadOptions& options) {
  const std::string text = detail::read_file(path);
  std::string_view body = text;
  if (body.substr(0, 3) == "\xEF\xBB\xBF") body.remove_prefix(3);  // UTF-8 BOM
  TraceFormat format = options.format;
  if (format == TraceFormat::Auto) {
    // Only the lines up to the first non-blank one tell the format.
    size_t end = body.find_first_not_of(" \t\r\n");
    end = end == std::string_view::npos ? body.size() : body.find('\n', end);
    format = detect(path, detail::split_lines(body.substr(0, end)));
  }
  // The JSON log is read from the text; the others line by line.
  const auto lines = format == TraceFormat::PhillyRaw ? std::vector<std::string_view>{}
                                                      : detail::split_lines(body);
  Trace t;
  t.name = std::filesystem::path(path).filename().string();
  t.source = path;
  t.format = to_string(format);
  if (!options.model_mix.empty() && format != TraceFormat::Philly)  // it was ignored, and the run then failed on types
    fail_input(path, 0, "a model mix (--model-mix) maps Pollux's Philly CSV (format philly) onto zoo models; this "
                        "trace is " + t.format + ": map its names with --model-map instead");
  switch (format) {
    case TraceFormat::Gavel: read_gavel(path, lines, false, options, t); break;
    case TraceFormat::GavelLegacy: read_gavel(path, lines, true, options, t); break;
    case TraceFormat::Philly: read_philly(path, lines, options, t); break;
    case TraceFormat::Csv: read_csv(path, lines, t); break;
    case TraceFormat::Tiresias: detail::read_tiresias(path, lines, options, t); break;
    case TraceFormat::Crius: detail::read_crius(path, lines, options, t); break;
    case TraceFormat::Pollux: detail::read_pollux(path, lines, options, t); break;
    case TraceFormat::AlibabaPods: detail::read_alibaba_pods(path, lines, options, t); break;
    case TraceFormat::PhillyRaw: detail::read_philly_raw(path, body, options, t); break;
    case TraceFormat::AlibabaPai: detail::read_alibaba_pai(path, lines, options, t); break;
    case TraceFormat::Helios: detail::read_helios(path, lines, options, t); break;
    case TraceFormat::Auto: break;
  }
  if (t.jobs.empty() || options.limit == 0) {  // a run of nothing is not stored
    std::string left_out;
    for (const auto& [what, n] : t.import_notes)
      left_out += (left_out.empty() ? " (" : "; ") + what + " " + std::to_string(n);
    fail_input(path, 0, t.jobs.empty() ? "no jobs in the trace" + (left_out.empty() ? "" : left_out + ")")
                                       : "a limit of 0 jobs leaves none");
  }
  finish(t, options.limit);
  return t;
}

void write_trace_csv(const Trace& trace, std::ostream& out) {
  const bool extra = std::any_of(trace.jobs.begin(), trace.jobs.end(), [](const Job& j) {
    return !j.name.empty() || !j.gpu_types.empty();
  });
  out << kCsvHeader << (extra ? kCsvExtra : "") << '\n';
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const Job& j = trace.jobs[i];
    out << j.id << ',' << detail::format_double(j.arrival_s) << ',' << detail::csv_field(j.job_type) << ','
        << detail::csv_field(j.model) << ',' << j.batch_size << ','
        << detail::format_double(j.total_iterations) << ',' << j.gpus << ','
        << detail::format_double(j.weight) << ','
        << (j.deadline_s >= 0 ? detail::format_double(j.deadline_s) : std::string()) << ','
        << (j.duration_hint_s >= 0 ? detail::format_double(j.duration_hint_s) : std::string())
        << ',' << detail::csv_field(join_argv(j.command));
    if (extra) {
      std::string types;
      for (const auto& g : j.gpu_types) types += (types.empty() ? "" : "|") + g;
      out << ',' << detail::csv_field(j.name) << ',' << detail::csv_field(types);
    }
    out << '\n';
  }
}

}  // namespace cellsched
