// The analytic cost model (basis `modeled`): rooflines per op class and
// precision by hand, the GEMM efficiency curve, bases, overlap of the gradient
// all-reduce with backward and memory by precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/gpu.h"
#include "estimator/estimator.h"
#include "estimator/opcost.h"
#include "tests/estimator/estimator_fixture.h"

namespace cellsched::estimator {
namespace {

using cellsched::testing::toy_comm;
using cellsched::testing::toy_compute;
using cellsched::testing::toy_model;

const GpuSpec& gpu(const char* name) { return *find_gpu(name); }

TEST(Catalogue, PeaksPerPrecision) {
  const GpuSpec& a100 = gpu("a100-80");
  EXPECT_DOUBLE_EQ(matmul_peak_tflops(a100, Precision::FP32), 19.5);
  EXPECT_DOUBLE_EQ(matmul_peak_tflops(a100, Precision::TF32), 156);
  EXPECT_DOUBLE_EQ(matmul_peak_tflops(a100, Precision::BF16), 312);
  EXPECT_DOUBLE_EQ(gpu("a40").fp32_tflops, 18.7);  // not the dual-issue 37.4
  EXPECT_DOUBLE_EQ(gpu("a10").fp32_tflops, 15.6);
  EXPECT_EQ(default_precision(a100), Precision::BF16);
  EXPECT_EQ(default_precision(gpu("v100")), Precision::FP16);
  EXPECT_EQ(default_precision(gpu("k80")), Precision::FP32);
  EXPECT_EQ(default_precision(gpu("p100")), Precision::FP32);  // packed fp16 (2x) is not a tensor core
  EXPECT_FALSE(gpu("p100").tensor_cores());
  EXPECT_TRUE(gpu("t4").tensor_cores());
  EXPECT_EQ(default_precision(gpu("cpu")), Precision::FP32);
  EXPECT_THROW(resolve_precision(Precision::BF16, gpu("v100")), InputError);
  EXPECT_THROW(resolve_precision(Precision::TF32, gpu("v100")), InputError);
  EXPECT_THROW(resolve_precision(Precision::FP16, gpu("cpu")), InputError);
  EXPECT_EQ(parse_precision("AMP"), Precision::FP16);
  EXPECT_THROW(parse_precision("fp8"), InputError);
}

TEST(OpCost, GemmRooflineByHand) {
  const GpuSpec& a100 = gpu("a100-80");
  Op op;
  op.cls = OpClass::Gemm;
  op.m = op.n = op.k = 8192;
  op.flops = 2 * 8192.0 * 8192 * 8192;
  op.bytes = 3 * 8192.0 * 8192 * 2;
  // 256x128 tiles: 32 x 64 = 2048 tiles in ceil(2048 / 108) = 19 waves of 108 SMs.
  const double shape = 2048.0 / (19 * 108) * 8192 / (8192 + 32);
  const Efficiency& e = efficiency_of(a100);
  EXPECT_NEAR(gemm_efficiency(a100, Precision::BF16, 8192, 8192, 8192), e.gemm_tensor * shape, 1e-12);
  EXPECT_NEAR(op_time_ms(a100, Precision::BF16, op, false), op.flops / (312e12 * e.gemm_tensor * shape) * 1e3, 1e-9);
  EXPECT_NEAR(op_time_ms(a100, Precision::BF16, op, true), 2 * op.flops / (312e12 * e.gemm_tensor * shape) * 1e3,
              1e-9);
  EXPECT_NEAR(op_time_ms(a100, Precision::TF32, op, false), op.flops / (156e12 * e.gemm_tensor * kTf32Share * shape) * 1e3,
              1e-9);
  EXPECT_NEAR(op_time_ms(a100, Precision::FP32, op, false), op.flops / (19.5e12 * e.gemm_fp32 * shape) * 1e3, 1e-9);
  // A convolution of the same implicit-GEMM shape pays the conv factor.
  op.cls = OpClass::Conv;
  EXPECT_NEAR(op_time_ms(a100, Precision::BF16, op, false),
              op.flops / (312e12 * e.gemm_tensor * shape * e.conv) * 1e3, 1e-9);
}

TEST(OpCost, MemoryBoundClassesByHand) {
  const GpuSpec& v100 = gpu("v100");
  const Efficiency& e = efficiency_of(v100);
  for (OpClass c : {OpClass::Elementwise, OpClass::Embedding, OpClass::Loss}) {
    Op op;
    op.cls = c;
    op.bytes = 1e9;
    EXPECT_NEAR(op_time_ms(v100, Precision::FP16, op, false), 1e9 / (900e9 * e.memory) * 1e3, 1e-9)
        << op_class_name(c);
    EXPECT_NEAR(op_time_ms(v100, Precision::FP32, op, true), 1.6e9 / (900e9 * e.memory) * 1e3, 1e-9);
  }
  // A skinny product is memory-bound: attention scores at k = 64 in fp16 move more than they compute.
  Op att;
  att.cls = OpClass::Attention;
  att.m = att.n = 1024;
  att.k = 64;
  att.batch = 96;
  att.flops = 2 * 1024.0 * 1024 * 64 * 96;
  att.bytes = (1024.0 * 64 * 2 + 1024.0 * 1024) * 96 * 2;
  const double compute = att.flops / (125e12 * gemm_efficiency(v100, Precision::FP16, 1024, 1024, 64, 96)) * 1e3;
  const double memory = att.bytes / (900e9 * e.memory) * 1e3;
  EXPECT_NEAR(op_time_ms(v100, Precision::FP16, att, false), std::max(compute, memory), 1e-9);
  // The optimizer streams its bytes, or costs one launch per 8 tensors when tiny.
  EXPECT_NEAR(optimizer_step_ms(v100, 1e9, 16, 100), 16e9 / (900e9 * e.memory) * 1e3, 1e-9);
  EXPECT_NEAR(optimizer_step_ms(v100, 10, 16, 100), 13 * e.issue_us / 1e3, 1e-12);
}

TEST(OpCost, GemmEfficiencyGrowsWithSize) {
  for (const GpuSpec& g : gpu_catalogue()) {
    for (Precision p : {Precision::FP32, Precision::FP16}) {
      double prev = 0;
      for (double n = 32; n <= 16384; n *= 2) {
        const double e = gemm_efficiency(g, p, n, n, n);
        EXPECT_GE(e, prev) << g.name << " n=" << n;
        EXPECT_LE(e, 1.0);
        prev = e;
      }
      EXPECT_GT(prev, 0.4) << g.name;  // big GEMMs near the generation's best
    }
    // Token counts (m) of a GPT layer: more tokens never lower the efficiency.
    double prev = 0;
    for (double m = 128; m <= 65536; m *= 2) {
      const double e = gemm_efficiency(g, Precision::FP16, m, 3072, 768);
      EXPECT_GE(e, prev) << g.name << " m=" << m;
      prev = e;
    }
  }
}

TEST(OpCost, SplitKFillsTheGpuWhenALongReductionHasFewOutputTiles) {
  // Gavel's recommendation encoder: a 512 x 200 output over k = 20,108 items.
  // Its 16 tiles of 128 x 64 would fill a tenth of the V100's 160 slots; cut
  // into 9 slices of the reduction (slices of at least 2,048), 144 tiles do.
  const GpuSpec v100 = gpu("v100");
  const Efficiency& e = efficiency_of(v100);
  const double slice = 20108.0 / 9;
  const double want = e.gemm_fp32 * 0.88 * (200.0 / 256) * (144.0 / 160) * slice / (slice + 32);
  EXPECT_NEAR(gemm_efficiency(v100, Precision::FP32, 512, 200, 20108), want, 1e-12);
  // A reduction too short to cut keeps the unsplit tiles (16 of 160 slots).
  EXPECT_NEAR(gemm_efficiency(v100, Precision::FP32, 512, 200, 2000),
              e.gemm_fp32 * 0.88 * (200.0 / 256) * (16.0 / 160) * 2000 / 2032, 1e-12);
  // Outputs that fill the GPU are not split: a longer k only shrinks the short-k penalty.
  EXPECT_NEAR(gemm_efficiency(v100, Precision::FP32, 4096, 4096, 65536) / (65536.0 / (65536 + 32)),
              gemm_efficiency(v100, Precision::FP32, 4096, 4096, 4096) / (4096.0 / (4096 + 32)), 1e-12);
}

TEST(OpCost, LayerOpsCarryTheLayersFlops) {
  for (const char* name : {"gpt-125m", "moe-350m-8e", "resnet-50", "resnet-18", "wrn-28-10"}) {
    const ModelSpec m = model_by_name(name);
    for (const LayerSpec& l : m.layers) {
      // The embedding's position add and the image head's pooling are memory-bound passes.
      if (l.kind == "embedding" || (l.kind == "head" && l.in_channels > 0)) continue;
      double f = 0;
      for (const Op& op : layer_ops(m, l, 2, 1)) f += op.flops;
      EXPECT_NEAR(f, 2 * l.flops_per_sample, 0.02 * 2 * l.flops_per_sample + 1) << name << " " << l.name;
    }
  }
}

TEST(CostModel, BasisFollowsTheProfile) {
  const auto comm = toy_comm("v100");
  const CostModel measured(toy_model(), "v100", toy_compute("v100"), &comm);
  EXPECT_EQ(measured.basis(), Basis::Measured);
  const CostModel transferred(toy_model(), "a100-80", toy_compute("v100"), nullptr);
  EXPECT_EQ(transferred.basis(), Basis::Transferred);
  const CostModel modeled_a100(toy_model(), "a100-80", nullptr, nullptr);
  const CostModel modeled_v100(toy_model(), "v100", nullptr, nullptr);
  // Transferred: the V100 measurement x the analytic model's A100 / V100 ratio.
  // (At 65536 samples the toy layer is compute-bound; the profile's line gives 65536 ms.)
  const double mb = 65536;
  const double ratio = modeled_a100.layer_time(0, 1, mb).fwd_ms / modeled_v100.layer_time(0, 1, mb).fwd_ms;
  EXPECT_NEAR(transferred.layer_time(0, 1, mb).fwd_ms, mb * ratio, 1e-6 * mb);
  EXPECT_LT(ratio, 1.0);
  EXPECT_EQ(std::string(basis_name(transferred.basis())), "transferred");
  EXPECT_EQ(std::string(basis_name(modeled_a100.basis())), "modeled");
}

TEST(CostModel, GradientSyncOverlapsBackward) {
  Options o;
  o.bucket_mb = 25;
  const CostModel cm(toy_model(), "v100", nullptr, nullptr, o);
  // Ring over 2 ranks on NVLink (150 GB/s, 5 us per step): 100 MB take 10 us + 666.67 us;
  // the last 25 MB bucket 10 us + 166.67 us.
  const double whole = (10 + 100e6 / 150e3) / 1000, last = (10 + 25e6 / 150e3) / 1000;
  EXPECT_NEAR(cm.grad_sync_ms(2, false, 100e6, 0.3), whole - 0.3, 1e-12);
  EXPECT_NEAR(cm.grad_sync_ms(2, false, 100e6, 10), last, 1e-12);
  EXPECT_NEAR(cm.grad_sync_ms(2, false, 10e6, 10), (10 + 10e6 / 150e3) / 1000, 1e-12);  // one bucket
  o.overlap_grad_sync = false;
  const CostModel serial(toy_model(), "v100", nullptr, nullptr, o);
  EXPECT_NEAR(serial.grad_sync_ms(2, false, 100e6, 10), whole, 1e-12);
  // In an estimate: the sync shown is the exposed part, the total is kept.
  Cell cell{"toy", "v100", 1, 2, 1};
  Plan p;
  p.micro_batch_size = 2;
  p.stages = {{0, 4, 2, 1}};
  const Estimate e = estimate(cm, cell, p);
  EXPECT_LE(e.stages[0].grad_sync_ms, e.stages[0].grad_sync_total_ms);
}

TEST(CostModel, PrecisionChangesMemory) {
  // Unfused attention at both precisions, so activations differ by value size only.
  ModelSpec m = model_by_name("gpt-125m");
  m.attention = Attention::Unfused;
  Options fp32;
  fp32.precision = Precision::FP32;
  const CostModel full(m, "a100-80", nullptr, nullptr, fp32);
  const CostModel mixed(m, "a100-80", nullptr, nullptr);  // bf16 by default
  EXPECT_EQ(mixed.precision(), Precision::BF16);
  EXPECT_EQ(full.precision(), Precision::FP32);
  Cell cell{"gpt-125m", "a100-80", 1, 1, 1};
  Plan p;
  p.micro_batch_size = 4;
  p.stages = {{0, m.layers.size() > 0 ? static_cast<int>(m.layers.size()) : 0, 1, 1}};
  const Estimate a = estimate(full, cell, p), b = estimate(mixed, cell, p);
  const double params = m.total_params();
  EXPECT_NEAR(a.stages[0].params_bytes, 4 * params, 1);
  EXPECT_NEAR(b.stages[0].params_bytes, 2 * params, 1);
  EXPECT_NEAR(a.stages[0].optimizer_bytes, 8 * params, 1);   // Adam moments
  EXPECT_NEAR(b.stages[0].optimizer_bytes, 12 * params, 1);  // + fp32 master weights
  // Half the fp32 activations, plus what autocast keeps in fp32 (4 - 2 bytes
  // more per value): two layer-norm inputs per block and the log-probabilities
  // saved, and the logits' transient pair (twice the largest activation) held
  // at 4 bytes, per sample of the micro-batch; the token ids (8 bytes each)
  // keep their size.
  const double s = m.seq, h = m.hidden, v = m.vocab, mb = 4;
  const double autocast = mb * (m.num_layers * 2 * s * h * 2 + s * v * 2 + 2 * s * v * 4 / 2 + s * 8 / 2);
  EXPECT_NEAR(b.stages[0].activation_bytes, a.stages[0].activation_bytes / 2 + autocast, 1);
  EXPECT_LT(b.iteration_ms, a.iteration_ms / 3);  // tensor cores
  Options tf32;
  tf32.precision = Precision::TF32;
  const CostModel t(m, "a100-80", nullptr, nullptr, tf32);
  const Estimate c = estimate(t, cell, p);
  EXPECT_LT(c.iteration_ms, a.iteration_ms);
  EXPECT_GT(c.iteration_ms, b.iteration_ms);
  EXPECT_NEAR(c.memory_bytes, a.memory_bytes, 1);
  tf32.precision = Precision::TF32;
  EXPECT_THROW(CostModel(m, "v100", nullptr, nullptr, tf32), InputError);
}

TEST(CostModel, GpuTypesRankAsPublishedForGptMixedPrecision) {
  const ModelSpec m = model_by_name("gpt-350m");
  auto rate = [&](const char* type) {
    const CostModel cm(m, type, nullptr, nullptr);
    Cell cell{m.name, type, 1, 1, 1};
    Plan p;
    p.micro_batch_size = 8;
    p.stages = {{0, static_cast<int>(m.layers.size()), 1, 1}};
    return estimate(cm, cell, p).samples_per_s;
  };
  const double a100 = rate("a100-80"), a40 = rate("a40"), v100 = rate("v100"), a10 = rate("a10");
  EXPECT_GT(a100, 1.6 * a40);
  EXPECT_GT(a100, 1.6 * v100);
  EXPECT_NEAR(a40 / v100, 1.0, 0.35);
  EXPECT_GT(v100, a10);
  EXPECT_GT(a40, a10);
}

// An LSTM layer runs its recurrent product once per step, in sequence: its
// kernels grow with the sequence, and its FLOPs are the layer's.
TEST(OpCost, LstmStepsInSequence) {
  const ModelSpec lm = model_by_name("lm");
  const auto ops = layer_ops(lm, lm.layers[1], 20, 1);
  double flops = 0;
  int kernels = 0;
  for (const Op& o : ops) {
    flops += o.cls == OpClass::Gemm ? o.flops : 0;
    kernels += o.kernels;
  }
  EXPECT_NEAR(flops, lm.layers[1].flops_per_sample * 20, 1e-6 * flops);
  EXPECT_GE(kernels, 2 * lm.seq);
  // Twice the batch is less than twice the time: the per-step products are small.
  auto ms = [&](double mb) {
    double t = 0;
    for (const Op& o : layer_ops(lm, lm.layers[1], mb, 1)) t += op_time_ms(gpu("v100"), Precision::FP32, o, false);
    return t;
  };
  EXPECT_LT(ms(40), 2 * ms(20));
  const ModelSpec rec = model_by_name("recommendation");
  double rf = 0;
  for (const Op& o : layer_ops(rec, rec.layers[0], 512, 1)) rf += o.flops;
  EXPECT_NEAR(rf, rec.layers[0].flops_per_sample * 512, 1e-6 * rf);
}

// Winograd: an fp32 3x3 stride-1 convolution runs e.winograd times faster on
// Maxwell and newer; strided, 1x1 and 16-bit convolutions and the K80 do not.
TEST(OpCost, WinogradSpeedsUpFp32ThreeByThreeConvolutions) {
  const ModelSpec r18 = model_by_name("resnet-18");
  const LayerSpec* strided = nullptr;
  for (const LayerSpec& l : r18.layers)
    if (l.kind == "residual_block" && l.stride == 2) strided = &l;
  ASSERT_NE(strided, nullptr);
  const auto ops = layer_ops(r18, *strided, 64, 1);
  std::vector<const Op*> convs;
  for (const Op& o : ops)
    if (o.cls == OpClass::Conv) convs.push_back(&o);
  ASSERT_EQ(convs.size(), 3u);  // 3x3 stride 2, 3x3 stride 1, 1x1 projection
  EXPECT_FALSE(convs[0]->winograd);
  EXPECT_TRUE(convs[1]->winograd);
  EXPECT_FALSE(convs[2]->winograd);
  const GpuSpec& v100 = gpu("v100");
  const Efficiency& e = efficiency_of(v100);
  EXPECT_GT(e.winograd, 1.0);
  const Op& w = *convs[1];
  const double shape = gemm_efficiency(v100, Precision::FP32, w.m, w.n, w.k, w.batch);
  EXPECT_NEAR(op_time_ms(v100, Precision::FP32, w, false),
              w.flops / (15.7e12 * shape * e.conv * e.winograd) * 1e3, 1e-9);
  Op plain = w;
  plain.winograd = false;
  EXPECT_NEAR(op_time_ms(v100, Precision::FP32, w, true) * e.winograd,
              op_time_ms(v100, Precision::FP32, plain, true), 1e-9);
  // Tensor cores run the implicit GEMM; the K80 has no Winograd speedup.
  EXPECT_DOUBLE_EQ(op_time_ms(v100, Precision::FP16, w, false), op_time_ms(v100, Precision::FP16, plain, false));
  EXPECT_DOUBLE_EQ(efficiency_of(gpu("k80")).winograd, 1.0);
  EXPECT_DOUBLE_EQ(op_time_ms(gpu("k80"), Precision::FP32, w, false),
                   op_time_ms(gpu("k80"), Precision::FP32, plain, false));
}

// CycleGAN's layers: the convolutions carry each layer's FLOPs (3 images per
// sample), and Winograd applies to the stride-1 3x3 ones only (residual
// blocks and the convolutions after upsampling).
TEST(OpCost, CycleGanLayersCarryTheirFlops) {
  const ModelSpec m = model_by_name("cyclegan");
  for (const LayerSpec& l : m.layers) {
    double flops = 0;
    int winograd = 0, convs = 0;
    for (const Op& o : layer_ops(m, l, 2, 1)) {
      if (o.cls != OpClass::Conv) continue;
      flops += o.flops;
      ++convs;
      winograd += o.winograd;
    }
    EXPECT_NEAR(flops, 2 * l.flops_per_sample, 1e-9 * flops) << l.name;
    const bool wants = l.kind == "gan_residual" || l.kind == "gan_up";
    EXPECT_EQ(winograd, wants ? convs : 0) << l.name;
  }
}

// A Kepler SMX has 192 FP32 lanes, three times a Pascal SM's: a product too
// small to fill the GPU gets a third of the share per tile, so an LSTM step
// (20 x 800 x 200) is no faster on the K80 than on the newer P100 and V100.
TEST(OpCost, KeplerSmxNeedsThreeTimesTheTiles) {
  const GpuSpec& k80 = gpu("k80");
  EXPECT_DOUBLE_EQ(efficiency_of(k80).sm_width, 3.0);
  EXPECT_DOUBLE_EQ(efficiency_of(gpu("p100")).sm_width, 1.0);
  // The best tile is 128 x 64: its 13 tiles fill 13 of 13 SMX x 2 x 3 slots
  // (a third of the 13 x 2 a 64-lane SM would count).
  const double small = gemm_efficiency(k80, Precision::FP32, 20, 800, 200);
  EXPECT_NEAR(small,
              efficiency_of(k80).gemm_fp32 * 0.88 * (20.0 * 800 / (128 * 832)) * (13.0 / (13 * 2 * 3)) * 200 / 232,
              1e-12);
  // A product with many waves is not affected.
  EXPECT_GT(gemm_efficiency(k80, Precision::FP32, 8192, 8192, 8192), 0.9 * efficiency_of(k80).gemm_fp32);
  Op step;
  step.cls = OpClass::Gemm;
  step.m = 20;
  step.n = 800;
  step.k = 200;
  step.flops = 2 * 20.0 * 800 * 200;
  const double k80_ms = op_time_ms(k80, Precision::FP32, step, false);
  EXPECT_GT(k80_ms, op_time_ms(gpu("p100"), Precision::FP32, step, false));
  EXPECT_GT(op_time_ms(gpu("p100"), Precision::FP32, step, false), op_time_ms(gpu("v100"), Precision::FP32, step, false));
}

// Mixed precision as torch.autocast runs it: the residual stream, layer norms
// and the loss are fp32, the GEMM inputs 16-bit casts (docs/estimator.md).
TEST(OpCost, MixedPrecisionKeepsTheResidualStreamFp32) {
  const ModelSpec half = with_precision(model_by_name("gpt-125m"), Precision::BF16);
  const ModelSpec full = with_precision(model_by_name("gpt-125m"), Precision::FP32);
  const double s = half.seq, h = half.hidden, v = half.vocab;
  const auto hb = layer_ops(half, half.layers[1], 1, 1), fb = layer_ops(full, full.layers[1], 1, 1);
  // Layer norm: read and write fp32, then the cast to bf16 (two kernels), against read + write.
  EXPECT_DOUBLE_EQ(hb.front().bytes, s * h * (3 * 4 + 2));
  EXPECT_EQ(hb.front().kernels, 2);
  EXPECT_DOUBLE_EQ(fb.front().bytes, s * h * 2 * 4);
  // Dropout + residual add (the last op): bf16 branch, fp32 stream.
  EXPECT_DOUBLE_EQ(hb.back().bytes, s * h * (3 * 2 + 2 * 4));
  EXPECT_DOUBLE_EQ(fb.back().bytes, s * h * 5 * 4);
  // The loss reads bf16 logits through an fp32 copy.
  const auto hh = layer_ops(half, half.layers.back(), 1, 1), fh = layer_ops(full, full.layers.back(), 1, 1);
  EXPECT_EQ(hh.back().cls, OpClass::Loss);
  EXPECT_DOUBLE_EQ(hh.back().bytes, s * v * (2 + 8 + 2 + 4));
  EXPECT_DOUBLE_EQ(fh.back().bytes, s * v * (4 + 8));
  // The embedding table is fp32 under autocast: the gather moves what fp32 does.
  EXPECT_DOUBLE_EQ(layer_ops(half, half.layers[0], 1, 1)[0].bytes, layer_ops(full, full.layers[0], 1, 1)[0].bytes);
  // The GEMMs stay 16-bit: the QKV product moves half of fp32's bytes.
  EXPECT_DOUBLE_EQ(hb[1].bytes * 2, fb[1].bytes);
}

// Precision changes keep autocast's fp32 bytes exact: a round trip through
// fp32 gives back the bf16 layers, and a model built at 16 bits (YAML
// `precision: bf16`) equals the zoo's converted one.
TEST(CostModel, AutocastBytesSurviveRoundTrips) {
  const ModelSpec bf16 = with_precision(model_by_name("gpt-125m"), Precision::BF16);
  const ModelSpec back = with_precision(with_precision(bf16, Precision::FP32), Precision::BF16);
  ASSERT_EQ(back.layers.size(), bf16.layers.size());
  for (size_t i = 0; i < bf16.layers.size(); ++i) {
    EXPECT_DOUBLE_EQ(back.layers[i].saved_bytes_per_sample, bf16.layers[i].saved_bytes_per_sample) << i;
    EXPECT_DOUBLE_EQ(back.layers[i].activation_bytes_per_sample, bf16.layers[i].activation_bytes_per_sample) << i;
  }
  const double s = bf16.seq, h = bf16.hidden, v = bf16.vocab;
  EXPECT_DOUBLE_EQ(bf16.layers.back().activation_bytes_per_sample, s * v * 4);  // fp32 log-probabilities
  EXPECT_DOUBLE_EQ(bf16.layers.back().saved_bytes_per_sample, s * h * 2 + s * v * 4);
  const ModelSpec fp32 = with_precision(bf16, Precision::FP32);
  EXPECT_DOUBLE_EQ(fp32.layers.back().saved_bytes_per_sample, s * h * 4 + s * v * 4);
  // Built at 16 bits from YAML: the same bytes as the zoo's model converted.
  const auto yaml = std::filesystem::temp_directory_path() /
                    ("cellsched_autocast_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".yaml");
  std::ofstream(yaml) << "family: gpt\nhidden: 768\nnum_layers: 12\nheads: 12\nseq: 1024\nvocab: 50257\nprecision: bf16\n";
  const ModelSpec built = load_model(yaml.string());
  std::filesystem::remove(yaml);
  ASSERT_EQ(built.layers.size(), bf16.layers.size());
  for (size_t i = 0; i < bf16.layers.size(); ++i)
    EXPECT_DOUBLE_EQ(built.layers[i].saved_bytes_per_sample, bf16.layers[i].saved_bytes_per_sample) << i;
  // CNNs have no such bytes: half precision halves them.
  const ModelSpec r = model_by_name("resnet-50");
  EXPECT_DOUBLE_EQ(with_precision(r, Precision::BF16).layers[3].saved_bytes_per_sample,
                   r.layers[3].saved_bytes_per_sample / 2);
}

// Fused attention: chosen for transformers on Volta and newer, at any
// precision (and as the model asks otherwise); one kernel with both products'
// FLOPs, no score matrix in memory (fewer saved bytes), faster than unfused at
// long sequences.
TEST(OpCost, FusedAttentionWhereFlashRuns) {
  ModelSpec m = with_precision(model_by_name("gpt-125m"), Precision::BF16);
  EXPECT_TRUE(fused_attention(m, gpu("a100-80")));
  EXPECT_TRUE(fused_attention(m, gpu("h100")));
  EXPECT_TRUE(fused_attention(m, gpu("v100")));   // the memory-efficient kernel
  EXPECT_FALSE(fused_attention(m, gpu("p100")));  // no tensor cores
  EXPECT_FALSE(fused_attention(m, gpu("k80")));
  // fp32 too: SDPA's memory-efficient kernel takes it (it ran for h100.csv's fp32 rows).
  EXPECT_TRUE(fused_attention(with_precision(model_by_name("gpt-125m"), Precision::FP32), gpu("a100-80")));
  EXPECT_FALSE(fused_attention(with_precision(model_by_name("gpt-125m"), Precision::FP32), gpu("p100")));
  // Gavel's Transformer is written with unfused attention, at any precision.
  EXPECT_FALSE(fused_attention(with_precision(model_by_name("transformer"), Precision::FP16), gpu("v100")));
  EXPECT_FALSE(fused_attention(model_by_name("resnet-50"), gpu("a100-80")));
  m.attention = Attention::Unfused;
  EXPECT_FALSE(fused_attention(m, gpu("a100-80")));
  m.attention = Attention::Fused;
  EXPECT_TRUE(fused_attention(m, gpu("p100")));

  const ModelSpec plain = with_precision(model_by_name("gpt-125m"), Precision::BF16);
  const ModelSpec fused = with_attention(plain, true);
  const LayerSpec& block = plain.layers[1];
  const double s = plain.seq, a = plain.heads;
  EXPECT_NEAR(block.saved_bytes_per_sample - fused.layers[1].saved_bytes_per_sample, 5 * a * s * s * 2 / 2 - a * s * 4,
              1e-6 * block.saved_bytes_per_sample);
  EXPECT_EQ(plain.layers[0].saved_bytes_per_sample, fused.layers[0].saved_bytes_per_sample);  // embedding
  EXPECT_NEAR(with_attention(fused, false).layers[1].saved_bytes_per_sample, block.saved_bytes_per_sample, 1e-6);

  auto attention_flops = [](const std::vector<Op>& ops) {
    double f = 0;
    for (const Op& o : ops) f += o.cls == OpClass::Attention ? o.flops : 0;
    return f;
  };
  const auto u = layer_ops(plain, block, 4, 1), f = layer_ops(fused, fused.layers[1], 4, 1);
  EXPECT_NEAR(attention_flops(u), attention_flops(f), 1e-6 * attention_flops(u));
  EXPECT_EQ(std::count_if(f.begin(), f.end(), [](const Op& o) { return o.fused; }), 1);
  EXPECT_LT(f.size(), u.size());
  // The fused op by hand on the A100 in bf16: 4 s^2 d per head and sample at
  // 0.72 x 0.8 of 312 TFLOP/s; backward 2.5x.
  const Op& fa = *std::find_if(f.begin(), f.end(), [](const Op& o) { return o.fused; });
  const double d = plain.hidden / a, flops = 4 * s * s * d * a * 4;
  EXPECT_NEAR(fa.flops, flops, 1e-6 * flops);
  const double want_ms = flops / (312e12 * 0.72 * kFusedAttentionShare) * 1e3;
  EXPECT_NEAR(op_time_ms(gpu("a100-80"), Precision::BF16, fa, false), want_ms, 1e-9);
  EXPECT_NEAR(op_time_ms(gpu("a100-80"), Precision::BF16, fa, true), kFusedAttentionBackward * want_ms, 1e-9);
  // The whole layer at sequence 1024 is faster fused.
  auto layer_ms = [](const ModelSpec& mm) {
    double t = 0;
    for (const Op& o : layer_ops(mm, mm.layers[1], 4, 1))
      t += op_time_ms(gpu("a100-80"), Precision::BF16, o, false) + op_time_ms(gpu("a100-80"), Precision::BF16, o, true);
    return t;
  };
  EXPECT_LT(layer_ms(fused), layer_ms(plain));
}

TEST(OpCost, UnalignedSixteenBitGemmsRunOnSlowerKernels) {
  // GPT-2's 50,257-word logits: n is not a multiple of 8 values, so a 16-bit
  // GEMM reaches kUnalignedShare of the aligned one's efficiency. 50,264 (a
  // multiple of 8) does not; FP32 and TF32 products and convolutions never do.
  const GpuSpec& h100 = gpu("h100");
  const auto gemm_ms = [&](OpClass cls, double n, Precision p) {
    Op op;
    op.cls = cls;
    op.m = 8192;
    op.n = n;
    op.k = 1024;
    op.flops = 2 * op.m * op.n * op.k;
    return op_time_ms(h100, p, op, false);
  };
  const double aligned = gemm_ms(OpClass::Gemm, 50264, Precision::BF16) * 50257 / 50264;
  const double eff_ratio = gemm_efficiency(h100, Precision::BF16, 8192, 50257, 1024) /
                           gemm_efficiency(h100, Precision::BF16, 8192, 50264, 1024);
  EXPECT_NEAR(gemm_ms(OpClass::Gemm, 50257, Precision::BF16), aligned / eff_ratio / kUnalignedShare, 1e-9);
  EXPECT_NEAR(gemm_ms(OpClass::Gemm, 50257, Precision::FP16), gemm_ms(OpClass::Gemm, 50257, Precision::BF16), 1e-12);
  for (Precision p : {Precision::FP32, Precision::TF32}) {
    const double r = gemm_efficiency(h100, p, 8192, 50257, 1024) / gemm_efficiency(h100, p, 8192, 50264, 1024);
    EXPECT_NEAR(gemm_ms(OpClass::Gemm, 50257, p), gemm_ms(OpClass::Gemm, 50264, p) * 50257 / 50264 / r, 1e-9);
  }
  const double conv_r = gemm_efficiency(h100, Precision::BF16, 8192, 50257, 1024) /
                        gemm_efficiency(h100, Precision::BF16, 8192, 50264, 1024);
  EXPECT_NEAR(gemm_ms(OpClass::Conv, 50257, Precision::BF16),
              gemm_ms(OpClass::Conv, 50264, Precision::BF16) * 50257 / 50264 / conv_r, 1e-9);
  Op k_odd;
  k_odd.m = 64, k_odd.n = 64, k_odd.k = 147;
  EXPECT_TRUE(unaligned_16bit(h100, Precision::BF16, k_odd));
  EXPECT_FALSE(unaligned_16bit(gpu("p100"), Precision::FP16, k_odd));  // no tensor cores
  k_odd.k = 144;
  EXPECT_FALSE(unaligned_16bit(h100, Precision::BF16, k_odd));
  // m (the tokens or samples) is no leading dimension: an odd batch is aligned.
  Op m_odd;
  m_odd.m = 5, m_odd.n = 800, m_odd.k = 200;
  EXPECT_FALSE(unaligned_16bit(h100, Precision::BF16, m_odd));
  m_odd.n = 801;
  EXPECT_TRUE(unaligned_16bit(h100, Precision::BF16, m_odd));
}

// An unaligned 16-bit GEMM is never priced below the CUDA cores' own 16-bit
// rate: 0.22 of a V100's tensor cores put it under its CUDA cores and under a
// P100 (Gavel's Recommendation, 20,108 items, ran slower on the V100).
TEST(OpCost, UnalignedGemmsNeverFallBelowTheCudaCores) {
  Op op;
  op.cls = OpClass::Gemm;
  op.m = 4096;
  op.n = 20108;
  op.k = 512;
  op.flops = 2 * op.m * op.n * op.k;
  const double v100 = op_time_ms(gpu("v100"), Precision::FP16, op, false);
  EXPECT_LT(v100, op_time_ms(gpu("p100"), Precision::FP16, op, false));
  const double cuda_cores = op.flops / (gpu("v100").cuda_fp16_tflops * 1e12 *
                                        gemm_efficiency(gpu("v100"), Precision::FP32, op.m, op.n, op.k)) * 1000;
  EXPECT_NEAR(v100, cuda_cores, 1e-9);
  EXPECT_DOUBLE_EQ(gpu("v100").cuda_fp16_tflops, 2 * gpu("v100").fp32_tflops);
}

TEST(CostModel, NotesNameTheUnalignedGemm) {
  // The estimate says which layer pays for an unaligned size, so that a user
  // can pad it; a vocabulary padded to a multiple of 8 draws no such note.
  const auto notes_of = [](int vocab, int tp) {
    const std::filesystem::path yaml =
        std::filesystem::temp_directory_path() / ("cellsched-vocab-" + std::to_string(vocab) + ".yaml");
    std::ofstream(yaml) << "family: gpt\nhidden: 768\nnum_layers: 12\nheads: 16\nseq: 1024\nvocab: " << vocab << "\n";
    const ModelSpec m = load_model(yaml.string());
    std::filesystem::remove(yaml);
    const CostModel cm(m, "h100", nullptr, nullptr);
    Plan p;
    p.micro_batch_size = 8;
    p.stages = {{0, cm.num_layers(), 1, tp}};
    std::string all;
    for (const std::string& n : estimate(cm, Cell{m.name, "h100", 1, tp, 1}, p).notes) all += n + "\n";
    return all;
  };
  EXPECT_NE(notes_of(50257, 1).find("head: a 16-bit GEMM size (50257) is not a multiple of 8"), std::string::npos);
  EXPECT_EQ(notes_of(50304, 1).find("not a multiple of 8"), std::string::npos);
  // Tensor parallelism: a shard of 50,257 rows is not a size of its own (before,
  // each degree the tuner tried gave a note with a fractional size, 12564.2).
  const std::string tp4 = notes_of(50257, 4);
  EXPECT_NE(tp4.find("head: a 16-bit GEMM size (50257) is not a multiple of 8"), std::string::npos) << tp4;
  EXPECT_EQ(tp4.find("12564"), std::string::npos) << tp4;
  // 50,264 is a multiple of 8, but its shards over 8 ranks (6,283 rows) are not.
  EXPECT_EQ(notes_of(50264, 1).find("not a multiple of 8"), std::string::npos);
  EXPECT_NE(notes_of(50264, 8).find("head: a 16-bit GEMM size (6283 per shard at tensor parallelism 8)"),
            std::string::npos)
      << notes_of(50264, 8);
}

TEST(OpCost, TensorParallelVocabularyShardsAreWholeRows) {
  // Each rank holds ceil(vocab / tp) rows of the output embedding.
  ModelSpec m;
  m.family = "gpt";
  m.hidden = 768;
  m.seq = 1024;
  m.vocab = 50257;
  m.bytes_per_value = 2;
  LayerSpec head;
  head.kind = "head";
  head.tensor_parallel = true;
  double n = 0;
  for (const Op& op : layer_ops(m, head, 2, 4))
    if (op.cls == OpClass::Gemm) n = op.n;
  EXPECT_EQ(n, 12565);
}

TEST(CostModel, OptimizerTrafficFollowsItsImplementation) {
  // PyTorch's default optimizers make one pass per line of the update over fp32
  // tensors (autocast keeps the weights fp32); a fused Adam reads and writes
  // each tensor once. Priced at the V100's 900 GB/s x its memory efficiency.
  const ModelSpec m = model_by_name("gpt-125m");
  const double params = 1e9, bw = 900e9 * efficiency_of(gpu("v100")).memory;
  const auto step_ms = [&](const char* optimizer, Precision p) {
    Options o;
    o.optimizer = optimizer;
    o.precision = p;
    return CostModel(m, "v100", nullptr, nullptr, o).optimizer_ms(params);
  };
  EXPECT_NEAR(step_ms("adam", Precision::FP16), params * 76 / bw * 1e3, 1e-9);
  EXPECT_NEAR(step_ms("adam", Precision::FP32), params * 76 / bw * 1e3, 1e-9);
  EXPECT_NEAR(step_ms("adam-fused", Precision::FP32), params * 28 / bw * 1e3, 1e-9);
  EXPECT_NEAR(step_ms("adam-fused", Precision::FP16), params * (3 * 2 + 2 * 12) / bw * 1e3, 1e-9);
  EXPECT_NEAR(step_ms("sgd-momentum", Precision::FP32), params * 32 / bw * 1e3, 1e-9);
  EXPECT_NEAR(step_ms("sgd", Precision::FP16), params * 12 / bw * 1e3, 1e-9);
  Options bad;
  bad.optimizer = "lamb";
  EXPECT_THROW(CostModel(m, "v100", nullptr, nullptr, bad), InputError);
  // Gradients accumulate in fp32 under mixed precision: read both, write the sum.
  Options half;
  half.precision = Precision::FP16;
  EXPECT_NEAR(CostModel(m, "v100", nullptr, nullptr, half).accumulate_ms(params, 1, 2),
              params * 12 / bw * 1e3 / 2, 1e-9);
}

TEST(CostModel, AutocastCastsEachWeightTwicePerMicroBatch) {
  // A 16-bit decoder layer pays its ops plus 6 bytes per weight each way (fp32
  // weight to 16 bits in forward, the 16-bit gradient back in backward); the
  // embedding's table is not cast. Kernel issue does not bind at this size.
  const ModelSpec m = model_by_name("gpt-350m");
  const CostModel cm(m, "a100-80", nullptr, nullptr);  // bf16 by default
  const GpuSpec& g = gpu("a100-80");
  const double mb = 8;
  const auto ops_ms = [&](size_t layer, bool backward) {
    double t = 0, kernels = 0;
    for (const Op& op : layer_ops(cm.model(), cm.model().layers[layer], mb, 1)) {
      t += op_time_ms(g, Precision::BF16, op, backward);
      kernels += op.kernels;
    }
    return t + kernels * 2e-3 * (backward ? kBackwardFactor : 1);
  };
  size_t decoder = 0;
  while (cm.model().layers[decoder].kind != "decoder") ++decoder;
  const double cast = cm.model().layers[decoder].params * 6 / (g.memory_gbps * 1e9 * efficiency_of(g).memory) * 1e3;
  const double gap = layer_param_tensors(cm.model().layers[decoder]) * 2e-3;
  EXPECT_NEAR(cm.layer_time(static_cast<int>(decoder), 1, mb).fwd_ms, ops_ms(decoder, false) + cast + gap, 1e-9);
  EXPECT_NEAR(cm.layer_time(static_cast<int>(decoder), 1, mb).bwd_ms,
              ops_ms(decoder, true) + cast + kBackwardFactor * gap, 1e-9);
  ASSERT_EQ(cm.model().layers[0].kind, "embedding");
  EXPECT_NEAR(cm.layer_time(0, 1, mb).fwd_ms, ops_ms(0, false), 1e-9);
}

}  // namespace
}  // namespace cellsched::estimator
