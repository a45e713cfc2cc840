// The field's published trace formats (issue 15): Tiresias, Crius/Arena,
// Pollux, Alibaba 2023 pods and nodes; detection by header, BOM/CRLF.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "core/cluster.h"
#include "core/error.h"
#include "core/throughput.h"
#include "core/trace_io.h"
#include "core_test_util.h"

namespace cellsched {
namespace {

using testing::input_error;
using testing::shared_data;
using testing::TempDir;

const ThroughputTable& table() { return testing::gavel_table(); }

std::string fixture(const std::string& name) {
  return std::string(CELLSCHED_TEST_DATA) + "/traces/" + name;
}

Trace load(const std::string& path, TraceReadOptions o = {}) {
  o.table = &table();
  return load_trace(path, o);
}

long note(const Trace& t, const std::string& what) {
  for (const auto& [w, n] : t.import_notes)
    if (w == what) return n;
  return 0;
}

// CRLF line ends and a UTF-8 BOM on the same content.
std::string windows(const std::string& text) {
  std::string out = "\xEF\xBB\xBF";
  for (char c : text) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

using Cases = std::vector<std::pair<std::string, std::string>>;

// Each (row, message) case: the file `header` + row fails at `file:<line>:
// message` (line 2, or 4 when `good` rows and a blank line come first).
void expect_row_errors(const std::string& header, const Cases& cases, const std::string& good = "") {
  TempDir d;
  const std::string line = good.empty() ? ":2: " : ":4: ";
  for (const auto& [row, what] : cases) {
    const std::string p = d.write("bad.csv", header + good + (good.empty() ? "" : "\n") + row + "\n");
    const std::string msg = input_error([&] { load(p); });
    EXPECT_NE(msg.find(p + line + what), std::string::npos) << row << " -> " << msg;
  }
}

void expect_same(const Trace& a, const Trace& b) {
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].name, b.jobs[i].name);
    EXPECT_EQ(a.jobs[i].arrival_s, b.jobs[i].arrival_s);
    EXPECT_EQ(a.jobs[i].job_type, b.jobs[i].job_type);
    EXPECT_EQ(a.jobs[i].total_iterations, b.jobs[i].total_iterations);
    EXPECT_EQ(a.jobs[i].gpus, b.jobs[i].gpus);
    EXPECT_EQ(a.jobs[i].deadline_s, b.jobs[i].deadline_s);
    EXPECT_EQ(a.jobs[i].gpu_types, b.jobs[i].gpu_types);
  }
  EXPECT_EQ(a.import_notes, b.import_notes);
}

// The same content with a UTF-8 BOM and CRLF line ends reads the same.
void expect_bom_crlf_same(const std::string& text) {
  TempDir d;
  expect_same(load(d.write("a.csv", text)), load(d.write("b.csv", windows(text))));
}

// ---- detection -----------------------------------------------------------------

TEST(FieldFormats, DetectedByHeaderOnEverySample) {
  EXPECT_EQ(load(fixture("tiresias_60_job.csv")).format, "tiresias");
  EXPECT_EQ(load(fixture("arena_dummy_runtime_trace.csv")).format, "crius");
  EXPECT_EQ(load(fixture("alibaba2023_pods.csv")).format, "alibaba-pods");
  for (int i = 1; i <= 8; ++i)
    EXPECT_EQ(load(shared_data("pollux_adaptdl/workloads/workload-" + std::to_string(i) + ".csv"))
                  .format,
              "pollux");
  for (auto f : {TraceFormat::Tiresias, TraceFormat::Crius, TraceFormat::Pollux,
                 TraceFormat::AlibabaPods})
    EXPECT_EQ(parse_trace_format(to_string(f)), f);
  EXPECT_EQ(parse_trace_format("arena"), TraceFormat::Crius);
}

TEST(FieldFormats, UnknownHeaderNamesItAndTheOption) {
  TempDir d;
  const std::string p = d.write("x.csv", "job,gpus,when\n1,2,3\n");
  const std::string msg = input_error([&] { load(p); });
  EXPECT_NE(msg.find(p + ":1: cannot tell the trace format from the header 'job,gpus,when'"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--format"), std::string::npos) << msg;
}

TEST(FieldFormats, ForcedFormatChecksTheHeader) {
  TraceReadOptions o;
  o.format = TraceFormat::Crius;
  const std::string msg = input_error([&] { load(fixture("tiresias_60_job.csv"), o); });
  EXPECT_NE(msg.find(":1: expected the Crius/Arena header"), std::string::npos) << msg;
}

TEST(FieldFormats, TheTwoAlibabaCsvsAreToldApart) {
  // The 2023 node list is a cluster, not a PAI 2020 machine list.
  const Cluster c = load_cluster(fixture("alibaba2023_nodes.csv"));
  EXPECT_EQ(c.nodes.size(), 5u);  // the CPU node is left out
  EXPECT_EQ(c.total_gpus(), 23);
  EXPECT_EQ(c.gpus_of_type("v100"), 8);
  EXPECT_EQ(c.gpus_of_type("v100-32"), 8);
  EXPECT_EQ(c.gpus_of_type("a10"), 1);
  const Cluster pai = load_cluster(shared_data("alibaba_pai_2020/pai_machine_spec.csv"));
  EXPECT_GT(pai.total_gpus(), 0);
  // The pod list is a trace; as a cluster it is neither format.
  EXPECT_FALSE(input_error([&] { load_cluster(fixture("alibaba2023_pods.csv")); }).empty());
}

// ---- Tiresias ------------------------------------------------------------------

TEST(Tiresias, PublishedSampleImportsWithTheDefaultMap) {
  const Trace t = load(fixture("tiresias_60_job.csv"));
  ASSERT_EQ(t.jobs.size(), 60u);
  const Job& j0 = t.jobs[0];  // 0,1,0,606,vgg19,164,30
  EXPECT_EQ(j0.name, "0");
  EXPECT_EQ(j0.job_type, "ResNet-50 (batch size 32)");
  EXPECT_EQ(j0.gpus, 1);
  EXPECT_EQ(j0.duration_hint_s, 164);
  const double rate = *table().get("v100", "ResNet-50 (batch size 32)", 1);
  EXPECT_EQ(j0.total_iterations, std::round(164 * rate));
  const Job& j1 = t.jobs[1];  // 1,8,30,133,vgg11,147,23
  EXPECT_EQ(j1.arrival_s, 30);
  EXPECT_EQ(j1.gpus, 8);
  EXPECT_EQ(j1.total_iterations,
            std::round(147 * *table().get("v100", "ResNet-50 (batch size 32)", 8)));
  EXPECT_EQ(note(t, "model alexnet -> ResNet-18 (batch size 32)"), 6);
}

TEST(Tiresias, ModelMapOverridesAndUnknownModelsAreNamed) {
  TempDir d;
  const std::string hdr = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n";
  const std::string p = d.write("t.csv", hdr + "7,2,10,100,vgg16,600,5\n8,1,20,100,bert,60,5\n");
  TraceReadOptions o;
  o.format = TraceFormat::Tiresias;
  EXPECT_NE(input_error([&] { load(p, o); }).find(p + ":3: no job type for 'bert'"),
            std::string::npos);
  o.model_map = {{"bert", "Transformer (batch size 64)"}, {"vgg16", "ResNet-18"}};
  const Trace t = load(p, o);
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.jobs[0].job_type, "ResNet-18 (batch size 16)");  // a model: its smallest batch
  EXPECT_EQ(t.jobs[1].job_type, "Transformer (batch size 64)");
  o.model_map = {{"bert", "NoSuchModel"}, {"vgg16", "ResNet-18"}};
  EXPECT_NE(input_error([&] { load(p, o); }).find("neither a job type nor a model"),
            std::string::npos);
}

TEST(Tiresias, ModelMapOntoZooModels) {
  TempDir d;
  const std::string p = d.write(
      "t.csv", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
               "7,2,10,100,vgg16,600,5\n");
  TraceReadOptions o;
  o.model_map = {{"vgg16", "wrn-50-2@64"}};
  EXPECT_NE(input_error([&] { load(p, o); }).find(p + ":2: zoo model 'wrn-50-2' needs --oracle cells"),
            std::string::npos);
  o.model_rate = [](const std::string& model, int batch, int gpus) {
    return model == "wrn-50-2" && batch == 64 ? 1.5 * gpus : 0.0;
  };
  const Trace t = load(p, o);
  ASSERT_EQ(t.jobs.size(), 1u);
  EXPECT_EQ(t.jobs[0].job_type, "wrn-50-2@64");
  EXPECT_EQ(t.jobs[0].model, "wrn-50-2");
  EXPECT_EQ(t.jobs[0].batch_size, 64);
  EXPECT_EQ(t.jobs[0].total_iterations, 600 * 3.0);
}

TEST(Tiresias, BadRowsNameFileAndLine) {
  const std::string hdr = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n";
  const Cases cases = {
      {"1,0,0,10,vgg16,60,1", "num_gpu must be a positive integer"},
      {"1,x,0,10,vgg16,60,1", "num_gpu must be an integer"},
      {"1,1,-5,10,vgg16,60,1", "submit_time must not be negative"},
      {"1,1,nan,10,vgg16,60,1", "submit_time must be a number"},
      {"1,1,0,0,vgg16,60,1", "iterations must be positive"},
      {"1,1,0,10,,60,1", "empty model_name"},
      {"1,1,0,10,vgg16,1e400,1", "duration must be a number"},
      {"1,1,0,10,vgg16,0,1", "duration must be positive"},
      {"1,1,0,10,vgg16,60,-1", "interval must not be negative"},
      {",1,0,10,vgg16,60,1", "empty job_id"},
      {"1,1,0,10,vgg16,60", "expected 7 fields"},
      {"1,1,0,10,\"vgg16,60,1", "unterminated quoted field"},
  };
  expect_row_errors(hdr, cases, "0,1,0,10,vgg16,60,1\n");
}

TEST(Tiresias, BomAndCrlfReadTheSame) {
  expect_bom_crlf_same(
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
      "0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n");
}

// ---- Crius / Arena ---------------------------------------------------------------

TEST(Crius, PublishedSampleKeepsUuidsAndRebasesTimes) {
  const Trace t = load(fixture("arena_dummy_runtime_trace.csv"));
  ASSERT_EQ(t.jobs.size(), 22u);
  const Job& j = t.jobs[0];  // 0730acda-...,1991355,22,moe__690M,2000917,256,16,a40
  EXPECT_EQ(j.name, "0730acda-4851-7fe1-e2ba-d6fc5204dcc2");
  EXPECT_EQ(j.arrival_s, 0);
  EXPECT_EQ(j.deadline_s, 2000917 - 1991355);
  EXPECT_EQ(j.model, "moe__690M");
  EXPECT_EQ(j.job_type, "moe__690M");
  EXPECT_EQ(j.batch_size, 256);
  EXPECT_EQ(j.gpus, 16);
  EXPECT_EQ(j.total_iterations, 22);
  EXPECT_EQ(t.jobs[1].arrival_s, 1991382 - 1991355);
  EXPECT_EQ(note(t, "requested gpu_type a40 (not binding)"), 14);
}

TEST(Crius, BadRowsNameFileAndLine) {
  const std::string hdr =
      "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n";
  const Cases cases = {
      {"u1,100,10,bert__760M,50,128,1,a40", "deadline 50 is before the submission time 100"},
      {"u1,100,0,bert__760M,500,128,1,a40", "num_iteration must be positive"},
      {"u1,100,10,bert__760M,500,0,1,a40", "batch_size must be a positive integer"},
      {"u1,100,10,bert__760M,500,128,inf,a40", "num_gpu must be an integer"},
      {"u1,100,10,,500,128,1,a40", "empty model_name"},
      {"u1,100,10,bert__760M,500,128,1,", "empty gpu_type"},
      {"u1,-1,10,bert__760M,500,128,1,a40", "submission_time must not be negative"},
  };
  expect_row_errors(hdr, cases);
}

TEST(Crius, BomAndCrlfReadTheSame) {
  expect_bom_crlf_same(
      "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n"
      "a-1,100,10,bert__760M,500,128,1,a40\nb-2,150,20,moe__1.3B,900,256,4,a10\n");
}

// ---- Pollux ------------------------------------------------------------------------

TEST(Pollux, RealWorkloadsImportUntouched) {
  for (int i = 1; i <= 8; ++i) {
    const Trace t =
        load(shared_data("pollux_adaptdl/workloads/workload-" + std::to_string(i) + ".csv"));
    EXPECT_EQ(t.jobs.size(), 160u) << i;
  }
  const Trace t = load(shared_data("pollux_adaptdl/workloads/workload-1.csv"));
  const Job& j = t.jobs[0];  // cifar10-0,107,cifar10,6,2048
  EXPECT_EQ(j.name, "cifar10-0");
  EXPECT_EQ(j.arrival_s, 107);  // kept as given
  EXPECT_EQ(j.gpus, 6);
  EXPECT_EQ(j.job_type, "ResNet-18 (batch size 256)");  // 2048 / 6 = 341 per GPU: nearest 256
  EXPECT_EQ(j.total_iterations, std::ceil(20377.0 * 256 / 2048));
  const Job& n = t.jobs[2];  // ncf-2,135,ncf,1,32768
  EXPECT_EQ(n.job_type, "Recommendation (batch size 8192)");
  EXPECT_EQ(n.total_iterations, std::ceil(48625.0 * 1024 / 32768));
}

TEST(Pollux, BadRowsNameFileAndLine) {
  const std::string hdr = "name,time,application,num_replicas,batch_size\n";
  const Cases cases = {
      {"x-1,10,resnet,1,64", "unknown application 'resnet'"},
      {"x-1,10,cifar10,0,64", "num_replicas must be a positive integer"},
      {"x-1,10,cifar10,1,-64", "batch_size must be a positive integer"},
      {"x-1,1e999,cifar10,1,64", "time must be a number"},
      {",10,cifar10,1,64", "empty name"},
  };
  expect_row_errors(hdr, cases);
}

TEST(Pollux, BomAndCrlfReadTheSame) {
  expect_bom_crlf_same(
      "name,time,application,num_replicas,batch_size\n"
      "cifar10-0,107,cifar10,6,2048\nbert-1,110,bert,2,24\n");
}

// ---- Alibaba 2023 ------------------------------------------------------------------

TEST(AlibabaPods, JobsRestrictionsAndCounts) {
  const Trace t = load(fixture("alibaba2023_pods.csv"));
  ASSERT_EQ(t.jobs.size(), 4u);
  EXPECT_EQ(t.jobs[0].name, "openb-pod-0001");
  EXPECT_EQ(t.jobs[0].arrival_s, 0);  // creation 1000, the earliest
  EXPECT_EQ(t.jobs[0].duration_hint_s, 5000 - 1100);
  EXPECT_TRUE(t.jobs[0].gpu_types.empty());
  EXPECT_EQ(t.jobs[1].gpus, 1);  // gpu_milli 500 -> one whole GPU
  EXPECT_EQ(t.jobs[2].gpus, 4);
  EXPECT_EQ(t.jobs[2].gpu_types, (std::vector<std::string>{"v100", "v100-32"}));
  EXPECT_EQ(t.jobs[3].gpu_types, (std::vector<std::string>{"t4"}));
  EXPECT_EQ(note(t, "skipped: CPU-only pod"), 1);
  EXPECT_EQ(note(t, "fractional GPU (gpu_milli < 1000) rounded up to 1"), 1);
  EXPECT_EQ(note(t, "skipped: never scheduled or never deleted (no duration)"), 1);
  // The same seed draws the same job types; the CSV keeps names and types.
  expect_same(t, load(fixture("alibaba2023_pods.csv")));
  TempDir d;
  std::ostringstream csv;
  write_trace_csv(t, csv);
  const Trace back = load(d.write("own.csv", csv.str()));
  ASSERT_EQ(back.jobs.size(), 4u);
  EXPECT_EQ(back.jobs[2].gpu_types, t.jobs[2].gpu_types);
  EXPECT_EQ(back.jobs[3].name, "openb-pod-0005");
}

// The first rows of the published files, as published.
TEST(AlibabaPods, PublishedFilesImportUntouched) {
  const Trace t = load(fixture("alibaba2023_openb_pod_list_default_head.csv"));
  EXPECT_EQ(t.format, "alibaba-pods");
  EXPECT_EQ(t.jobs.size(), 62u - 6 - 1);  // 6 CPU-only pods, 1 pending one
  EXPECT_EQ(note(t, "skipped: CPU-only pod"), 6);
  EXPECT_EQ(note(t, "fractional GPU (gpu_milli < 1000) rounded up to 1"), 19);
  EXPECT_EQ(t.jobs[0].name, "openb-pod-0000");
  EXPECT_EQ(t.jobs[0].duration_hint_s, 12537496);
  const std::string nodes = fixture("alibaba2023_openb_node_list_gpu_node_head.csv");
  EXPECT_NE(input_error([&] { load_cluster(nodes); }).find(nodes + ":24: GPU model 'G3' is one Alibaba does not disclose"),
            std::string::npos);
  const Cluster c = load_cluster(nodes, {{"G2", "t4"}, {"G3", "a10"}});
  EXPECT_EQ(c.nodes.size(), 40u);
  EXPECT_EQ(c.gpus_of_type("p100"), 44);
  EXPECT_EQ(c.gpus_of_type("v100-32"), 16);
}

TEST(AlibabaPods, BadRowsNameFileAndLine) {
  const std::string hdr =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n";
  const Cases cases = {
      {"p,1,1,1,1000,H800,LS,Running,0,10,1", "unknown GPU model 'H800'"},
      {"p,1,1,1,1500,,LS,Running,0,10,1", "gpu_milli must be at most 1000"},
      {"p,1,1,-1,1000,,LS,Running,0,10,1", "num_gpu must be a non-negative integer"},
      {"p,1,1,1,1000,,LS,Running,0,5,10", "deletion_time 5 is before scheduled_time 10"},
      {"p,1,1,1,1000,,LS,Running,20,50,10", "scheduled_time 10 is before creation_time 20"},
      {"p,nan,1,1,1000,,LS,Running,0,10,1", "cpu_milli must be a number"},
  };
  expect_row_errors(hdr, cases);
  TempDir d;
  TraceReadOptions o;
  o.gpu_map = {{"H800", "h100"}};
  const std::string p = d.write("ok.csv", hdr + "p,1,1,1,1000,H800,LS,Running,0,10,1\n");
  EXPECT_EQ(load(p, o).jobs.at(0).gpu_types, (std::vector<std::string>{"h100"}));
}

TEST(AlibabaPods, BomAndCrlfReadTheSame) {
  expect_bom_crlf_same(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\np1,1,1,2,1000,T4,LS,Running,5,100,10\n");
}

TEST(AlibabaNodes, UnknownModelsAreNamedOrMapped) {
  TempDir d;
  const std::string p =
      d.write("n.csv", windows("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,8,G2\nn2,1,1,4,G3\n"));
  const std::string msg = input_error([&] { load_cluster(p); });
  EXPECT_NE(msg.find(p + ":2: GPU model 'G2' is one Alibaba does not disclose"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--gpu-map G2=TYPE"), std::string::npos) << msg;
  const Cluster c = load_cluster(p, {{"G2", "t4"}, {"G3", "A10"}});
  EXPECT_EQ(c.gpus_of_type("t4"), 8);
  EXPECT_EQ(c.gpus_of_type("a10"), 4);
  EXPECT_NE(input_error([&] { load_cluster(p, {{"G2", "nope"}, {"G3", "a10"}}); })
                .find(":2: --gpu-map maps 'G2' onto 'nope'"),
            std::string::npos);
  const std::string bad = d.write("b.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,x,T4\n");
  EXPECT_NE(input_error([&] { load_cluster(bad); }).find(bad + ":2: gpu must be"),
            std::string::npos);
  const std::string dup =
      d.write("c.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1,T4\nn1,1,1,1,T4\n");
  EXPECT_NE(input_error([&] { load_cluster(dup); }).find(dup + ":3: duplicate node 'n1' (first on line 2)"),
            std::string::npos);
}

// ---- Alibaba PAI 2020 ----------------------------------------------------------

TEST(AlibabaPai, TaskTableWithTheJobTableBeside) {
  TraceReadOptions o;
  o.format = TraceFormat::AlibabaPai;
  const Trace t = load(fixture("pai/pai_task_table.csv"), o);
  ASSERT_EQ(t.jobs.size(), 3u);
  EXPECT_EQ(t.jobs[0].name, "4f057009a5d481acec67b088");
  EXPECT_EQ(t.jobs[0].gpus, 1);  // plan_gpu 50 (percent): rounded up to one GPU
  EXPECT_TRUE(t.jobs[0].gpu_types.empty());  // MISC: not binding unless mapped
  EXPECT_EQ(t.jobs[0].duration_hint_s, 23);
  const Job& w = t.jobs[1];  // 4 worker instances x 100 % + 2 CPU ps
  EXPECT_EQ(w.gpus, 4);
  EXPECT_EQ(w.gpu_types, (std::vector<std::string>{"v100"}));
  EXPECT_EQ(w.arrival_s, 5900 - 5470);  // job table submission, from the earliest
  EXPECT_EQ(w.duration_hint_s, 9610 - 5990);
  EXPECT_EQ(t.jobs[2].gpus, 2);  // plan_gpu 200: two GPUs
  EXPECT_EQ(note(t, "skipped: CPU-only job"), 1);
  EXPECT_EQ(note(t, "skipped: a task without start and end time"), 1);
  EXPECT_EQ(note(t, "job status Failed"), 1);
  o.gpu_map = {{"MISC", "p100"}};
  EXPECT_EQ(load(fixture("pai/pai_task_table.csv"), o).jobs[0].gpu_types,
            (std::vector<std::string>{"p100"}));
  // Headerless, so auto cannot tell it; with the header line it can.
  EXPECT_NE(input_error([] { load(fixture("pai/pai_task_table.csv")); }).find("--format alibaba-pai"),
            std::string::npos);
  TempDir d;
  const std::string with_header = d.write(
      "pai_task_table.csv",
      "\xEF\xBB\xBFjob_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,"
      "gpu_type\r\nj1,worker,2.0,Terminated,10,70,600,29,100,T4\r\n");
  const Trace h = load(with_header);
  EXPECT_EQ(h.format, "alibaba-pai");
  ASSERT_EQ(h.jobs.size(), 1u);
  EXPECT_EQ(h.jobs[0].gpus, 2);
}

TEST(AlibabaPai, BadRowsNameFileAndLine) {
  const Cases cases = {
      {"j,w,0,Terminated,1,2,1,1,100,T4", "inst_num must be positive"},
      {"j,w,1.5,Terminated,1,2,1,1,100,T4", "inst_num must be a whole number"},
      {"j,w,1,Terminated,5,2,1,1,100,T4", "end_time is before start_time"},
      {"j,w,1,Terminated,1,2,1,1,-100,T4", "plan_gpu must not be negative"},
      {"j,w,1,Terminated,nan,2,1,1,100,T4", "start_time must be a number"},
      {",w,1,Terminated,1,2,1,1,100,T4", "empty job_name"},
      {"j,w,1,Terminated,1,2,1,1,100", "expected 10 fields"},
  };
  TempDir d;
  for (const auto& [row, what] : cases) {
    const std::string p = d.write("t.csv", "a,w,1,Terminated,1,2,1,1,100,T4\n\n" + row + "\n");
    TraceReadOptions o;
    o.format = TraceFormat::AlibabaPai;
    const std::string msg = input_error([&] { load(p, o); });
    EXPECT_NE(msg.find(p + ":3: " + what), std::string::npos) << row << " -> " << msg;
  }
  const std::string p = d.write("u.csv", "a,w,1,Terminated,1,2,1,1,100,K40\n");
  TraceReadOptions o;
  o.format = TraceFormat::AlibabaPai;
  EXPECT_NE(input_error([&] { load(p, o); }).find(p + ":1: job a: unknown gpu_type 'K40'"),
            std::string::npos);
}

// ---- Helios ----------------------------------------------------------------------

TEST(Helios, PublishedExampleRows) {
  const Trace t = load(fixture("helios_cluster_log.csv"));
  EXPECT_EQ(t.format, "helios");
  ASSERT_EQ(t.jobs.size(), 3u);
  EXPECT_EQ(t.jobs[0].name, "1425511");
  EXPECT_EQ(t.jobs[1].gpus, 4);
  EXPECT_EQ(t.jobs[1].arrival_s, 26);  // 18:41:27 after 18:41:01
  EXPECT_EQ(t.jobs[1].duration_hint_s, 249);
  const double rate = *table().get("v100", t.jobs[1].job_type, 4);
  EXPECT_EQ(t.jobs[1].total_iterations, std::round(249 * rate));
  EXPECT_EQ(note(t, "state FAILED"), 1);
}

TEST(Helios, BadRowsCpuJobsAndBomCrlf) {
  const std::string hdr =
      "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,"
      "queue\n";
  const Cases cases = {
      {"1,u,v,-1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:42:01,60,0",
       "gpu_num must be a non-negative integer"},
      {"1,u,v,1,1,1,COMPLETED,June 9,2020-06-09 18:41:01,2020-06-09 18:42:01,60,0",
       "bad submit_time 'June 9'"},
      {"1,u,v,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:40:01,60,0",
       "end_time is before start_time"},
      {"1,u,v,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:42:01,inf,0",
       "duration must be a number"},
      {"1,u,v,1,1,1,,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:42:01,60,0",
       "empty state"},
  };
  expect_row_errors(hdr, cases);
  TempDir d;
  const std::string p = d.write(
      "h.csv", windows(hdr +
                       "1,u,v,0,8,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,"
                       "2020-06-09 18:42:01,60,0\n"
                       "2,u,v,2,8,1,COMPLETED,2020-06-09 18:41:02,2020-06-09 18:41:02,"
                       "2020-06-09 18:42:02,60,0\n"));
  const Trace t = load(p);
  ASSERT_EQ(t.jobs.size(), 1u);
  EXPECT_EQ(note(t, "skipped: CPU job"), 1);
}

TEST(NameMap, ParsesAndRejects) {
  const auto m = parse_name_map("vgg16=ResNet-50 (batch size 64), alexnet = ResNet-18", "--model-map");
  EXPECT_EQ(m.at("vgg16"), "ResNet-50 (batch size 64)");
  EXPECT_EQ(m.at("alexnet"), "ResNet-18");
  EXPECT_NE(input_error([] { parse_name_map("vgg16", "--model-map"); }).find("--model-map"),
            std::string::npos);
  EXPECT_NE(input_error([] { parse_name_map("a=b,a=c", "--gpu-map"); }).find("mapped twice"),
            std::string::npos);
}

}  // namespace
}  // namespace cellsched
