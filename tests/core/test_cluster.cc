#include <gtest/gtest.h>

#include <string>

#include "core/cluster.h"
#include "core/error.h"
#include "core_test_util.h"

namespace cellsched {
namespace {

using testing::input_error;
using testing::shared_data;
using testing::TempDir;

// ---- shorthand ---------------------------------------------------------------

TEST(ClusterShorthand, GavelHeterogeneousCluster) {
  const Cluster c = parse_cluster_shorthand("v100:36,p100:36,k80:36");
  EXPECT_EQ(c.name, "v100:36,p100:36,k80:36");
  ASSERT_EQ(c.nodes.size(), 27u);
  EXPECT_EQ(c.total_gpus(), 108);
  EXPECT_EQ(c.gpus_of_type("v100"), 36);
  EXPECT_EQ(c.gpus_of_type("p100"), 36);
  EXPECT_EQ(c.gpus_of_type("k80"), 36);
  EXPECT_EQ(c.gpus_of_type("h100"), 0);
  EXPECT_EQ(c.gpu_types(), (std::vector<std::string>{"v100", "p100", "k80"}));
  for (const auto& n : c.nodes) {
    EXPECT_EQ(n.gpus, 4);
    EXPECT_EQ(n.address, "localhost");
  }
  EXPECT_EQ(c.nodes[0].name, "v100-0");
  EXPECT_EQ(c.nodes[8].name, "v100-8");
  EXPECT_EQ(c.nodes[9].name, "p100-0");
  EXPECT_EQ(c.nodes[26].name, "k80-8");
  EXPECT_EQ(c.nodes[26].gpu_type, "k80");
}

TEST(ClusterShorthand, RemainderGoesOnOneSmallerNode) {
  const Cluster c = parse_cluster_shorthand("v100:10");
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_EQ(c.nodes[0].gpus, 4);
  EXPECT_EQ(c.nodes[1].gpus, 4);
  EXPECT_EQ(c.nodes[2].gpus, 2);
  EXPECT_EQ(c.nodes[2].name, "v100-2");
  const Cluster one = parse_cluster_shorthand("h100:1");
  ASSERT_EQ(one.nodes.size(), 1u);
  EXPECT_EQ(one.nodes[0].gpus, 1);
}

TEST(ClusterShorthand, CanonicalizesTypesAndSpaces) {
  const Cluster c = parse_cluster_shorthand(" A100:3 , V100M32:4 ");
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[0].name, "a100-40-0");
  EXPECT_EQ(c.nodes[0].gpu_type, "a100-40");
  EXPECT_EQ(c.nodes[0].gpus, 3);
  EXPECT_EQ(c.nodes[1].name, "v100-32-0");
  EXPECT_EQ(c.nodes[1].gpu_type, "v100-32");
}

TEST(ClusterShorthand, BadSpecs) {
  for (const char* bad : {"", "v100", "v100:0", "v100:-4", "v100:x", "v100:4,", ":4",
                          "v100:4,v100:4", "v100:2.5"}) {
    input_error([&] { parse_cluster_shorthand(bad); });
  }
  const std::string msg = input_error([] { parse_cluster_shorthand("v100:4,x100:4"); });
  EXPECT_NE(msg.find("unknown GPU type 'x100'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("known: k80"), std::string::npos) << msg;
  // A positive count past the limit says the limit (it read "must be a positive integer").
  const std::string big = input_error([] { parse_cluster_shorthand("v100:2147483647"); });
  EXPECT_NE(big.find("must be an integer in [1, 1000000]"), std::string::npos) << big;
}

// ---- YAML ----------------------------------------------------------------------

TEST(ClusterYaml, ReadsNodeList) {
  TempDir dir;
  const std::string path = dir.write("lab.yaml",
                                     "name: lab\n"
                                     "nodes:\n"
                                     "  - {name: n1, address: 10.0.0.1, gpu_type: V100, gpus: 4}\n"
                                     "  - name: n2\n"
                                     "    gpu_type: a100\n"
                                     "    gpus: 8\n");
  const Cluster c = load_cluster_yaml(path);
  EXPECT_EQ(c.name, "lab");
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[0].name, "n1");
  EXPECT_EQ(c.nodes[0].address, "10.0.0.1");
  EXPECT_EQ(c.nodes[0].gpu_type, "v100");
  EXPECT_EQ(c.nodes[0].gpus, 4);
  EXPECT_EQ(c.nodes[1].address, "n2");  // defaults to the name
  EXPECT_EQ(c.nodes[1].gpu_type, "a100-40");
  EXPECT_EQ(c.total_gpus(), 12);
}

TEST(ClusterYaml, NetworkBandwidthIsReadAndWrittenBack) {
  TempDir dir;
  const std::string path = dir.write("ib.yaml",
                                     "name: ib\n"
                                     "network_gbps: 25\n"
                                     "nodes:\n"
                                     "  - {name: n1, gpu_type: a100-80, gpus: 8}\n");
  const Cluster c = load_cluster_yaml(path);
  EXPECT_DOUBLE_EQ(c.network_gbps, 25);
  const Cluster back = load_cluster_yaml(dir.write("back.yaml", cluster_to_yaml(c)));
  EXPECT_DOUBLE_EQ(back.network_gbps, 25);
  EXPECT_EQ(cluster_to_yaml(parse_cluster_shorthand("v100:4")).find("network_gbps"), std::string::npos);
  EXPECT_DOUBLE_EQ(parse_cluster_shorthand("v100:4").network_gbps, 0);  // the catalogue's default
}

TEST(ClusterYaml, NameDefaultsToFileNameAndBareListIsAccepted) {
  TempDir dir;
  const std::string path = dir.write("rack.yml", "- {name: a, gpu_type: t4, gpus: 2}\n");
  const Cluster c = load_cluster(path);
  EXPECT_EQ(c.name, "rack.yml");
  ASSERT_EQ(c.nodes.size(), 1u);
  EXPECT_EQ(c.nodes[0].gpu_type, "t4");
}

// NUL bytes: YAML::LoadAll, once used to find a second document, looped
// forever on this input (the fuzzer's find); now an error at once.
TEST(ClusterYaml, NulBytesAreAnErrorNotAHang) {
  TempDir dir;
  const std::string path = dir.write("nul.yaml", std::string("\0\0\0,", 4));
  EXPECT_FALSE(input_error([&] { load_cluster(path); }).empty());
  // A '---' before the content, or after it with nothing more, is one document.
  EXPECT_EQ(load_cluster(dir.write("a.yaml", "---\nnodes: [{name: a, gpu_type: v100, gpus: 4}]\n---\n# end\n")).total_gpus(), 4);
  EXPECT_EQ(load_cluster(dir.write("b.yaml", "--- {nodes: [{name: a, gpu_type: v100, gpus: 4}]}\n...\n")).total_gpus(), 4);
}

struct YamlCase {
  const char* text;
  long line;            // expected line in the message (0: `file: what`)
  const char* needle;   // expected part of the message
};

TEST(ClusterYaml, ErrorsNameFileAndLine) {
  const YamlCase cases[] = {
      {"nodes:\n  - {name: a, gpu_type: v100, gpus: 4}\n  - {name: b, gpu_type: v100}\n", 3,
       "missing field 'gpus'"},
      {"nodes:\n  - name: a\n    gpu_type: v100\n    gpus: 4\n  - name: b\n    gpus: 4\n", 5,
       "missing field 'gpu_type'"},
      {"nodes:\n  - {gpu_type: v100, gpus: 4}\n", 2, "missing field 'name'"},
      // A second document was dropped without a word (node b never read).
      {"nodes: [{name: a, gpu_type: v100, gpus: 4}]\n---\nnodes: [{name: b, gpu_type: v100, gpus: 4}]\n", 3,
       "a second YAML document"},
      {"nodes:\n  - name: a\n    gpu_type: x100\n    gpus: 4\n", 3, "unknown GPU type 'x100'"},
      {"nodes:\n  - name: a\n    gpu_type: v100\n    gpus: 0\n", 4, "an integer in [1, 1000000]"},
      {"nodes:\n  - name: a\n    gpu_type: v100\n    gpus: 2.5\n", 4, "an integer in [1, 1000000]"},
      {"nodes:\n  - name: a\n    gpu_type: v100\n    gpus: many\n", 4, "an integer in [1, 1000000]"},
      {"nodes:\n  - {name: a, gpu_type: v100, gpus: 4}\n  - {name: a, gpu_type: k80, gpus: 4}\n",
       3, "duplicate node name 'a' (first on line 2)"},
      // Issue 13: a repeated key is not silently the last one.
      {"name: x\nnodes:\n  - {name: a, gpu_type: v100, gpus: 4}\nnodes:\n  - {name: b, gpu_type: k80, gpus: 4}\n",
       4, "duplicate field 'nodes' (first on line 2)"},
      {"name: x\nname: y\nnodes:\n  - {name: a, gpu_type: v100, gpus: 4}\n", 2,
       "duplicate field 'name' (first on line 1)"},
      {"nodes:\n  - name: a\n    gpu_type: v100\n    gpus: 4\n    gpus: 8\n", 5,
       "duplicate field 'gpus' (first on line 4)"},
      {"nodes:\n  - {name: a, gpu_type: v100, gpus: 4, name: b}\n", 2, "duplicate field 'name' (first on line 2)"},
      {"name: x\nnodes: []\n", 2, "empty node list"},
      {"name: x\nnodes:\n", 2, "empty node list"},
      {"name: x\n", 1, "missing field 'nodes'"},
      {"name: x\nnode:\n  - {name: a, gpu_type: v100, gpus: 4}\n", 2, "unknown field 'node'"},
      {"nodes:\n  - name: a\n    gpu_type: v100\n    gpu: 4\n", 4, "unknown field 'gpu'"},
      {"nodes:\n  - {name: a, gpu_type: v100, gpus: 4\n", 3, ""},  // unclosed flow map
      {"nodes:\n  - name: a\n   gpu_type: v100\n", 3, ""},         // bad indentation
      {"nodes:\n  - just-a-string\n", 2, "a node must be a map"},
      {"", 0, "empty file"},
      {"network_gbps: fast\nnodes:\n  - {name: a, gpu_type: v100, gpus: 4}\n", 1, "'network_gbps' must be"},
      {"network_gbps: -1\nnodes:\n  - {name: a, gpu_type: v100, gpus: 4}\n", 1, "got '-1'"},
      {"network_gbps: 1e308\nnodes:\n  - {name: a, gpu_type: v100, gpus: 4}\n", 1, "<= 10000"},
      {"network_gbps: nan\nnodes:\n  - {name: a, gpu_type: v100, gpus: 4}\n", 1, "'network_gbps' must be"},
      {"network_gbps: [25]\nnodes:\n  - {name: a, gpu_type: v100, gpus: 4}\n", 1, "'network_gbps' must be"},
  };
  TempDir dir;
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = dir.write("c" + std::to_string(i++) + ".yaml", c.text);
    const std::string prefix =
        c.line > 0 ? path + ":" + std::to_string(c.line) + ": " : path + ": ";
    const std::string msg = input_error([&] { load_cluster_yaml(path); });
    EXPECT_TRUE(testing::starts_with(msg, prefix))
        << "case:\n" << c.text << "message: " << msg << "\nexpected prefix: " << prefix;
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
  }
}

TEST(ClusterYaml, UnknownTypeListsKnownTypes) {
  TempDir dir;
  const std::string path = dir.write("u.yaml", "nodes:\n  - {name: a, gpu_type: x100, gpus: 4}\n");
  const std::string msg = input_error([&] { load_cluster_yaml(path); });
  EXPECT_NE(msg.find("known: k80, p100"), std::string::npos) << msg;
}

TEST(ClusterYaml, RoundTripsThroughYaml) {
  Cluster c = parse_cluster_shorthand("v100:6,k80:4,h200:8");
  c.nodes[0].address = "10.1.2.3";
  c.nodes[1].name = "odd: name #1";
  c.nodes[2].address = "'quoted'";
  c.name = "mixed: cluster";
  TempDir dir;
  const std::string path = dir.write("rt.yaml", cluster_to_yaml(c));
  const Cluster back = load_cluster(path);
  EXPECT_EQ(back.name, c.name);
  ASSERT_EQ(back.nodes.size(), c.nodes.size());
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    EXPECT_EQ(back.nodes[i].name, c.nodes[i].name);
    EXPECT_EQ(back.nodes[i].address, c.nodes[i].address);
    EXPECT_EQ(back.nodes[i].gpu_type, c.nodes[i].gpu_type);
    EXPECT_EQ(back.nodes[i].gpus, c.nodes[i].gpus);
  }
}

// ---- PAI machine list -------------------------------------------------------------

TEST(ClusterPai, RealMachineList) {
  const Cluster c = load_pai_machines(shared_data("alibaba_pai_2020/pai_machine_spec.csv"));
  // SOURCES.md: P100 798 machines (1,596 GPUs), T4 497 (994), V100M32 135 (1,080),
  // V100 104 (832); MISC (280) and CPU (83) are skipped.
  EXPECT_EQ(c.nodes.size(), 798u + 497 + 135 + 104);
  EXPECT_EQ(c.gpus_of_type("p100"), 1596);
  EXPECT_EQ(c.gpus_of_type("t4"), 994);
  EXPECT_EQ(c.gpus_of_type("v100-32"), 1080);
  EXPECT_EQ(c.gpus_of_type("v100"), 832);
  EXPECT_EQ(c.total_gpus(), 1596 + 994 + 1080 + 832);
  long p100_nodes = 0;
  for (const auto& n : c.nodes) {
    EXPECT_EQ(n.address, n.name);
    if (n.gpu_type == "p100") {
      ++p100_nodes;
      EXPECT_EQ(n.gpus, 2);
    }
  }
  EXPECT_EQ(p100_nodes, 798);
}

TEST(ClusterPai, MiscMachinesTakeTheGivenType) {
  const Cluster c =
      load_pai_machines(shared_data("alibaba_pai_2020/pai_machine_spec.csv"), "A10");
  EXPECT_EQ(c.nodes.size(), 798u + 497 + 135 + 104 + 280);
  EXPECT_EQ(c.gpus_of_type("a10"), 2240);
  EXPECT_EQ(c.total_gpus(), 1596 + 994 + 1080 + 832 + 2240);
  input_error([] {
    load_pai_machines(shared_data("alibaba_pai_2020/pai_machine_spec.csv"), "x100");
  });
}

TEST(ClusterPai, LoadClusterDispatchesCsv) {
  const Cluster c = load_cluster(shared_data("alibaba_pai_2020/pai_machine_spec.csv"));
  EXPECT_EQ(c.total_gpus(), 4502);
  // --gpu-map MISC=TYPE reaches the machine list (it was ignored there).
  const std::string path = shared_data("alibaba_pai_2020/pai_machine_spec.csv");
  EXPECT_EQ(load_cluster(path, {{"MISC", "p100"}}).total_gpus(), 4502 + 2240);
  EXPECT_NE(input_error([&] { load_cluster(path, {{"MISC", "nonsense"}}); })
                .find("--gpu-map maps 'MISC' onto 'nonsense', which is not in the GPU catalogue"),
            std::string::npos);
}

// Another file's header read as a PAI row blamed its cap_cpu ("must be a
// non-negative number, got 'num_gpu_p_node'").
TEST(ClusterPai, AnotherFilesHeaderIsNamedAsSuch) {
  TempDir dir;
  for (const char* header : {"num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n4,8,8,32,256\n",
                             "sn,cpu_milli,memory_mib,gpu,model,extra\nn,1,1,8,T4,x\n"}) {
    const std::string path = dir.write("c.csv", header);
    EXPECT_NE(input_error([&] { load_cluster(path); }).find(":1: unrecognised header '"), std::string::npos) << header;
  }
  const std::string bad = dir.write("p.csv", "m1,V100,nan,1,8\n");  // a PAI row with a bad number stays one
  EXPECT_NE(input_error([&] { load_cluster(bad); }).find(":1: cap_cpu must be a non-negative number, got 'nan'"),
            std::string::npos);
}

TEST(ClusterPai, BadLines) {
  TempDir dir;
  const std::string good = "m1,V100,96,512,8\nm2,CPU,96,512,0\n";
  struct Case {
    std::string line;
    const char* needle;
  } cases[] = {
      {"m3,T4,96,512", "expected 5 fields"},
      {"m3,K40,96,512,4", "unknown PAI gpu_type 'K40'"},
      {"m3,T4,96,512,x", "cap_gpu"},
      {"m3,T4,96,512,-2", "cap_gpu"},
      {"m3,T4,lots,512,2", "cap_cpu"},
      {"m1,T4,96,512,2", "duplicate machine 'm1' (first on line 1)"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = dir.write("p" + std::to_string(i++) + ".csv", good + c.line + "\n");
    const std::string msg = input_error([&] { load_pai_machines(path); });
    EXPECT_TRUE(testing::starts_with(msg, path + ":3: ")) << msg;
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
  }
  const std::string ok = dir.write("ok.csv", good + "\nm3,T4,96,512,0\nm4,MISC,96,512,8\n");
  const Cluster c = load_pai_machines(ok);
  ASSERT_EQ(c.nodes.size(), 1u);
  EXPECT_EQ(c.nodes[0].name, "m1");
  const std::string none = dir.write("none.csv", "m2,CPU,96,512,0\n");
  EXPECT_INPUT_ERROR_PREFIX(load_pai_machines(none), none + ": ");
}

// ---- load_cluster dispatch ---------------------------------------------------------

TEST(ClusterLoad, DispatchesShorthandAndReportsMissingFiles) {
  EXPECT_EQ(load_cluster("v100:8,k80:2").total_gpus(), 10);
  EXPECT_INPUT_ERROR_PREFIX(load_cluster("/nonexistent/cluster.yaml"),
                            "/nonexistent/cluster.yaml: cannot open");
  EXPECT_INPUT_ERROR_PREFIX(load_cluster("/nonexistent/machines.csv"),
                            "/nonexistent/machines.csv: cannot open");
  EXPECT_INPUT_ERROR_PREFIX(load_cluster("no-such-cluster"), "no-such-cluster: cannot open");
  EXPECT_INPUT_ERROR_PREFIX(load_cluster("/tmp/v100:8"), "/tmp/v100:8: cannot open");
}

}  // namespace
}  // namespace cellsched
