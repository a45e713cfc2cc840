// Philly's raw job log (msr-fiddle/philly-traces `cluster_job_log`, JSON): a
// list of jobs with status, submission time and scheduling attempts. Each
// job's object is parsed on its own, so errors name the line it starts on.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/trace_read.h"

namespace cellsched::detail {

namespace {

using nlohmann::json;

// Top-level elements of a JSON array: [begin, end) byte ranges.
struct Span {
  size_t begin, end;
};

// Splits `[ {...}, {...} ]` into its elements without parsing them; false
// (with the offset in `bad`) when the text is not an array of values.
bool top_level_elements(std::string_view s, std::vector<Span>& out, size_t& bad) {
  size_t i = 0;
  auto ws = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
  };
  ws();
  if (i >= s.size() || s[i] != '[') return bad = i, false;
  ++i;
  while (true) {
    ws();
    if (i < s.size() && s[i] == ']') return true;
    const size_t begin = i;
    int depth = 0;
    bool in_string = false;
    for (; i < s.size(); ++i) {
      const char c = s[i];
      if (in_string) {
        if (c == '\\') ++i;
        else if (c == '"') in_string = false;
        continue;
      }
      if (c == '"') in_string = true;
      else if (c == '{' || c == '[') ++depth;
      else if (c == '}' || c == ']') {
        if (depth == 0) break;  // the array's own ']'
        --depth;
      } else if (c == ',' && depth == 0) break;
    }
    // A '}' closing nothing, or an empty element (`[,`): not an array of values.
    if (i >= s.size() || in_string || s[i] == '}' || i == begin) return bad = begin, false;
    out.push_back({begin, i});
    if (s[i] == ']') return true;
    ++i;  // the ','
  }
}

// A time field: "YYYY-MM-DD HH:MM:SS"; null, "", "None" -> not recorded.
bool time_of(const Ctx& c, const json& o, const char* key, int64_t& out) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return false;
  if (!it->is_string()) c.fail(std::string(key) + " must be a time string");
  const std::string v = it->get<std::string>();
  if (v.empty() || v == "None") return false;
  if (!parse_timestamp(v, out))
    c.fail(std::string("bad ") + key + " '" + v + "' (expected YYYY-MM-DD HH:MM:SS)");
  return true;
}

struct Attempt {
  int64_t start = 0, end = 0;
  int gpus = 0;
};

// The job's attempts with a start and an end (the others are counted);
// `running` when the last one has a start and no end.
std::vector<Attempt> attempts_of(const Ctx& c, const json& list, const std::string& jobid,
                                 Trace& t, bool& running) {
  std::vector<Attempt> attempts;
  for (const json& a : list) {
    if (!a.is_object()) c.fail("job " + jobid + ": an attempt must be an object");
    Attempt x;
    const bool has_start = time_of(c, a, "start_time", x.start);
    const bool has_end = time_of(c, a, "end_time", x.end);
    running = has_start && !has_end;  // only matters for the last attempt
    if (!has_start || !has_end) {
      count_note(t, "attempts without a recorded start or end (left out)");
      continue;
    }
    if (x.end < x.start) c.fail("job " + jobid + ": an attempt ends before it starts");
    if (const auto d = a.find("detail"); d != a.end() && d->is_array())
      for (const json& m : *d)
        if (const auto g = m.find("gpus"); m.is_object() && g != m.end() && g->is_array())
          x.gpus += static_cast<int>(g->size());
    attempts.push_back(x);
  }
  return attempts;
}

}  // namespace

void read_philly_raw(const std::string& path, std::string_view text,
                     const TraceReadOptions& options, Trace& t) {
  TypeDraw draw(path, options);
  std::vector<Span> spans;
  size_t bad = 0;
  auto line_at = [&, counted = size_t{0}, line = 1L](size_t offset) mutable {
    if (offset < counted) counted = 0, line = 1;  // not expected: offsets grow
    line += std::count(text.begin() + counted, text.begin() + offset, '\n');
    counted = offset;
    return line;
  };
  if (!top_level_elements(text, spans, bad))
    fail_input(path, line_at(bad), "expected a JSON list of jobs (Philly's cluster_job_log)");
  const size_t first = t.jobs.size();
  FirstSeen ids("jobid");
  for (const Span& sp : spans) {
    const long line = line_at(sp.begin);
    const Ctx c{path, line};
    json o;
    try {
      o = json::parse(text.substr(sp.begin, sp.end - sp.begin));
    } catch (const json::parse_error& e) {
      // The parser's own reason, without its "[json.exception...] parse
      // error at line 1, column N:" prefix (that line is the object's, not the file's).
      std::string why = e.what();
      if (const auto colon = why.find(": "); why.rfind("[json.exception", 0) == 0 && colon != std::string::npos)
        why = why.substr(colon + 2);
      fail_input(path, line_at(sp.begin + std::min<size_t>(e.byte ? e.byte - 1 : 0, sp.end - sp.begin)),
                 "bad JSON: " + why);
    } catch (const json::exception& e) {  // e.g. a number too large for a double
      fail_input(path, line, std::string("bad JSON: ") + e.what());
    }
    if (!o.is_object()) c.fail("a job must be a JSON object");
    const auto id = o.find("jobid");
    if (id == o.end() || !id->is_string() || id->get<std::string>().empty())
      c.fail("job without a jobid string");
    const std::string jobid = id->get<std::string>();
    ids.add(path, line, jobid);
    const auto st = o.find("status");
    const std::string status = st != o.end() && st->is_string() ? st->get<std::string>() : "";
    if (status != "Pass" && status != "Killed" && status != "Failed")
      c.fail("job " + jobid + ": status must be Pass, Killed or Failed, got '" + status + "'");
    int64_t submit = 0;
    if (!time_of(c, o, "submitted_time", submit)) c.fail("job " + jobid + " has no submitted_time");
    const auto at = o.find("attempts");
    if (at == o.end() || !at->is_array()) c.fail("job " + jobid + ": attempts must be a list");
    bool running = false;
    const std::vector<Attempt> attempts = attempts_of(c, *at, jobid, t, running);
    count_note(t, "status " + status);
    if (running) {
      count_note(t, "skipped: still running at the snapshot");
      continue;
    }
    if (attempts.empty()) {
      count_note(t, "skipped: no attempt with a start and an end");
      continue;
    }
    const Attempt& last = attempts.back();
    if (last.gpus <= 0) {
      count_note(t, "skipped: last attempt held no GPUs");
      continue;
    }
    if (last.end == last.start) {
      count_note(t, "skipped: zero duration");
      continue;
    }
    Job j;
    j.name = jobid;
    const double rate =
        draw.assign(c, last.gpus, static_cast<double>(last.end - last.start), j, t);
    for (size_t k = 0; k + 1 < attempts.size(); ++k)
      j.failed_attempts.push_back(
          std::max(1.0, std::round(static_cast<double>(attempts[k].end - attempts[k].start) * rate)));
    if (!j.failed_attempts.empty()) count_note(t, "failed attempts (replayed with --replay-failures)",
                                               static_cast<long>(j.failed_attempts.size()));
    j.arrival_s = static_cast<double>(submit);
    c.add(std::move(j), t);
  }
  rebase_arrivals(t, first);
}

}  // namespace cellsched::detail
