#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.h"
#include "core/gpu.h"
#include "core_test_util.h"

namespace cellsched {
namespace {

TEST(GpuCatalogue, HasEveryRequiredType) {
  for (const char* name : {"k80", "p100", "v100", "v100-32", "t4", "a10", "a40", "l4", "l40s",
                           "a100-40", "a100-80", "h100", "h200", "cpu"}) {
    const GpuSpec* g = find_gpu(name);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_EQ(g->name, name);
  }
}

TEST(GpuCatalogue, NamesUniqueLowerCaseAndSelfLookup) {
  std::set<std::string> names;
  for (const auto& g : gpu_catalogue()) {
    EXPECT_TRUE(names.insert(g.name).second) << "duplicate " << g.name;
    for (char c : g.name) EXPECT_FALSE(c >= 'A' && c <= 'Z') << g.name;
    // No alias of another type shadows a canonical name.
    EXPECT_EQ(find_gpu(g.name), &g) << g.name;
    EXPECT_FALSE(g.description.empty());
  }
}

TEST(GpuCatalogue, FiguresArePlausibleAndOldestFirst) {
  int last_year = 0;
  for (const auto& g : gpu_catalogue()) {
    EXPECT_GT(g.fp32_tflops, 0) << g.name;
    EXPECT_GE(g.fp16_tflops, g.fp32_tflops) << g.name;
    EXPECT_GT(g.memory_gib, 0) << g.name;
    EXPECT_GT(g.memory_gbps, 0) << g.name;
    EXPECT_GE(g.nvlink_gbps, 0) << g.name;
    EXPECT_GT(g.pcie_gbps, 0) << g.name;
    if (g.name == "cpu") continue;  // the nominal CPU host sits at the end
    EXPECT_GE(g.year, last_year) << g.name << " is out of order";
    last_year = g.year;
  }
  EXPECT_EQ(gpu_catalogue().back().name, "cpu");
}

TEST(GpuCatalogue, PublishedFigures) {
  const GpuSpec* v100 = find_gpu("v100");
  ASSERT_TRUE(v100);
  EXPECT_DOUBLE_EQ(v100->memory_gib, 15.78);  // nvidia-smi: 16160 MiB
  EXPECT_DOUBLE_EQ(v100->fp32_tflops, 15.7);
  EXPECT_DOUBLE_EQ(v100->fp16_tflops, 125);
  EXPECT_DOUBLE_EQ(v100->memory_gbps, 900);
  EXPECT_FALSE(v100->bf16);
  EXPECT_DOUBLE_EQ(find_gpu("v100-32")->memory_gib, 31.75);
  EXPECT_DOUBLE_EQ(find_gpu("a100-40")->memory_gbps, 1555);
  EXPECT_DOUBLE_EQ(find_gpu("a100-80")->memory_gbps, 2039);
  EXPECT_DOUBLE_EQ(find_gpu("a100-80")->fp16_tflops, 312);
  EXPECT_TRUE(find_gpu("a100-80")->bf16);
  EXPECT_DOUBLE_EQ(find_gpu("h100")->nvlink_gbps, 450);
  EXPECT_TRUE(find_gpu("h100")->bf16);
  EXPECT_DOUBLE_EQ(find_gpu("h200")->memory_gbps, 4800);
  EXPECT_GT(find_gpu("h200")->memory_gib, find_gpu("h100")->memory_gib);
  EXPECT_DOUBLE_EQ(find_gpu("t4")->nvlink_gbps, 0);
  EXPECT_DOUBLE_EQ(find_gpu("k80")->memory_gib, 11.17);
  // What CUDA can allocate, not the datasheet's "24 GB" read as GiB.
  EXPECT_DOUBLE_EQ(find_gpu("a10")->memory_gib, 22.49);
  EXPECT_DOUBLE_EQ(find_gpu("a40")->memory_gib, 44.99);
  EXPECT_DOUBLE_EQ(find_gpu("t4")->memory_gib, 15);
  EXPECT_EQ(find_gpu("a40")->nvlink_peers, 2);  // a bridge joins two boards
  EXPECT_EQ(find_gpu("a100-80")->nvlink_peers, 0);  // NVSwitch: the whole host
}

TEST(GpuCatalogue, CudaCoreFp16IsTheDatasheetsRatioOfFp32) {
  // Packed half2: 2x FP32 on Volta, Turing and Hopper, 4x on GA100, 1x on
  // GA10x and Ada; never above the tensor cores, never below FP32 but on the
  // K80, which has no fast FP16 at all.
  const auto ratio = [](const char* n) { return find_gpu(n)->cuda_fp16_tflops / find_gpu(n)->fp32_tflops; };
  EXPECT_DOUBLE_EQ(ratio("v100"), 2);
  EXPECT_NEAR(ratio("t4"), 2, 1e-9);
  EXPECT_NEAR(ratio("h100"), 2, 0.01);
  EXPECT_DOUBLE_EQ(ratio("a100-80"), 4);
  EXPECT_DOUBLE_EQ(ratio("a40"), 1);
  EXPECT_DOUBLE_EQ(ratio("l4"), 1);
  for (const GpuSpec& g : gpu_catalogue()) {
    EXPECT_GT(g.cuda_fp16_tflops, 0) << g.name;
    EXPECT_LE(g.cuda_fp16_tflops, g.fp16_tflops) << g.name;
    if (g.name != "k80") {
      EXPECT_GE(g.cuda_fp16_tflops, g.fp32_tflops) << g.name;
    }
  }
  // Newer generations are faster.
  EXPECT_LT(find_gpu("k80")->fp32_tflops, find_gpu("p100")->fp32_tflops);
  EXPECT_LT(find_gpu("p100")->fp32_tflops, find_gpu("v100")->fp32_tflops);
  EXPECT_LT(find_gpu("a100-40")->fp16_tflops, find_gpu("h100")->fp16_tflops);
}

TEST(GpuCatalogue, AliasesAreCaseInsensitive) {
  auto canon = [](const char* n) {
    const GpuSpec* g = find_gpu(n);
    return g ? g->name : std::string("<none>");
  };
  EXPECT_EQ(canon("V100"), "v100");
  EXPECT_EQ(canon("v100-16"), "v100");
  EXPECT_EQ(canon("V100M32"), "v100-32");
  EXPECT_EQ(canon("v100m32"), "v100-32");
  EXPECT_EQ(canon("A100"), "a100-40");
  EXPECT_EQ(canon("a100_80"), "a100-80");
  EXPECT_EQ(canon("h100-sxm"), "h100");
  EXPECT_EQ(canon("a100_80g"), "a100-80");  // "80g" as well as "80gb" (it was unknown)
  EXPECT_EQ(canon("V100-32G"), "v100-32");
  EXPECT_EQ(canon("H100-SXM"), "h100");
  EXPECT_EQ(canon("NVIDIA A100"), "a100-40");
  EXPECT_EQ(canon("  T4 "), "t4");
  EXPECT_EQ(canon("P100"), "p100");
  EXPECT_EQ(canon("L40S"), "l40s");
  EXPECT_EQ(find_gpu(""), nullptr);
  EXPECT_EQ(find_gpu("x100"), nullptr);
  EXPECT_EQ(find_gpu("k80_unconsolidated"), nullptr);
}

TEST(GpuCatalogue, CanonicalNameThrowsListingKnownTypes) {
  EXPECT_EQ(canonical_gpu_name("V100M32"), "v100-32");
  const std::string msg = testing::input_error([] { canonical_gpu_name("x100"); });
  EXPECT_NE(msg.find("unknown GPU type 'x100'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("k80, p100, v100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("h200"), std::string::npos) << msg;
}

}  // namespace
}  // namespace cellsched
