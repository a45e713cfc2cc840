// The analytic model zoo and the nccl-tests bus-bandwidth factors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "core/error.h"
#include "core/model.h"
#include "core/profile.h"

namespace cellsched {
namespace {

std::set<std::string> shapes(const ModelSpec& m) {
  std::set<std::string> s;
  for (const auto& l : m.layers) s.insert(l.shape_key);
  return s;
}

TEST(Model, ZooHasTheGptSizesAndTheOtherFamilies) {
  const auto names = zoo_names();
  for (const char* n : {"gpt-125m", "gpt-350m", "gpt-760m", "gpt-1.3b", "gpt-2.7b", "gpt-6.7b",
                        "gpt-13b", "gpt-tiny", "moe-tiny", "wrn-28-10", "wrn-50-2"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

// The other job types of Gavel's measured table, with parameter counts by
// hand: LM (PyTorch's word-language-model, untied): embedding 33,278 x 200,
// two LSTM layers of 8 h^2 + 8 h, decoder 200 x 33,278 + bias;
// Recommendation: 20,108 -> 200 -> 20,108 with biases.
TEST(Model, GavelTableModels) {
  const ModelSpec lm = model_by_name("lm");
  EXPECT_EQ(lm.family, "lstm");
  ASSERT_EQ(lm.layers.size(), 4u);
  EXPECT_EQ(lm.layers[1].kind, "lstm");
  EXPECT_DOUBLE_EQ(lm.total_params(), 33278.0 * 200 + 2 * (8.0 * 200 * 200 + 8 * 200) + 200.0 * 33278 + 33278);
  const ModelSpec rec = model_by_name("recommendation");
  EXPECT_EQ(rec.family, "autoencoder");
  ASSERT_EQ(rec.layers.size(), 2u);
  EXPECT_EQ(rec.layers[1].kind, "dense_head");
  EXPECT_DOUBLE_EQ(rec.total_params(), 20108.0 * 200 + 200 + 200.0 * 20108 + 20108);
  const ModelSpec tr = model_by_name("transformer");
  EXPECT_EQ(tr.family, "gpt");
  EXPECT_EQ(tr.num_layers, 14);
  EXPECT_EQ(tr.hidden, 512);
}

// CycleGAN as Gavel runs it (PyTorch-GAN, 256 x 256, 9 residual blocks):
// parameters by hand, convolution biases included and instance norm without
// affine weights: 11,378,179 per generator, 2,764,737 per discriminator.
TEST(Model, CycleGanAsGavelRunsIt) {
  const ModelSpec m = model_by_name("cyclegan");
  EXPECT_EQ(m.family, "cyclegan");
  ASSERT_EQ(m.layers.size(), 2u * (3 + 9 + 3) + 2u * 5);
  double g = 0, d = 0;
  for (const LayerSpec& l : m.layers) {
    if (l.name.rfind("g_ab.", 0) == 0) g += l.params;
    if (l.name.rfind("d_a.", 0) == 0) d += l.params;
    EXPECT_EQ(l.passes, 3) << l.name;  // translate, cycle back, identity; judge 3 images
  }
  EXPECT_DOUBLE_EQ(g, 11378179);
  EXPECT_DOUBLE_EQ(d, 2764737);
  EXPECT_DOUBLE_EQ(m.total_params(), 2 * (11378179.0 + 2764737));
  // A residual block: two 3x3 convolutions of 256 channels at 64 x 64, 3 images.
  const LayerSpec& res = m.layers[3];
  EXPECT_EQ(res.kind, "gan_residual");
  EXPECT_DOUBLE_EQ(res.flops_per_sample, 3 * 2 * 2.0 * 256 * 256 * 9 * 64 * 64);
  // The discriminators end at 16 x 16 patches.
  EXPECT_EQ(m.layers.back().kind, "gan_disc_out");
  EXPECT_EQ(m.layers.back().spatial, 16);
}

TEST(Model, GptParameterCountsMatchTheirNames) {
  // Name -> expected total parameters (embedding + blocks + head, untied head).
  const std::vector<std::pair<std::string, double>> cases = {
      {"gpt-125m", 125e6}, {"gpt-350m", 350e6}, {"gpt-760m", 760e6}, {"gpt-1.3b", 1.3e9},
      {"gpt-2.7b", 2.7e9}, {"gpt-6.7b", 6.7e9}, {"gpt-13b", 13e9}};
  for (const auto& [name, want] : cases) {
    const ModelSpec m = model_by_name(name);
    // The head's untied vocabulary projection adds up to ~40M on small models.
    EXPECT_NEAR(m.total_params() / want, 1.0, 0.35) << name << ": " << m.total_params();
  }
  const ModelSpec m = model_by_name("gpt-350m");
  EXPECT_EQ(m.layers.size(), 26u);  // embedding, 24 blocks, head
  EXPECT_EQ(shapes(m).size(), 3u);  // every block the same shape: profiled once
  EXPECT_DOUBLE_EQ(m.layers[1].params, 12.0 * 1024 * 1024 + 13 * 1024);
  EXPECT_DOUBLE_EQ(m.layers[1].flops_per_sample, 24.0 * 1024 * 1024 * 1024 + 4.0 * 1024 * 1024 * 1024);
  EXPECT_TRUE(m.layers[1].tensor_parallel);
}

TEST(Model, MoeAlternatesDenseAndExpertBlocks) {
  const ModelSpec m = model_by_name("moe-tiny");
  EXPECT_EQ(m.layers[1].kind, "decoder");
  EXPECT_EQ(m.layers[2].kind, "moe_decoder");
  EXPECT_EQ(shapes(m).size(), 4u);
  EXPECT_GT(m.layers[2].params, 2.5 * m.layers[1].params);  // 4 experts
}

TEST(Model, WideResNetSizes) {
  // WRN-28-10: 36.5M parameters (Zagoruyko & Komodakis); WRN-50-2: 68.9M.
  EXPECT_NEAR(model_by_name("wrn-28-10").total_params() / 36.5e6, 1.0, 0.03);
  EXPECT_NEAR(model_by_name("wrn-50-2").total_params() / 68.9e6, 1.0, 0.03);
  const ModelSpec m = model_by_name("wrn-28-10");
  EXPECT_EQ(m.layers.size(), 1u + 12 + 1);
  EXPECT_EQ(shapes(m).size(), 1u + 6 + 1);  // first block of each group differs
}

TEST(Model, UnknownNameListsTheZoo) {
  try {
    model_by_name("gpt-9000");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gpt-350m"), std::string::npos);
  }
}

class ModelYaml : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() / ("cellsched-model-" + std::to_string(getpid()) + ".yaml");
    std::ofstream(path_) << text;
    return path_.string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
};

TEST_F(ModelYaml, LoadsAGptDescription) {
  const ModelSpec m = load_model(write("family: gpt\nname: mine\nhidden: 128\nnum_layers: 3\nheads: 4\nseq: 64\nvocab: 1000\n"));
  EXPECT_EQ(m.name, "mine");
  EXPECT_EQ(m.layers.size(), 5u);
  EXPECT_EQ(m.attention, Attention::Auto);
  const ModelSpec f = load_model(write("family: gpt\nhidden: 128\nnum_layers: 3\nheads: 4\nseq: 64\nvocab: 1000\n"
                                       "attention: fused\n"));
  EXPECT_EQ(f.attention, Attention::Fused);
  EXPECT_FALSE(f.fused_attention);  // layers are built unfused; the estimator resizes them
}

TEST_F(ModelYaml, BadInputNamesFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // A rule between fields names the line of the one it is about, not the map's.
      {"family: gpt\nhidden: 100\nnum_layers: 2\nheads: 3\nseq: 8\nvocab: 10\n", ":4: "},  // 100 % 3
      {"family: gpt\nhidden: 128\nnum_layers: 2\nheads: 0\nseq: 8\nvocab: 10\nname: gpt\n", ":4: gpt: 'heads' must be positive"},
      {"family: gpt\nhidden: 128\nnum_layers: 2\nheads: 4\nvocab: 10\nname: gpt\n", ":1: gpt: missing field 'seq'"},
      {"family: moe\nhidden: 128\nnum_layers: 2\nheads: 4\nseq: 8\nvocab: 10\nexperts: 2\ntop_k: 3\nname: moe\n", ":8: moe: top_k must be at most experts"},
      {"family: wrn\ndepth: 12\nwidth_factor: 2\nimage: 32\nclasses: 10\nname: wrn\n", ":2: wrn: CIFAR WRN depth"},
      {"family: gpt\nhidden: x\n", ":2:"},
      {"family: gpt\nbogus: 1\n", ":2:"},
      {"name: x\nfamily: rnn\n", ":2: unknown family 'rnn'"},
      {"hidden: 64\n", "missing field 'family'"},
      {"family: [gpt\n", ":"},
      {"family: gpt\nattention: flash2\n", ":2: attention must be auto, fused or unfused"},
      // Sizes past any real model (the profiler used to die allocating; a huge num_layers hung the reader).
      {"family: gpt\nhidden: 2000000\n", ":2: 'hidden' must be at most 65536, got 2000000"},
      {"family: gpt\nnum_layers: 00000000000000000000000000000000000000388369800\n", ":2: 'num_layers' must be at most 1024"},
      {"family: cyclegan\nname: cyclegan\nimage: 100\nnum_layers: 9\nhidden: 64\n", ":3: cyclegan: image must be a positive multiple of 16"},
      {"family: cyclegan\nname: cyclegan\nimage: 64\nhidden: 64\n", ":1: cyclegan: missing field 'num_layers'"},
  };
  for (const auto& [text, want] : cases) {
    const std::string p = write(text);
    try {
      load_model(p);
      ADD_FAILURE() << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << text << " -> " << e.what();
    }
  }
}

TEST(BusBw, FactorsMatchNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor("all_reduce", 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor("all_reduce", 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor("all_gather", 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor("reduce_scatter", 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor("all_to_all", 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor("send_recv", 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor("broadcast", 8), 1.0);
}

}  // namespace
}  // namespace cellsched
