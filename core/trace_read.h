// Internal helpers shared by the trace readers in core/ (not part of the
// public API): row context for `file:line:` errors, RFC 4180 field splitting,
// header matching, and the readers of the field's published formats.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/parse_util.h"
#include "core/trace_io.h"

namespace cellsched::detail {

// One row of a file: numbers are checked (finite, range) and a bad one fails
// with `file:line: <name> must be ...`.
struct Ctx {
  const std::string& path;
  long line;
  [[noreturn]] void fail(const std::string& what) const { fail_input(path, line, what); }

  std::string quoted(std::string_view field) const { return "'" + std::string(trim(field)) + "'"; }
  double number(std::string_view field, const char* name) const {
    const auto v = to_double(field);
    if (!v) fail(std::string(name) + " must be a number, got " + quoted(field));
    return *v;
  }
  double non_negative(std::string_view field, const char* name) const {
    const double v = number(field, name);
    if (v < 0) fail(std::string(name) + " must not be negative, got " + quoted(field));
    return v;
  }
  double positive(std::string_view field, const char* name) const {
    const double v = number(field, name);
    if (v <= 0) fail(std::string(name) + " must be positive, got " + quoted(field));
    return v;
  }
  int positive_int(std::string_view field, const char* name) const {
    const auto v = to_int(field);
    if (!v) fail(std::string(name) + " must be an integer, got " + quoted(field));
    if (*v <= 0 || *v > 1000000)
      fail(std::string(name) + " must be a positive integer, got " + quoted(field));
    return static_cast<int>(*v);
  }
  // A job as read, before it joins the trace: iterations count things (at
  // most 2^53, where doubles stop counting by ones) and arrivals stay within
  // 1e12 s; a simulation could not finish otherwise.
  void check_job(const Job& j) const {
    auto g = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.10g", v);  // 1000002673637 read "1e+12" against a limit of 1e12
      return std::string(buf);
    };
    if (!(j.total_iterations >= 1 && j.total_iterations <= 9007199254740992.0))
      fail("iterations must be in [1, 2^53], got " + g(j.total_iterations) +
           (j.duration_hint_s > 0 ? " (from a duration of " + g(j.duration_hint_s) + " s)" : ""));
    if (!(j.arrival_s >= 0 && j.arrival_s <= 1e12)) fail("the arrival must be in [0, 1e12] s, got " + g(j.arrival_s));
    // A deadline (>= 0; -1 = none) is a time after the arrival: 1e308 or a
    // huge SLO (inf) was accepted and written back as "inf", which no reader
    // takes; one before the arrival was accepted as met or missed at random.
    if (j.deadline_s >= 0 && !(j.deadline_s >= j.arrival_s && j.deadline_s <= 1e13))
      fail("the deadline must be in [arrival, 1e13] s, got " + g(j.deadline_s) + " (arrival " + g(j.arrival_s) + ")");
    if (j.duration_hint_s >= 0 && !(j.duration_hint_s <= 1e12))
      fail("the duration must be in [0, 1e12] s, got " + g(j.duration_hint_s));
    // Weights far apart overflow hadar's utilities (1e307: no job is ever
    // worth placing) and make Gavel's LP fail (1e-20: CLP stops).
    if (!(j.weight >= kMinWeight && j.weight <= kMaxWeight))
      fail("the priority weight must be in [1e-6, 1e6], got " + g(j.weight));
  }
  // Checks the job and appends it to the trace, read from this line.
  void add(Job j, Trace& t) const {
    check_job(j);
    j.line = line;
    t.jobs.push_back(std::move(j));
  }
  int non_negative_int(std::string_view field, const char* name) const {
    const auto v = to_int(field);
    if (!v || *v < 0 || *v > std::numeric_limits<int>::max())
      fail(std::string(name) + " must be a non-negative integer, got " + quoted(field));
    return static_cast<int>(*v);
  }
};

// RFC 4180 fields of one line (no embedded newlines). False on a bad quote,
// with the reason in `err`.
bool split_csv(std::string_view line, std::vector<std::string>& out, std::string& err);

// The header's fields, trimmed and lower-cased, a leading UTF-8 BOM dropped.
std::vector<std::string> header_fields(std::string_view line);

// True when `line` is a header with exactly these columns, in this order.
bool header_is(std::string_view line, std::string_view columns);

// Counts of what an import read and left out, in first-seen order, for
// `trace inspect` (Trace::import_notes).
void count_note(Trace& t, const std::string& what, long n = 1);
// The import note of a job asking `asked` GPUs that a throughput table sizes at
// `given` (its largest scale factor at or below: 3 -> 2, 16 -> 8).
std::string scale_note(int asked, int given);

// Steps/s of `job_type` at `gpus` on `gpu` in the table: the measured entry,
// else the largest measured scale factor below, scaled linearly; 0 if none.
double reference_rate(const ThroughputTable& table, const std::string& gpu,
                      const std::string& job_type, int gpus);

// The first non-blank line must be exactly the header `columns` (else
// `file:line: expected the <format> header`); every other non-blank line
// must have as many CSV fields and goes to `fn`. With `leading`, lines
// starting with `#` are comments and the header need only start with
// `columns` (the rows then have the header's field count; `fn` gets them all).
using RowFn = std::function<void(const Ctx&, const std::vector<std::string>&)>;
void for_each_row(const std::string& path, const std::vector<std::string_view>& lines,
                  const char* format, const char* columns, const RowFn& fn, bool leading = false);

// Makes the arrival (and deadline) times of jobs [first, end) relative to
// the earliest of those arrivals.
void rebase_arrivals(Trace& t, size_t first);

// Days since 1970-01-01 of a proleptic Gregorian date.
int64_t days_from_civil(int64_t y, unsigned m, unsigned d);
// "2017-10-09 07:01:55" (or with 'T') -> seconds since the epoch, no time
// zone (only differences are used); false when malformed.
bool parse_timestamp(std::string_view s, int64_t& out);

// Job types with a positive throughput at each scale factor on `gpu`
// (sorted by name within a scale factor).
std::map<int, std::vector<std::string>> types_by_scale(const ThroughputTable& table,
                                                       const std::string& gpu);

// Job types for traces that name no model (Philly, Alibaba, the raw Philly
// log): drawn with the seed, uniformly among the table's types measured on
// the reference GPU at the largest scale factor <= the job's GPUs.
class TypeDraw {
 public:
  // Fails `path: ...` without a table or a type on the reference GPU.
  TypeDraw(const std::string& path, const TraceReadOptions& options);
  // Sets the job's type, model, batch, GPUs (that scale factor; counted
  // when capped), iterations = duration x steps/s and the duration hint;
  // returns those steps/s.
  double assign(const Ctx& c, int gpus, double duration_s, Job& j, Trace& t);

 private:
  const TraceReadOptions& options_;
  std::map<int, std::vector<std::string>> by_sf_;
  Rng rng_;
};

// Readers of the field's published formats (trace_formats_*.cc). Each gets the
// file's lines (BOM and '\r' already gone) and appends jobs to `t`.
void read_tiresias(const std::string& path, const std::vector<std::string_view>& lines,
                   const TraceReadOptions& options, Trace& t);
void read_crius(const std::string& path, const std::vector<std::string_view>& lines,
                const TraceReadOptions& options, Trace& t);
void read_pollux(const std::string& path, const std::vector<std::string_view>& lines,
                 const TraceReadOptions& options, Trace& t);
void read_alibaba_pods(const std::string& path, const std::vector<std::string_view>& lines,
                       const TraceReadOptions& options, Trace& t);

void read_helios(const std::string& path, const std::vector<std::string_view>& lines,
                 const TraceReadOptions& options, Trace& t);
// Alibaba PAI 2020 task table (headerless), with pai_job_table.csv beside it.
void read_alibaba_pai(const std::string& path, const std::vector<std::string_view>& lines,
                      const TraceReadOptions& options, Trace& t);

// Philly's raw `cluster_job_log` (JSON); `text` is the whole file.
void read_philly_raw(const std::string& path, std::string_view text,
                     const TraceReadOptions& options, Trace& t);

// The format a header names, or Auto when it names none of the field's formats.
TraceFormat field_format_of_header(std::string_view first_line);

}  // namespace cellsched::detail
