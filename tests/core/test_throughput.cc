#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/throughput.h"
#include "core_test_util.h"

namespace cellsched {
namespace {

using testing::input_error;
using testing::shared_data;
using testing::TempDir;

TEST(ThroughputTable, SetGetAndListings) {
  ThroughputTable t;
  EXPECT_EQ(t.size(), 0u);
  t.set("v100", "B", 2, 3.5);
  t.set("v100", "B", 1, 2.0);
  t.set("k80", "A", 1, 0.5);
  t.set("v100", "B", 1, 2.5);  // overwrites
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.get("v100", "B", 1), 2.5);
  EXPECT_EQ(t.get("v100", "B", 2), 3.5);
  EXPECT_FALSE(t.get("v100", "B", 4).has_value());
  EXPECT_FALSE(t.get("p100", "B", 1).has_value());
  EXPECT_EQ(t.gpu_types(), (std::vector<std::string>{"k80", "v100"}));
  EXPECT_EQ(t.job_types(), (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(t.scale_factors("v100", "B"), (std::vector<int>{1, 2}));
  EXPECT_TRUE(t.scale_factors("v100", "A").empty());
}

TEST(ThroughputGavel, SimulationThroughputs) {
  const std::string path = shared_data("gavel/simulation_throughputs.json");
  const ThroughputTable t = load_gavel_throughputs(path);
  EXPECT_EQ(t.source, path);
  EXPECT_EQ(t.gpu_types(),
            (std::vector<std::string>{"k80", "k80_unconsolidated", "p100", "p100_unconsolidated",
                                      "v100", "v100_unconsolidated"}));
  // 83 job keys per worker type, 77 for k80_unconsolidated (SOURCES.md).
  EXPECT_EQ(t.size(), 5u * 83 + 77);
  EXPECT_EQ(t.job_types().size(), 26u);
  // Figures read from the file by hand.
  EXPECT_DOUBLE_EQ(*t.get("k80", "ResNet-18 (batch size 16)", 1), 4.795294551566172);
  EXPECT_DOUBLE_EQ(*t.get("v100", "ResNet-50 (batch size 64)", 1), 4.394774823323071);
  EXPECT_DOUBLE_EQ(*t.get("v100", "ResNet-50 (batch size 64)", 8), 17.303172756892167);
  EXPECT_EQ(t.scale_factors("v100", "ResNet-50 (batch size 64)"), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(t.scale_factors("v100", "A3C"), (std::vector<int>{1}));
  EXPECT_EQ(t.scale_factors("k80_unconsolidated", "ResNet-50 (batch size 64)"),
            (std::vector<int>{1}));
  // Zero isolated throughput (cannot run) is kept as measured.
  EXPECT_EQ(t.get("k80", "ResNet-50 (batch size 128)", 2), 0.0);
  // Co-location pair entries are not job keys.
  EXPECT_FALSE(t.get("v100", "null", 1).has_value());
}

TEST(ThroughputGavel, PhysicalClusterThroughputs) {
  const ThroughputTable t =
      load_gavel_throughputs(shared_data("gavel/physical_cluster_throughputs.json"));
  EXPECT_EQ(t.size(), 5u * 83 + 77);
}

TEST(ThroughputGavel, TupleKeysWithEitherQuoteAndEscapes) {
  TempDir dir;
  const std::string path = dir.write(
      "t.json",
      R"json({"v100": {"(\"O'Brien (batch size 8)\", 2)": {"null": 1.5},
                   "('A, B (c)', 16)": {"null": 2, "('A, B (c)', 16)": [1, 1]},
                   "( 'It\\'s' ,1 )": {"null": 3}}})json");
  const ThroughputTable t = load_gavel_throughputs(path);
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.get("v100", "O'Brien (batch size 8)", 2), 1.5);
  EXPECT_EQ(t.get("v100", "A, B (c)", 16), 2.0);
  EXPECT_EQ(t.get("v100", "It's", 1), 3.0);
}

TEST(ThroughputGavel, ErrorsNameFileAndLine) {
  TempDir dir;
  struct Case {
    const char* text;
    long line;
    const char* needle;
  } cases[] = {
      {"{\n  \"v100\": {\n    \"('A', 1)\": {\"null\": 1.0,}\n  }\n}\n", 3, "invalid JSON"},
      {"{\n  \"v100\": {\n    \"('A', 1)\": {\"null\": 1.0}\n  }\n  \"k80\": {}\n}\n", 5,
       "invalid JSON"},
      {"{\n  \"v100\": {\n    \"('A', 1)\": {\"null\": 1.0},\n    \"A\": {\"null\": 2.0}\n  }\n}\n",
       4, "bad job key 'A'"},
      {"{\n  \"v100\": {\n    \"('A', 0)\": {\"null\": 1.0}\n  }\n}\n", 3, "bad job key"},
      {"{\n  \"v100\": {\n    \"('A', 1)\": {\"other\": 1.0}\n  }\n}\n", 3, "no isolated"},
      {"{\n  \"v100\": {\n    \"('A', 1)\": {\"null\": -1.0}\n  }\n}\n", 3, "non-negative"},
      {"{\n  \"v100\": {\n    \"('A', 1)\": {\"null\": \"fast\"}\n  }\n}\n", 3, "non-negative"},
      {"{\n  \"v100\": [1, 2]\n}\n", 2, "must map to an object"},
      {"[1, 2]\n", 1, "expected an object"},
      // Issue 13: nlohmann keeps the last of two equal keys; the reader names both lines.
      {"{\n  \"v100\": {\n    \"('A', 1)\": {\"null\": 1.0},\n    \"('A', 1)\": {\"null\": 2.0}\n  }\n}\n", 4,
       "duplicate key '('A', 1)' (first on line 3)"},
      {"{\n  \"v100\": {\"('A', 1)\": {\"null\": 1.0}},\n  \"k80\": {},\n  \"v100\": {}\n}\n", 4,
       "duplicate key 'v100' (first on line 2)"},
      {"{\"v100\": {\"('A', 1)\": {\"null\": 1.0,\n  \"null\": 3.0}}}\n", 2, "duplicate key 'null' (first on line 1)"},
      // The same key spelled with an escape, and the same tuple spelled another way.
      {"{\"v100\": {\n\"('A', 1)\": {\"null\": 1.0},\n\"('\\u0041', 1)\": {\"null\": 2.0}}}\n", 3,
       "duplicate key '('A', 1)' (first on line 2)"},
      {"{\"v100\": {\n\"(\\\"A\\\", 1)\": {\"null\": 1.0},\n\"('A',1)\": {\"null\": 2.0}}}\n", 3,
       "names the same job type and scale factor as '(\"A\", 1)' (first on line 2)"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = dir.write("e" + std::to_string(i++) + ".json", c.text);
    const std::string msg = input_error([&] { load_gavel_throughputs(path); });
    const std::string prefix = path + ":" + std::to_string(c.line) + ": ";
    EXPECT_TRUE(testing::starts_with(msg, prefix))
        << "case:\n" << c.text << "message: " << msg << "\nexpected prefix: " << prefix;
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
  }
  EXPECT_INPUT_ERROR_PREFIX(load_gavel_throughputs(dir.path("missing.json")),
                            dir.path("missing.json") + ": cannot open");
  const std::string empty = dir.write("empty.json", "{}");
  EXPECT_INPUT_ERROR_PREFIX(load_gavel_throughputs(empty), empty + ": ");
  // A number too large for a double is nlohmann's out_of_range, not a parse error (fuzz_schedule found it there).
  const std::string huge = dir.write("huge.json", "{\"v100\": {\"('A', 1)\": {\"null\": 1e999}}}");
  EXPECT_INPUT_ERROR_PREFIX(load_gavel_throughputs(huge), huge + ": invalid JSON");
  // nlohmann stops at a NUL byte; the duplicate-key walk went on past it and
  // threw nlohmann's parse_error on a bad escape there (fuzz_throughputs).
  static const char kNul[] = "{\"v100\": {}}\n\0\n{\"('A', 1)\\q\": {\"null\": 1.0}}\n";
  const std::string nul = dir.write("nul.json", std::string(kNul, sizeof kNul - 1));
  EXPECT_INPUT_ERROR_PREFIX(load_gavel_throughputs(nul), nul + ":2: invalid JSON: a NUL byte");
}

TEST(ThroughputGavel, SplitJobType) {
  using P = std::pair<std::string, int>;
  EXPECT_EQ(split_job_type("ResNet-50 (batch size 64)"), (P{"ResNet-50", 64}));
  EXPECT_EQ(split_job_type("Recommendation (batch size 8192)"), (P{"Recommendation", 8192}));
  EXPECT_EQ(split_job_type("LM (batch size 5)"), (P{"LM", 5}));
  EXPECT_EQ(split_job_type("A3C"), (P{"A3C", 0}));
  EXPECT_EQ(split_job_type("CycleGAN"), (P{"CycleGAN", 0}));
  EXPECT_EQ(split_job_type("Foo (batch size x)"), (P{"Foo (batch size x)", 0}));
  EXPECT_EQ(split_job_type("Foo (batch size 0)"), (P{"Foo (batch size 0)", 0}));
  EXPECT_EQ(split_job_type(""), (P{"", 0}));
}

}  // namespace
}  // namespace cellsched
