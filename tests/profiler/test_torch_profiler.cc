// Real measurements on the CPU with LibTorch (tiny models) and Gloo between
// two real processes on loopback, checked for sanity.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/model.h"
#include "profiler/comm.h"
#include "profiler/compute.h"

namespace cellsched::profiler {
namespace {

ProfileRun profile(const std::string& name, std::vector<int> mbs, std::vector<int> tps, int reps = 5) {
  ComputeOptions o;
  o.micro_batches = std::move(mbs);
  o.tp_degrees = std::move(tps);
  o.repetitions = reps;
  o.warmup = 1;
  o.threads = 1;  // fixed: CI has two cores shared with ctest -j 2
  auto backend = make_compute_backend(o);
  ModelSpec m = load_model(name);
  return profile_compute(*backend, m, o);
}

const LayerProfile& find(const ProfileRun& r, const std::string& kind_prefix, int tp, int mb) {
  for (const auto& l : r.layers)
    if (l.shape_key.rfind(kind_prefix, 0) == 0 && l.tp_degree == tp && l.micro_batch == mb) return l;
  throw std::runtime_error("no record " + kind_prefix);
}

TEST(TorchCompute, GptTinyIsPositiveAndBackwardCostsMoreThanForward) {
  const ProfileRun r = profile("gpt-tiny", {1, 16}, {1, 2});
  EXPECT_EQ(r.timer, "steady_clock");
  EXPECT_EQ(r.threads, 1);
  EXPECT_EQ(r.device_type, "cpu");
  EXPECT_FALSE(r.versions.at("libtorch").empty());
  EXPECT_EQ(r.layers.size(), 3u * 2 * 2);  // 3 shapes x tp {1,2} x mb {1,16}
  for (const auto& l : r.layers) {
    EXPECT_GT(l.fwd_ms, 0) << l.layer_name;
    EXPECT_GT(l.bwd_ms, 0) << l.layer_name;
    EXPECT_GE(l.fwd_spread_ms, 0);
    EXPECT_EQ(l.repetitions, 5);
  }
  const auto& block = find(r, "decoder", 1, 16);
  EXPECT_GT(block.bwd_ms, block.fwd_ms);
  // Sixteen sequences cost more than one.
  EXPECT_GT(block.fwd_ms + block.bwd_ms, find(r, "decoder", 1, 1).fwd_ms + find(r, "decoder", 1, 1).bwd_ms);
}

TEST(TorchCompute, MoeAndWideResNetRun) {
  const ProfileRun moe = profile("moe-tiny", {2}, {1}, 2);
  EXPECT_EQ(moe.layers.size(), 4u);
  const ProfileRun wrn = profile("wrn-tiny", {2}, {1, 2}, 2);
  EXPECT_EQ(wrn.layers.size(), 5u);  // stem, 3 first blocks, head; no tp shards
  for (const auto& l : wrn.layers) EXPECT_GT(l.fwd_ms + l.bwd_ms, 0);
}

// Gavel's LM (LSTM layers) and Recommendation (dense layers) as real LibTorch
// modules: every distinct layer shape is timed.
TEST(TorchCompute, GavelLstmAndAutoencoderRun) {
  const ProfileRun lm = profile("lm", {1}, {1}, 1);
  EXPECT_EQ(lm.layers.size(), 3u);  // embedding, one LSTM shape, head
  const ProfileRun rec = profile("recommendation", {4}, {1}, 1);
  EXPECT_EQ(rec.layers.size(), 2u);  // encoder, head
  for (const ProfileRun* r : {&lm, &rec})
    for (const auto& l : r->layers) EXPECT_GT(l.fwd_ms + l.bwd_ms, 0) << l.layer_name;
}

// CycleGAN's generator and discriminator layers as real LibTorch modules (a
// 16 x 16 CycleGAN of one residual block): every distinct shape is timed,
// each on 3 images per sample.
TEST(TorchCompute, CycleGanLayersRun) {
  const ProfileRun r = profile(std::string(CELLSCHED_TEST_DATA) + "/cyclegan_tiny.yaml", {1}, {1}, 1);
  EXPECT_EQ(r.layers.size(), 7u + 5u);  // both generators share 7 shapes, both discriminators 5
  for (const auto& l : r.layers) EXPECT_GT(l.fwd_ms + l.bwd_ms, 0) << l.layer_name;
}

TEST(TorchCompute, TorchScriptSequenceIsProfiledLayerByLayer) {
  ComputeOptions o;
  o.micro_batches = {4};
  o.tp_degrees = {1};
  o.repetitions = 2;
  o.threads = 1;
  auto backend = make_compute_backend(o);
  ModelSpec m = load_model(std::string(CELLSCHED_TEST_DATA) + "/tiny_sequential.pt");
  m.input_shape = {16};
  const ProfileRun r = profile_compute(*backend, m, o);
  ASSERT_EQ(m.layers.size(), 7u);
  EXPECT_EQ(m.layers[0].params, 16 * 32 + 32);
  EXPECT_EQ(m.layers[1].shape_key, m.layers[3].shape_key);  // ReLU on 32 features
  EXPECT_EQ(r.layers.size(), 4u);  // Linear 16->32, ReLU, Linear 32->32, Linear 32->8
  ModelSpec no_shape = load_model(std::string(CELLSCHED_TEST_DATA) + "/tiny_sequential.pt");
  EXPECT_THROW(profile_compute(*backend, no_shape, o), InputError);
  ModelSpec wrong = no_shape;
  wrong.input_shape = {5};
  EXPECT_THROW(profile_compute(*backend, wrong, o), InputError);
}

TEST(GlooComm, TwoRealProcessesOnLoopback) {
  CommOptions o;
  o.backend = "gloo";
  o.ranks = 2;
  // 4 KiB against 32 MiB: a small message on loopback can take a few ms when
  // the 2 cores are busy (seen on CI); 32 MiB takes tens of ms.
  o.sizes = {4096, 32 << 20};
  o.repetitions = 9;
  o.worker_command = {CELLSCHED_BINARY, "profile", "comm-worker"};
  o.timeout_s = 120;
  const ProfileRun r = profile_comm(o);
  EXPECT_EQ(r.kind, "comm");
  EXPECT_EQ(r.device_type, "cpu");
  ASSERT_EQ(r.comms.size(), 5u * 2);
  for (size_t i = 0; i < r.comms.size(); i += 2) {
    const CommProfile& small = r.comms[i];
    const CommProfile& big = r.comms[i + 1];
    EXPECT_EQ(small.collective, big.collective);
    EXPECT_GT(small.time_us, 0) << small.collective;
    EXPECT_GT(big.time_us, small.time_us) << big.collective;  // 8192x the bytes
    EXPECT_EQ(big.devices_per_host, 2);
    EXPECT_NEAR(big.busbw_gbps, big.algbw_gbps * busbw_factor(big.collective, 2), 1e-12);
    EXPECT_NEAR(big.algbw_gbps, big.bytes / (big.time_us * 1e3), 1e-9);
  }
}

}  // namespace
}  // namespace cellsched::profiler
