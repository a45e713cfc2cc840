// `cellsched trace inspect|convert`, `simulate` and `cluster` on the field's
// formats (issue 15): real processes on the fixtures.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"

namespace fs = std::filesystem;

namespace {

using cellsched::testing::Result;

class ImportCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = cellsched::testing::fresh_test_dir("cellsched-import"); }
  void TearDown() override { fs::remove_all(dir_); }
  Result run(std::vector<std::string> args) {
    args.insert(args.begin(), CELLSCHED_BINARY);
    return cellsched::testing::run_in(args, dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  static std::string fixture(const std::string& name) {
    return std::string(CELLSCHED_TEST_DATA) + "/traces/" + name;
  }
  fs::path dir_;
};

TEST_F(ImportCli, InspectShowsWhatWasReadAndSkipped) {
  Result r = run({"trace", "inspect", fixture("alibaba2023_pods.csv"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "alibaba-pods");
  EXPECT_EQ(j["jobs"], 4);
  bool cpu = false;
  for (const auto& n : j["import_notes"])
    cpu = cpu || (n["what"] == "skipped: CPU-only pod" && n["count"] == 1);
  EXPECT_TRUE(cpu) << r.out;
  r = run({"trace", "inspect", fixture("tiresias_60_job.csv")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("model vgg19 -> ResNet-50 (batch size 32)"), std::string::npos) << r.out;
}

TEST_F(ImportCli, ConvertWritesOwnCsvThatReadsBack) {
  const std::string out = (dir_ / "t.csv").string();
  Result r = run({"trace", "convert", fixture("arena_dummy_runtime_trace.csv"), "-o", out});
  ASSERT_EQ(r.status, 0) << r.err;
  Result a = run({"trace", "convert", out});
  Result b = run({"trace", "convert", fixture("arena_dummy_runtime_trace.csv")});
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out.find(",name,gpu_types\n"), std::string::npos);
  EXPECT_NE(a.out.find("0730acda-4851-7fe1-e2ba-d6fc5204dcc2"), std::string::npos);
  // -o onto the trace itself wrote the CSV over it (exit 0): refused, the file untouched.
  const std::string before = cellsched::testing::slurp(out);
  r = run({"trace", "convert", out, "-o", out});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("is the trace being converted"), std::string::npos) << r.err;
  EXPECT_EQ(cellsched::testing::slurp(out), before);
  // The own CSV's ids, where they are not the row numbering, name the jobs
  // (1000 and 7 came out as 0 and 1 with nothing to join them back by).
  const std::string own = write("ids.csv", "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,"
                                           "deadline_s,duration_s,command\n1000,10,ResNet-18 (batch size 32),,,100,1,,,,\n"
                                           "7,5,ResNet-18 (batch size 32),,,100,1,,,,\n");
  r = run({"trace", "convert", own});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\n0,5,ResNet-18 (batch size 32),ResNet-18,32,100,1,1,,,,7,\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n1,10,ResNet-18 (batch size 32),ResNet-18,32,100,1,1,,,,1000,\n"), std::string::npos) << r.out;
  // A generated trace's own numbering stays as it was: no names added.
  const std::string gen = write("gen.csv", run({"trace", "generate", "--jobs", "5"}).out);
  EXPECT_EQ(run({"trace", "convert", gen}).out.find(",name,"), std::string::npos);
}

TEST_F(ImportCli, FormatOptionAndModelMap) {
  // --format names the reader; a mismatching header is an error at line 1.
  Result r = run({"trace", "inspect", fixture("tiresias_60_job.csv"), "--format", "pollux"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("tiresias_60_job.csv:1: expected the Pollux header"), std::string::npos)
      << r.err;
  r = run({"trace", "inspect", fixture("tiresias_60_job.csv"), "--json", "--model-map",
           "vgg19=Transformer,vgg16=LM (batch size 20)"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["job_types"]["LM (batch size 20)"], 6);
  EXPECT_EQ(j["job_types"]["Transformer (batch size 16)"], 6);
  r = run({"trace", "inspect", fixture("tiresias_60_job.csv"), "--model-map", "vgg19"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--model-map: expected NAME=VALUE"), std::string::npos) << r.err;
}

TEST_F(ImportCli, SimulateTakesTheFilesDirectly) {
  Result r = run({"simulate", "--trace", fixture("alibaba2023_pods.csv"), "--cluster",
                  fixture("alibaba2023_nodes.csv"), "--policy", "fifo,crius", "--no-db", "--json",
                  "--drop-unrunnable"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto two = nlohmann::json::parse(r.out)["runs"];
  ASSERT_EQ(two.size(), 2u);
  // The T4-only pod: Gavel's table has no T4, so it is left out and counted.
  for (const auto& one : two) {
    EXPECT_EQ(one["params"]["dropped_unrunnable"], 1) << one["params"];  // numbers as numbers
    EXPECT_EQ(one["params"]["trace_format"], "alibaba-pods") << one["params"];
    EXPECT_EQ(one["metrics"]["jobs"], 3) << one["metrics"];
  }
  r = run({"simulate", "--trace", fixture("arena_dummy_runtime_trace.csv"), "--cluster",
           "a40:16,a10:16", "--oracle", "measured", "--cells-table", fixture("measured_cells.csv"),
           "--policy", "crius,gavel,tiresias", "--round", "60", "--no-db", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto runs = nlohmann::json::parse(r.out)["runs"];
  ASSERT_EQ(runs.size(), 3u);
  for (const auto& one : runs) EXPECT_EQ(one["metrics"]["completed"], 22) << one["policy"];
  r = run({"simulate", "--trace", fixture("arena_dummy_runtime_trace.csv"), "--cluster", "a40:8",
           "--oracle", "measured", "--no-db"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--cells-table"), std::string::npos) << r.err;
}

TEST_F(ImportCli, PhillyRawLogReplaysFailures) {
  Result r = run({"simulate", "--trace", fixture("philly_raw_jobs.json"), "--cluster", "v100:16",
                  "--policy", "fifo,tiresias", "--replay-failures", "--no-db"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("fifo: 2 failed attempts"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tiresias: 2 failed attempts"), std::string::npos) << r.out;
  r = run({"simulate", "--trace", fixture("philly_raw_jobs.json"), "--cluster", "v100:16",
           "--policy", "fifo", "--no-db", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out)["runs"][0]["metrics"].contains("failed_attempts"));
  r = run({"trace", "inspect", fixture("helios_cluster_log.csv"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["format"], "helios");
  r = run({"trace", "inspect", fixture("pai/pai_task_table.csv"), "--format", "alibaba-pai",
           "--gpu-map", "MISC=p100", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["jobs"], 3);
}

TEST_F(ImportCli, BadRowExitsTwoWithFileAndLine) {
  const std::string bad = write("p.csv", "\xEF\xBB\xBFname,time,application,num_replicas,batch_size\r\n"
                                         "a-0,10,cifar10,2,512\r\nb-1,20,cifar10,0,512\r\n");
  Result r = run({"simulate", "--trace", bad, "--cluster", "v100:8", "--no-db"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(bad + ":3: num_replicas must be a positive integer"), std::string::npos)
      << r.err;
  const std::string cells = write("c.csv", "model,batch,precision,gpu_type,hosts,gpus_per_host,"
                                           "iter_time_s\nm,8,amp,a40,1,1,-2\n");
  r = run({"simulate", "--trace", fixture("arena_dummy_runtime_trace.csv"), "--cluster", "a40:8",
           "--oracle", "measured", "--cells-table", cells, "--no-db"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(cells + ":2: iter_time_s must be a number of seconds in [1e-6, 1e6)"), std::string::npos) << r.err;
  r = run({"cluster", write("g.csv", "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,8,G3\n")});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("g.csv:2: GPU model 'G3' is one Alibaba does not disclose: map it onto a catalogue type with --gpu-map G3=TYPE"), std::string::npos) << r.err;
  // A PAI list's MISC machines are left out with a note (silently, a third
  // of PAI's GPUs); a map key the list has no machine of is a typo or a
  // case slip, refused (it was ignored).
  const std::string pai = write("pai.csv", "m1,V100,96,512,8\nm2,MISC,96,512,8\nm3,MISC,96,512,8\nm4,CPU,96,512,0\n");
  r = run({"cluster", pai, "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: " + pai + ": 2 MISC machines (16 GPUs of undisclosed types) left out: map them with "
                       "--gpu-map MISC=TYPE"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["notes"].size(), 1u) << r.out;
  for (const std::string key : {"MSIC", "misc"}) {
    r = run({"cluster", pai, "--gpu-map", key + "=p100"});
    EXPECT_EQ(r.status, 2) << key;
    EXPECT_NE(r.err.find("has no GPU machine of model '" + key + "' (its models: V100, MISC;"), std::string::npos) << r.err;
  }
  r = run({"cluster", pai, "--gpu-map", "MISC=p100", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["gpus"], 24);
  EXPECT_TRUE(nlohmann::json::parse(r.out)["notes"].empty());
}

// Issue 13: a job no GPU type of the cluster can run would never finish:
// bad input at its trace line (nothing stored), or left out and counted with
// --drop-unrunnable, in simulate, schedule and sweep.
TEST_F(ImportCli, UnrunnableJobIsBadInputUnlessDropped) {
  const std::string db = (dir_ / "runs.db").string();
  Result r = run({"simulate", "--trace", fixture("alibaba2023_pods.csv"), "--cluster",
                  fixture("alibaba2023_nodes.csv"), "--policy", "fifo", "--db", db});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(fixture("alibaba2023_pods.csv") + ":6: job 3 (openb-pod-0005: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(the trace allows it only t4); 1 of 4 jobs cannot run (--drop-unrunnable"),
            std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
  const std::string big = write("big.csv",
                                "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command\n"
                                "0,0,ResNet-18 (batch size 16),,,100,1,,,,\n\n1,5,ResNet-18 (batch size 16),,,100,16,,,,\n");
  for (const std::string verb : {"simulate", "schedule"}) {
    std::vector<std::string> args = {verb, "--trace", big, "--cluster", "v100:8,k80:4", "--policy", "fifo"};
    if (verb == "simulate") args.insert(args.end(), {"--db", db});
    r = run(args);
    EXPECT_EQ(r.status, 2) << verb;
    EXPECT_NE(r.err.find(big + ":4: job 1 (ResNet-18, 16 GPUs) cannot run on cluster v100:8,k80:4: it needs 16 GPUs "
                               "of one type and the cluster has at most 8 of a type"),
              std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(db));
  r = run({"simulate", "--trace", big, "--cluster", "v100:8,k80:4", "--policy", "fifo", "--db", db,
           "--drop-unrunnable"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(1 job, csv, 1 unrunnable dropped)"), std::string::npos) << r.out;
  r = run({"schedule", "--trace", big, "--cluster", "v100:8,k80:4", "--policy", "fifo", "--json", "--drop-unrunnable"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["dropped_unrunnable"], 1);
  // Every job unrunnable: nothing to run even with the flag.
  const std::string all = write("all.csv", "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command\n"
                                           "0,0,ResNet-18 (batch size 16),,,100,16,,,,\n");
  r = run({"simulate", "--trace", all, "--cluster", "v100:8", "--no-db", "--drop-unrunnable"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(all + ": none of the 1 jobs can run"), std::string::npos) << r.err;
  // sweep: the generated traces have multi-GPU jobs, more than a 1-GPU cluster holds.
  r = run({"sweep", "--rates", "2,4", "--jobs", "40", "--policy", "fifo", "--cluster", "v100:1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("generated-2jph-40-seed0: job "), std::string::npos) << r.err;
  r = run({"sweep", "--rates", "2,4", "--jobs", "40", "--policy", "fifo", "--cluster", "v100:1", "--json",
           "--drop-unrunnable"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json sweep = nlohmann::json::parse(r.out);  // (a temporary's element would dangle)
  for (const auto& cell : sweep["results"]) {
    EXPECT_GT(cell["dropped_unrunnable"].get<long>(), 0) << cell;
    EXPECT_EQ(cell["jobs"].get<long>() + cell["dropped_unrunnable"].get<long>(), 40) << cell;
  }
}

// Issue 13: a trace of no jobs, a repeated id or key: exit 2 naming the file
// (and both lines), nothing stored.
TEST_F(ImportCli, EmptyTraceAndDuplicatesAreBadInput) {
  const std::string db = (dir_ / "runs.db").string();
  const std::string h = "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command\n";
  const std::string empty = write("empty.csv", h);
  Result r = run({"simulate", "--trace", empty, "--cluster", "v100:8", "--db", db});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(empty + ": no jobs in the trace"), std::string::npos) << r.err;
  const std::string dup = write("dup.csv", h + "3,0,LM (batch size 5),,,10,1,,,,\n3,1,LM (batch size 5),,,10,1,,,,\n");
  r = run({"simulate", "--trace", dup, "--cluster", "v100:8", "--db", db});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(dup + ":3: duplicate id '3' (first on line 2)"), std::string::npos) << r.err;
  const std::string yaml = write("c.yaml", "nodes:\n  - {name: a, gpu_type: v100, gpus: 4}\n"
                                           "  - {name: a, gpu_type: k80, gpus: 4}\n");
  r = run({"simulate", "--trace", fixture("tiresias_60_job.csv"), "--cluster", yaml, "--db", db});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(yaml + ":3: duplicate node name 'a' (first on line 2)"), std::string::npos) << r.err;
  const std::string tp = write("t.json", "{\"v100\": {\n \"('LM (batch size 5)', 1)\": {\"null\": 1.0},\n"
                                         " \"('LM (batch size 5)', 1)\": {\"null\": 9.0}}}\n");
  r = run({"simulate", "--trace", dup, "--cluster", "v100:8", "--throughputs", tp, "--db", db});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(tp + ":3: duplicate key '('LM (batch size 5)', 1)' (first on line 2)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(db));
}

}  // namespace
