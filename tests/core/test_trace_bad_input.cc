// Every trace reader holds under bad input (issue 13): a repeated job id is
// an error naming both lines, a trace of no jobs is an error naming the file,
// and each job remembers the line it was read from.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/throughput.h"
#include "core/trace_io.h"
#include "core_test_util.h"

namespace cellsched {
namespace {

using testing::input_error;
using testing::shared_data;
using testing::TempDir;

std::string fixture(const std::string& name) { return std::string(CELLSCHED_TEST_DATA) + "/traces/" + name; }

Trace load(const std::string& path, TraceReadOptions o = {}) {
  o.table = &testing::gavel_table();
  return load_trace(path, o);
}

std::string examples(const std::string& rel) { return std::string(CELLSCHED_EXAMPLES) + "/" + rel; }

// The first `n` lines of a file, each ended by '\n'.
std::string head(const std::string& path, int n) {
  std::ifstream in(path, std::ios::binary);
  std::string out, line;
  for (int i = 0; i < n && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

TEST(TraceDuplicates, EveryFormatWithIdsNamesBothLines) {
  TempDir d;
  struct Case {
    std::string file, what;  // a published fixture (header + first row), the id column's name
  };
  const Case cases[] = {
      {fixture("tiresias_60_job.csv"), "job_id"},   {fixture("arena_dummy_runtime_trace.csv"), "job_id"},
      {fixture("alibaba2023_pods.csv"), "name"},    {fixture("helios_cluster_log.csv"), "job_id"},
      {shared_data("pollux_adaptdl/workloads/workload-1.csv"), "name"},
  };
  for (const Case& c : cases) {
    const std::string two = head(c.file, 2);  // header and the first row
    const std::string row = two.substr(two.find('\n') + 1);
    const std::string id = row.substr(0, row.find(','));
    // The row once more, after a row of its own: the repeat is on line 4.
    const std::string third = head(c.file, 3).substr(two.size());
    const std::string p = d.write("dup.csv", two + third + row);
    const std::string msg = input_error([&] { load(p); });
    EXPECT_NE(msg.find(p + ":4: duplicate " + c.what + " '" + id + "' (first on line 2)"), std::string::npos)
        << c.file << " -> " << msg;
  }
  // Own CSV: the id (as a number: 7 and 07 are one id) and the trace's own name.
  const std::string h = "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command";
  const std::string ids = d.write("ids.csv", h + "\n7,0,ResNet-18 (batch size 16),,,10,1,,,,\n\n07,5,LM (batch size 5),,,10,1,,,,\n");
  EXPECT_INPUT_ERROR_PREFIX(load(ids), ids + ":4: duplicate id '7' (first on line 2)");
  const std::string names = d.write("n.csv", h + ",name,gpu_types\n0,0,LM (batch size 5),,,10,1,,,,,a,\n"
                                                 "1,0,LM (batch size 5),,,10,1,,,,,b,\n2,0,LM (batch size 5),,,10,1,,,,,a,\n");
  EXPECT_INPUT_ERROR_PREFIX(load(names), names + ":4: duplicate name 'a' (first on line 2)");
  // gpu_types names catalogue types; aliases are read as the catalogue's name.
  const std::string types = d.write("t.csv", h + ",name,gpu_types\n0,0,LM (batch size 5),,,10,1,,,,,a,V100|k80\n"
                                                 "1,0,LM (batch size 5),,,10,1,,,,,b,v100|zz\n");
  EXPECT_INPUT_ERROR_PREFIX(load(types), types + ":3: gpu_types: unknown GPU type 'zz'");
  const std::string good = d.write("g.csv", h + ",name,gpu_types\n0,0,LM (batch size 5),,,10,1,,,,,a,V100|k80\n");
  EXPECT_EQ(load(good).jobs.at(0).gpu_types, (std::vector<std::string>{"v100", "k80"}));
  // Blank ids stay allowed (the id column is renumbered anyway).
  EXPECT_EQ(load(d.write("blank.csv", h + "\n,0,LM (batch size 5),,,10,1,,,,\n,0,LM (batch size 5),,,10,1,,,,\n")).jobs.size(), 2u);
  // Philly's raw log: the second object with the jobid, named at the line it starts on.
  const std::string job = R"({"status": "Pass", "vc": "v", "jobid": "app_1", "submitted_time": "2017-10-07 01:00:00",
 "attempts": [{"start_time": "2017-10-07 01:00:00", "end_time": "2017-10-07 02:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]})";
  const std::string raw = d.write("raw.json", "[\n" + job + ",\n" + job + "\n]\n");
  EXPECT_INPUT_ERROR_PREFIX(load(raw), raw + ":4: duplicate jobid 'app_1' (first on line 2)");
}

TEST(TraceNoJobs, HeaderOnlyOrAllSkippedIsBadInput) {
  TempDir d;
  const std::string csv = d.write(
      "h.csv", "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command\n\n");
  EXPECT_INPUT_ERROR_PREFIX(load(csv), csv + ": no jobs in the trace");
  for (const char* f : {"tiresias_60_job.csv", "arena_dummy_runtime_trace.csv", "helios_cluster_log.csv"}) {
    const std::string p = d.write(std::string("only-") + f, head(fixture(f), 1));
    EXPECT_INPUT_ERROR_PREFIX(load(p), p + ": no jobs in the trace");
  }
  const std::string philly = d.write("p.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n");
  EXPECT_INPUT_ERROR_PREFIX(load(philly), philly + ": no jobs in the trace");
  const std::string raw = d.write("r.json", "[]\n");
  EXPECT_INPUT_ERROR_PREFIX(load(raw), raw + ": no jobs in the trace");
  // Every row read and left out: the message says what was left out.
  const std::string pods = d.write("pods.csv", head(fixture("alibaba2023_pods.csv"), 1) +
                                                   "openb-pod-0002,8000,8192,0,0,,BE,Succeeded,1200,2000,1200\n");
  EXPECT_INPUT_ERROR_PREFIX(load(pods), pods + ": no jobs in the trace (skipped: CPU-only pod 1)");
  // A limit of 0 leaves nothing to run either.
  TraceReadOptions none;
  none.limit = 0;
  const std::string gavel = examples("data/gavel/traces/small_test.trace");
  EXPECT_INPUT_ERROR_PREFIX(load(gavel, none), gavel + ": a limit of 0 jobs leaves none");
  none.limit = 1;
  EXPECT_EQ(load(gavel, none).jobs.size(), 1u);
}

TEST(TraceLines, EveryJobRemembersItsLine) {
  TempDir d;
  // Arrival order differs from file order; blank lines count.
  const std::string csv = d.write("l.csv",
                                  "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command\n"
                                  "0,50,LM (batch size 5),,,10,1,,,,\n\n2,10,LM (batch size 5),,,10,1,,,,\n");
  const Trace t = load(csv);
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.jobs[0].line, 4);
  EXPECT_EQ(t.jobs[1].line, 2);
  const Trace g = load(examples("data/gavel/traces/small_test.trace"));
  for (const Job& j : g.jobs) EXPECT_GT(j.line, 0) << j.id;
  const Trace raw = load(fixture("philly_raw_jobs.json"));
  // The line each job's object starts on; the first object starts on line 2.
  EXPECT_TRUE(std::any_of(raw.jobs.begin(), raw.jobs.end(), [](const Job& j) { return j.line == 2; }));
  for (const Job& j : raw.jobs) EXPECT_GE(j.line, 2) << j.id;
  for (const char* f : {"tiresias_60_job.csv", "arena_dummy_runtime_trace.csv", "alibaba2023_pods.csv",
                        "helios_cluster_log.csv"})
    for (const Job& j : load(fixture(f)).jobs) EXPECT_GE(j.line, 2) << f << " job " << j.id;
  // Generated jobs come from no file.
  GenerateOptions o;
  o.jobs = 3;
  for (const Job& j : generate_trace(testing::gavel_table(), o).jobs) EXPECT_EQ(j.line, 0);
}

}  // namespace
}  // namespace cellsched
