// Alibaba PAI cluster-trace-gpu-v2020 (NSDI'22): the task table as jobs, with
// the job table beside it for submission times and statuses (docs/formats.md).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/gpu.h"
#include "core/trace_read.h"

namespace cellsched::detail {

namespace {

const char* const kTaskColumns =
    "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type";
const char* const kJobColumns = "job_name,inst_id,user,status,start_time,end_time";

// The published tables have no header line (the columns are in *.header
// files); a header line is tolerated. Calls fn for every data row.
void headerless_rows(const std::string& path, const std::vector<std::string_view>& lines,
                     const char* columns, const RowFn& fn) {
  const size_t want = split(columns, ',').size();
  std::vector<std::string> f;
  std::string err;
  long line_no = 0;
  bool first = true;
  for (std::string_view line : lines) {
    ++line_no;
    if (trim(line).empty()) continue;
    const Ctx c{path, line_no};
    if (first && header_is(line, columns)) {
      first = false;
      continue;
    }
    first = false;
    if (!split_csv(line, f, err)) c.fail(err);
    if (f.size() != want)
      c.fail("expected " + std::to_string(want) + " fields (" + columns + "), got " +
             std::to_string(f.size()));
    fn(c, f);
  }
}

// An optional time: empty -> false.
bool opt_time(const Ctx& c, const std::string& field, const char* name, double& out) {
  if (trim(field).empty()) return false;
  out = c.non_negative(field, name);
  return true;
}

struct PaiJob {
  std::string name;
  long line = 0;  // first task row
  int gpus = 0;
  double start = -1, end = -1;
  bool unfinished = false;
  std::set<std::string> types;
};

// Submission time and status of each job, from pai_job_table.csv beside the
// task table (when there is one).
std::map<std::string, std::pair<double, std::string>> job_table(const std::string& task_path,
                                                                Trace& t) {
  std::map<std::string, std::pair<double, std::string>> jobs;
  const auto p = std::filesystem::path(task_path).parent_path() / "pai_job_table.csv";
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return jobs;
  const std::string path = p.string();
  const std::string text = read_file(path);
  headerless_rows(path, split_lines(text), kJobColumns, [&](const Ctx& c, const auto& f) {
    const std::string name(trim(f[0]));
    if (name.empty()) c.fail("empty job_name");
    double start = -1;
    opt_time(c, f[4], "start_time", start);
    jobs[name] = {start, std::string(trim(f[3]))};
  });
  count_note(t, "job table read: " + path, static_cast<long>(jobs.size()));
  return jobs;
}

}  // namespace

void read_alibaba_pai(const std::string& path, const std::vector<std::string_view>& lines,
                      const TraceReadOptions& options, Trace& t) {
  TypeDraw draw(path, options);
  std::vector<PaiJob> jobs;
  std::map<std::string, size_t> index;
  headerless_rows(path, lines, kTaskColumns, [&](const Ctx& c, const auto& f) {
    const std::string name(trim(f[0]));
    if (name.empty()) c.fail("empty job_name");
    const double inst = c.positive(f[2], "inst_num");
    if (inst != std::floor(inst) || inst > 1e6) c.fail("inst_num must be a whole number, got '" + f[2] + "'");
    double start = -1, end = -1;
    const bool started = opt_time(c, f[4], "start_time", start);
    const bool ended = opt_time(c, f[5], "end_time", end);
    if (started && ended && end > 0 && end < start) c.fail("end_time is before start_time");
    for (int i : {6, 7})
      if (!trim(f[i]).empty()) c.non_negative(f[i], i == 6 ? "plan_cpu" : "plan_mem");
    const double plan_gpu = trim(f[8]).empty() ? 0 : c.non_negative(f[8], "plan_gpu");
    auto [it, fresh] = index.emplace(name, jobs.size());
    if (fresh) {
      jobs.emplace_back();
      jobs.back().name = name;
      jobs.back().line = c.line;
    }
    PaiJob& j = jobs[it->second];
    if (plan_gpu > 0) {
      // plan_gpu is in percent of one GPU per instance: 50 = half, 200 = two.
      const int per_inst = static_cast<int>(std::ceil(plan_gpu / 100 - 1e-9));
      if (plan_gpu / 100 != std::floor(plan_gpu / 100))
        count_note(t, "fractional plan_gpu rounded up (task rows)");
      j.gpus += per_inst * static_cast<int>(inst);
      const std::string type(trim(f[9]));
      if (!type.empty()) j.types.insert(type);
    }
    if (started && start > 0) j.start = j.start < 0 ? start : std::min(j.start, start);
    if (ended && end > 0) j.end = std::max(j.end, end);
    else j.unfinished = true;
  });
  const auto submitted = job_table(path, t);
  const size_t first = t.jobs.size();
  for (const PaiJob& pj : jobs) {
    const Ctx c{path, pj.line};
    if (pj.gpus == 0) {
      count_note(t, "skipped: CPU-only job");
      continue;
    }
    if (pj.unfinished || pj.start < 0 || pj.end <= pj.start) {
      count_note(t, "skipped: a task without start and end time");
      continue;
    }
    Job j;
    j.name = pj.name;
    for (const std::string& type : pj.types) {
      if (type == "MISC" && !options.gpu_map.count("MISC")) {
        count_note(t, "gpu_type MISC not binding (map it with --gpu-map MISC=TYPE)");
        continue;
      }
      const auto m = options.gpu_map.find(type);
      const std::string& named = m != options.gpu_map.end() ? m->second : type;
      if (!find_gpu(named))
        c.fail("job " + pj.name + ": unknown gpu_type '" + type + "' (map it with --gpu-map " + type + "=TYPE)");
      j.gpu_types.push_back(canonical_gpu_name(named));
    }
    draw.assign(c, pj.gpus, pj.end - pj.start, j, t);
    double arrival = pj.start;
    if (const auto s = submitted.find(pj.name); s != submitted.end()) {
      count_note(t, "job status " + s->second.second);
      if (s->second.first > 0) arrival = std::min(arrival, s->second.first);
    } else if (!submitted.empty()) {
      count_note(t, "not in the job table (arrival = first task start)");
    }
    j.arrival_s = arrival;
    c.add(std::move(j), t);
  }
  rebase_arrivals(t, first);
}

}  // namespace cellsched::detail
