// Shared pieces of the trace readers: CSV fields, headers, import notes, the
// reference rate, and telling the field's formats apart by their header.
#include <algorithm>
#include <cmath>

#include "core/trace_read.h"

namespace cellsched {

namespace detail {

bool split_csv(std::string_view line, std::vector<std::string>& out, std::string& err) {
  out.clear();
  size_t i = 0;
  while (true) {
    std::string field;
    if (i < line.size() && line[i] == '"') {
      ++i;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field.push_back('"');
            i += 2;
          } else {
            closed = true;
            ++i;
            break;
          }
        } else {
          field.push_back(line[i++]);
        }
      }
      if (!closed) {
        err = "unterminated quoted field";
        return false;
      }
      if (i < line.size() && line[i] != ',') {
        err = "unexpected character after a quoted field";
        return false;
      }
    } else {
      while (i < line.size() && line[i] != ',') {
        if (line[i] == '"') {
          err = "quote inside an unquoted field";
          return false;
        }
        field.push_back(line[i++]);
      }
    }
    out.push_back(std::move(field));
    if (i >= line.size()) return true;
    ++i;  // the comma
  }
}

std::vector<std::string> header_fields(std::string_view line) {
  if (line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
  std::vector<std::string> out;
  for (std::string_view f : split(line, ',')) {
    f = trim(f);
    if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
    out.push_back(lower(f));
  }
  return out;
}

bool header_is(std::string_view line, std::string_view columns) {
  const auto got = header_fields(line);
  const auto want = split(columns, ',');
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) return false;
  return true;
}

std::string scale_note(int asked, int given) {
  return "GPUs " + std::to_string(asked) + " -> " + std::to_string(given) +
         " (the largest scale factor measured at or below it; the work shrinks with it)";
}

void count_note(Trace& t, const std::string& what, long n) {
  for (auto& [w, c] : t.import_notes)
    if (w == what) {
      c += n;
      return;
    }
  t.import_notes.emplace_back(what, n);
}

double reference_rate(const ThroughputTable& table, const std::string& gpu,
                      const std::string& job_type, int gpus) {
  if (const auto v = table.get(gpu, job_type, gpus); v && *v > 0) return *v;
  const std::vector<int> measured = table.scale_factors(gpu, job_type);
  for (auto it = measured.rbegin(); it != measured.rend(); ++it)
    if (*it < gpus)
      if (const auto v = table.get(gpu, job_type, *it); v && *v > 0) return *v * gpus / *it;
  return 0;
}

void for_each_row(const std::string& path, const std::vector<std::string_view>& lines,
                  const char* format, const char* columns, const RowFn& fn, bool leading) {
  const auto named = split(columns, ',');
  size_t want = named.size();
  bool header = false;
  std::vector<std::string> f;
  std::string err;
  long line_no = 0;
  for (std::string_view line : lines) {
    ++line_no;
    const std::string_view t = trim(line);
    if (t.empty() || (leading && t[0] == '#')) continue;
    const Ctx c{path, line_no};
    if (!header) {
      if (leading) {
        const auto got = header_fields(line);
        if (got.size() < want || !std::equal(named.begin(), named.end(), got.begin()))
          c.fail(std::string("expected a ") + format + " header starting with '" + columns + "'");
        want = got.size();
      } else if (!header_is(line, columns)) {
        c.fail(std::string("expected the ") + format + " header '" + columns + "'");
      }
      header = true;
      continue;
    }
    if (!split_csv(line, f, err)) c.fail(err);
    if (f.size() != want)
      c.fail("expected " + std::to_string(want) + " fields (" +
             (leading ? std::string("as in the header") : std::string(columns)) + "), got " +
             std::to_string(f.size()));
    fn(c, f);
  }
  if (!header) fail_input(path, 0, "empty file");
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// "2017-10-09 07:01:55" -> seconds since the epoch (no time zone: only
// differences are used).
bool parse_timestamp(std::string_view s, int64_t& out) {
  s = trim(s);
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':')
    return false;
  auto num = [&](size_t pos, size_t len, long long& v) {
    for (size_t i = pos; i < pos + len; ++i)
      if (s[i] < '0' || s[i] > '9') return false;
    v = *detail::to_int(s.substr(pos, len));
    return true;
  };
  long long y, mo, d, h, mi, se;
  if (!num(0, 4, y) || !num(5, 2, mo) || !num(8, 2, d) || !num(11, 2, h) || !num(14, 2, mi) ||
      !num(17, 2, se))
    return false;
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 60) return false;
  // Days in the month (2017-02-31 is no date: it read as 2017-03-03).
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > kDays[mo - 1] + (mo == 2 && leap ? 1 : 0)) return false;
  out = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 +
        h * 3600 + mi * 60 + se;
  return true;
}

// Makes arrival (and deadline) times relative to the earliest arrival.
void rebase_arrivals(Trace& t, size_t first_job) {
  if (t.jobs.size() <= first_job) return;
  double origin = t.jobs[first_job].arrival_s;
  for (size_t i = first_job; i < t.jobs.size(); ++i) origin = std::min(origin, t.jobs[i].arrival_s);
  for (size_t i = first_job; i < t.jobs.size(); ++i) {
    t.jobs[i].arrival_s -= origin;
    if (t.jobs[i].deadline_s >= 0) t.jobs[i].deadline_s -= origin;
  }
}

std::map<int, std::vector<std::string>> types_by_scale(const ThroughputTable& table,
                                                       const std::string& gpu) {
  std::map<int, std::vector<std::string>> by_sf;
  for (const auto& type : table.job_types())
    for (int sf : table.scale_factors(gpu, type)) {
      const auto v = table.get(gpu, type, sf);
      if (v && *v > 0) by_sf[sf].push_back(type);  // job_types() is sorted
    }
  return by_sf;
}

TypeDraw::TypeDraw(const std::string& path, const TraceReadOptions& options)
    : options_(options), rng_(options.seed) {
  if (!options.table) fail_input(path, 0, "this trace needs a throughput table for job types");
  by_sf_ = types_by_scale(*options.table, options.reference_gpu);
  if (by_sf_.empty())
    fail_input(path, 0, "the throughput table has no job type on '" + options.reference_gpu + "'");
}

double TypeDraw::assign(const Ctx& c, int gpus, double duration_s, Job& j, Trace& t) {
  auto it = by_sf_.upper_bound(gpus);
  if (it == by_sf_.begin())
    c.fail("no job type is measured at " + std::to_string(gpus) + " GPU(s) or fewer on '" +
           options_.reference_gpu + "'");
  --it;
  if (it->first < gpus) count_note(t, scale_note(gpus, it->first));
  j.gpus = it->first;
  j.job_type = it->second[rng_.below(it->second.size())];
  auto [model, batch] = split_job_type(j.job_type);
  j.model = model;
  j.batch_size = batch;
  const double rate = reference_rate(*options_.table, options_.reference_gpu, j.job_type, j.gpus);
  j.total_iterations = std::max(1.0, std::round(duration_s * rate));
  j.duration_hint_s = duration_s;
  return rate;
}

namespace {

struct FieldFormat {
  TraceFormat format;
  const char* columns;
};

// The columns each published format's header has (docs/formats.md).
const FieldFormat kFieldFormats[] = {
    {TraceFormat::Tiresias, "job_id,num_gpu,submit_time,iterations,model_name,duration,interval"},
    {TraceFormat::Crius,
     "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type"},
    {TraceFormat::Pollux, "name,time,application,num_replicas,batch_size"},
    {TraceFormat::Helios,
     "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"},
    {TraceFormat::AlibabaPai,
     "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type"},
    {TraceFormat::AlibabaPods,
     "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
     "deletion_time,scheduled_time"},
};

}  // namespace

TraceFormat field_format_of_header(std::string_view first_line) {
  for (const FieldFormat& f : kFieldFormats)
    if (header_is(first_line, f.columns)) return f.format;
  return TraceFormat::Auto;
}

}  // namespace detail

std::map<std::string, std::string> parse_name_map(const std::string& spec,
                                                  const std::string& option) {
  std::map<std::string, std::string> out;
  for (std::string_view item : detail::split(spec, ',')) {
    if (detail::trim(item).empty()) continue;
    const auto eq = item.find('=');
    const std::string key(detail::trim(item.substr(0, eq)));
    const std::string value(eq == std::string_view::npos ? "" : detail::trim(item.substr(eq + 1)));
    if (eq == std::string_view::npos || key.empty() || value.empty())
      throw InputError(option + ": expected NAME=VALUE, got '" + std::string(detail::trim(item)) +
                       "'");
    if (!out.emplace(key, value).second)
      throw InputError(option + ": '" + key + "' is mapped twice");
  }
  return out;
}

}  // namespace cellsched
