// The estimator's formulas on hand-computed cases, interpolation and
// extrapolation, memory feasibility and errors on bad cells and plans.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/gpu.h"
#include "estimator/estimator.h"
#include "estimator/interpolate.h"
#include "tests/estimator/estimator_fixture.h"

namespace cellsched::estimator {
namespace {

using cellsched::testing::toy_comm;
using cellsched::testing::toy_compute;
using cellsched::testing::toy_model;

Options sgd() {
  Options o;
  o.optimizer = "sgd";
  return o;
}

TEST(Curve, InterpolatesBetweenPointsAndFitsBeyond) {
  const Curve c({{4, 5}, {1, 2}, {2, 3}});
  EXPECT_DOUBLE_EQ(c(1), 2);
  EXPECT_DOUBLE_EQ(c(3), 4);   // between (2,3) and (4,5)
  EXPECT_DOUBLE_EQ(c(1.5), 2.5);
  EXPECT_NEAR(c.alpha(), 1, 1e-12);  // least squares of y = 1 + x
  EXPECT_NEAR(c.beta(), 1, 1e-12);
  EXPECT_NEAR(c(8), 9, 1e-12);        // alpha-beta beyond the range
  EXPECT_NEAR(c(0.5), 1.5, 1e-12);
}

TEST(Curve, NonLinearDataUsesTheFitOutsideOnly) {
  const Curve c({{1, 1}, {2, 2}, {3, 6}});  // fit: y = -2 + 2.5 x
  EXPECT_DOUBLE_EQ(c(2.5), 4);
  EXPECT_NEAR(c(4), 8, 1e-12);
  EXPECT_DOUBLE_EQ(c(0.1), 0);  // never negative
}

TEST(Curve, SinglePointScalesProportionally) {
  const Curve c({{2, 3}});
  EXPECT_DOUBLE_EQ(c(2), 3);
  EXPECT_DOUBLE_EQ(c(4), 6);
  const Curve dup({{2, 3}, {2, 5}});  // equal x averaged
  EXPECT_DOUBLE_EQ(dup(2), 4);
}

// The toy model's 4 layers as 2 stages of 2, one process each on a 2-process
// host, 4 micro-batches of 2.
Cell two_process_host() { return Cell{"toy", "cpu", 1, 2, 2}; }
Plan two_stages_of_two_layers() {
  Plan p;
  p.micro_batches = 4;
  p.micro_batch_size = 2;
  p.stages = {{0, 2, 1, 1}, {2, 2, 1, 1}};
  return p;
}

TEST(Estimator, TwoStagePipelineByHand) {
  const auto compute = toy_compute();
  const auto comm = toy_comm();
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  const Cell cell = two_process_host();
  const Plan p = two_stages_of_two_layers();
  const Estimate e = estimate(cm, cell, p);
  ASSERT_TRUE(e.feasible);
  EXPECT_EQ(e.basis, Basis::Measured);
  // s_j = 2 layers x (2 + 4) ms = 12, plus the gradient adds of micro-batches
  // 2..4 spread over the 4: 2000 params x 12 B / 200 GB/s x 3/4 = 9e-5 ms;
  // 1F1B: s x 3 + 2 s.
  EXPECT_DOUBLE_EQ(e.stages[0].fwd_ms, 4);
  EXPECT_DOUBLE_EQ(e.stages[0].bwd_ms, 8);
  EXPECT_NEAR(e.stages[0].accumulate_ms, 9e-5, 1e-15);
  EXPECT_NEAR(e.pipeline_compute_ms, 60 + 5 * 9e-5, 1e-12);
  // Activations of 2 x 100 B: send_recv(200 B) = 5 + 45 x 100/900 = 10 us a
  // hand-off, all of it transfer (the curve's fit: 0.05 us/B, no latency).
  // On the critical path: the first micro-batch's activations into stage 1
  // (10), the last one's gradients back (10), and the transfer of the other
  // B - 1 (3 x 10).
  EXPECT_NEAR(e.stages[0].send_ms, 0.010, 1e-12);
  EXPECT_NEAR(e.stages[0].send_transfer_ms, 0.010, 1e-12);
  EXPECT_DOUBLE_EQ(e.stages[1].send_ms, 0);
  EXPECT_NEAR(e.pipeline_comm_ms, 0.010 * 3 + 0.010 + 0.010, 1e-12);
  // SGD step: 2000 params x 12 B / 200 GB/s (catalogue cpu) = 1.2e-4 ms.
  EXPECT_NEAR(e.sync_ms, 1.2e-4, 1e-12);
  EXPECT_NEAR(e.iteration_ms, 60.05012 + 5 * 9e-5, 1e-9);
  EXPECT_NEAR(e.samples_per_s, 8 / (0.06005012 + 5 * 9e-8), 1e-6);
  // Memory: 8000 B weights + 8000 grads + saved 2 layers x 200 B x 2 samples x in-flight
  // (stage 0 holds min(B, S) = 2, stage 1 holds 1) + 2 x the largest activation (200 B).
  EXPECT_DOUBLE_EQ(e.stages[0].memory_bytes, 8000 + 8000 + 1600 + 400);
  EXPECT_DOUBLE_EQ(e.stages[1].memory_bytes, 8000 + 8000 + 800 + 400);
  EXPECT_DOUBLE_EQ(e.memory_bytes, 18000);
}

// A hand-off's latency delays a pipeline once (fill and drain), not once per
// micro-batch: sends are posted without waiting.
TEST(Estimator, PipelineHandOffLatencyIsPaidOnceNotPerMicroBatch) {
  const auto compute = toy_compute();
  ProfileRun comm = toy_comm();
  for (CommProfile& c : comm.comms)
    if (c.collective == "send_recv") c.time_us += 995;  // 1000 us at 100 B, 1045 at 1000 B
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  const Cell cell = two_process_host();
  const Plan p = two_stages_of_two_layers();
  const Estimate e = estimate(cm, cell, p);
  // 200 B: 1000 + 45 x 100/900 = 1005 us whole; the fit's slope 0.05 us/B
  // x 200 B = 10 us of it transfer.
  EXPECT_NEAR(e.stages[0].send_ms, 1.005, 1e-9);
  EXPECT_NEAR(e.stages[0].send_transfer_ms, 0.010, 1e-9);
  // Fill and drain whole (2 x 1.005), the 3 other micro-batches' transfer.
  EXPECT_NEAR(e.pipeline_comm_ms, 2 * 1.005 + 3 * 0.010, 1e-9);
  // Without a comm profile: the catalogue's latency and link (cpu: 5 us, and
  // 200 B over its same-host bandwidth), the transfer alone no larger.
  const CostModel catalogue(toy_model(), "cpu", compute, nullptr, sgd());
  const Estimate c = estimate(catalogue, cell, p);
  EXPECT_GT(c.stages[0].send_ms, c.stages[0].send_transfer_ms);
  EXPECT_GT(c.stages[0].send_transfer_ms, 0);
  EXPECT_NEAR(c.pipeline_comm_ms, 2 * c.stages[0].send_ms + 3 * c.stages[0].send_transfer_ms, 1e-12);
}

TEST(Estimator, DataParallelGradientSyncUsesTheAlphaBetaFitBeyondTheRange) {
  const auto compute = toy_compute();
  const auto comm = toy_comm();
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  Cell cell{"toy", "cpu", 1, 2, 1};
  Plan p;
  p.micro_batches = 1;
  p.micro_batch_size = 4;
  p.stages = {{0, 4, 2, 1}};
  const Estimate e = estimate(cm, cell, p);
  // Each replica: 2 samples, 4 layers x 6 ms = 24 ms, plus adding its one
  // micro-batch's gradients into the all-reduce buffer (4000 x 12 B).
  const double add = 4000 * 12 / 200e9 * 1e3, zero = 4000 * 8 / 200e9 * 1e3;
  EXPECT_NEAR(e.pipeline_compute_ms, 24 + add, 1e-12);
  // 16000 B of gradients, beyond 1000 B: fit 0 + 0.1 us/B = 1600 us.
  EXPECT_NEAR(e.stages[0].grad_sync_ms, 1.6, 1e-9);
  // The step, and zeroing the buffer.
  EXPECT_NEAR(e.iteration_ms, 24 + add + 1.6 + 4000 * 12 / 200e9 * 1e3 + zero, 1e-9);
  EXPECT_EQ(e.basis, Basis::Measured);
}

// Backward adds each micro-batch's gradients to those held (read both, write
// one: 3 x 4 B per fp32 parameter), except the first micro-batch of a replica
// whose gradients the step released; data-parallel replicas keep theirs in the
// all-reduce buffer, so every micro-batch adds and the step zeroes it.
TEST(Estimator, GradientAccumulationPricedPerMicroBatchAfterTheFirst) {
  auto compute = toy_compute("cpu");
  compute.mem_gbps = 20;
  const auto comm = toy_comm("cpu");
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  const double add = 4000 * 12 / 20e9 * 1e3;  // all 4 layers' 4000 parameters
  EXPECT_NEAR(cm.stream_ms(4000, 12), add, 1e-15);
  Cell one{"toy", "cpu", 1, 1, 1};
  Plan p;
  p.micro_batch_size = 2;
  p.stages = {{0, 4, 1, 1}};
  double prev = 0;
  for (int b : {1, 2, 4, 8}) {
    p.micro_batches = b;
    const Estimate e = estimate(cm, one, p);
    EXPECT_NEAR(e.stages[0].accumulate_ms * b, add * (b - 1), 1e-12) << b;
    EXPECT_NEAR(e.pipeline_compute_ms, 24 * b + add * (b - 1), 1e-9) << b;
    EXPECT_GT(e.iteration_ms, prev);
    prev = e.iteration_ms;
  }
  Cell two{"toy", "cpu", 1, 2, 1};
  p.micro_batch_size = 4;
  p.micro_batches = 3;
  p.stages = {{0, 4, 2, 1}};
  const Estimate dp = estimate(cm, two, p);
  EXPECT_NEAR(dp.stages[0].accumulate_ms, add, 1e-12);
  EXPECT_NEAR(dp.stages[0].optimizer_ms, add + 4000 * 8 / 20e9 * 1e3, 1e-12);
}

// A CPU profile that measured one process's bandwidth while another streams
// prices the memory-bound passes of cells with two processes per host at the
// shared figure; one process per host, and GPU types, keep the bandwidth alone.
TEST(Estimator, SharedMemoryBandwidthSlowsTheStreamingOfSharedHostsOnly) {
  auto compute = toy_compute("cpu");
  compute.mem_gbps = 20;
  compute.mem_gbps_streams = {30, 20};  // the pass alone, and per stream with 2 at once
  const auto comm = toy_comm("cpu");
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  EXPECT_DOUBLE_EQ(cm.shared_memory_factor(1), 1);
  EXPECT_DOUBLE_EQ(cm.shared_memory_factor(2), 1.5);
  // Beyond the measured counts the largest measured total (2 x 20) is shared out.
  EXPECT_DOUBLE_EQ(cm.shared_memory_factor(4), 30 / (40.0 / 4));
  const double add = 4000 * 12 / 20e9 * 1e3;
  EXPECT_NEAR(cm.stream_ms(4000, 12, 2), 1.5 * add, 1e-15);
  Plan p;
  p.micro_batch_size = 4;
  p.micro_batches = 3;
  p.stages = {{0, 4, 2, 1}};
  const Estimate two = estimate(cm, Cell{"toy", "cpu", 1, 2, 1}, p);
  EXPECT_NEAR(two.stages[0].accumulate_ms, 1.5 * add, 1e-12);
  EXPECT_NEAR(two.stages[0].optimizer_ms, 1.5 * (add + 4000 * 8 / 20e9 * 1e3), 1e-12);
  EXPECT_NE(std::find_if(two.notes.begin(), two.notes.end(),
                         [](const std::string& n) { return n.find("memory-bound steps x1.500") == 0; }),
            two.notes.end());
  const Estimate apart = estimate(cm, Cell{"toy", "cpu", 2, 1, 1}, p);  // one process per host
  EXPECT_NEAR(apart.stages[0].accumulate_ms, add, 1e-12);
  // Two pipeline stages on one host: both accumulate during their backwards,
  // but each steps alone (as it finishes its last backward).
  p.stages = {{0, 2, 1, 1}, {2, 2, 1, 1}};
  const Estimate pp = estimate(cm, Cell{"toy", "cpu", 1, 2, 2}, p);
  const double half = 2000 * 12 / 20e9 * 1e3;
  for (const auto& st : pp.stages) {
    EXPECT_NEAR(st.accumulate_ms, 1.5 * half * 2 / 3, 1e-12);  // 2 adds of 3 micro-batches
    EXPECT_NEAR(st.optimizer_ms, half, 1e-12);
  }
  // Noise that makes the shared pass look faster never speeds the estimate up.
  compute.mem_gbps_streams = {30, 31};
  EXPECT_DOUBLE_EQ(CostModel(toy_model(), "cpu", compute, &comm, sgd()).shared_memory_factor(2), 1);
  // A CPU profile priced on a GPU type: the GPU's processes have memory of their own.
  compute.mem_gbps_streams = {30, 20};
  EXPECT_DOUBLE_EQ(CostModel(toy_model(), "v100", compute, &comm, sgd()).shared_memory_factor(2), 1);
}

// The toy model priced from the toy CPU profiles without and with a
// co-location factor.
struct ColocatedPair {
  CostModel plain, shared;
};
ColocatedPair colocated_pair(double factor) {
  const auto compute = toy_compute("cpu");
  const auto comm = toy_comm("cpu");
  Options o = sgd();
  CostModel plain(toy_model(), "cpu", compute, &comm, o);
  o.colocated_compute_factor = factor;
  return {std::move(plain), CostModel(toy_model(), "cpu", compute, &comm, o)};
}

// Validate's measured co-location factor scales the layers' compute of cells
// whose host runs several processes, and nothing else.
TEST(Estimator, ColocationFactorScalesTheComputeOfSharedHostsOnly) {
  const auto [plain, shared] = colocated_pair(1.25);
  Plan p;
  p.micro_batches = 2;
  p.micro_batch_size = 4;
  p.stages = {{0, 4, 2, 1}};
  const Cell two{"toy", "cpu", 1, 2, 1};
  const Estimate a = estimate(plain, two, p), b = estimate(shared, two, p);
  EXPECT_NEAR(b.stages[0].fwd_ms, 1.25 * a.stages[0].fwd_ms, 1e-12);
  EXPECT_NEAR(b.stages[0].bwd_ms, 1.25 * a.stages[0].bwd_ms, 1e-12);
  EXPECT_NEAR(b.pipeline_compute_ms - a.pipeline_compute_ms,
              0.25 * 2 * (a.stages[0].fwd_ms + a.stages[0].bwd_ms), 1e-9);
  EXPECT_DOUBLE_EQ(b.stages[0].optimizer_ms, a.stages[0].optimizer_ms);
  EXPECT_DOUBLE_EQ(b.stages[0].grad_sync_total_ms, a.stages[0].grad_sync_total_ms);
  EXPECT_FALSE(b.notes.empty());
  // One process per host: unchanged.
  const Cell one{"toy", "cpu", 1, 1, 1};
  p.stages = {{0, 4, 1, 1}};
  EXPECT_DOUBLE_EQ(estimate(shared, one, p).iteration_ms, estimate(plain, one, p).iteration_ms);
}

// A one-process pipeline stage pays the co-location factor only on the work
// it does while the other stage computes too: with B micro-batches, B - 1 of
// each end stage's B; with one micro-batch the stages take turns.
TEST(Estimator, ColocationFactorScalesAPipelineStageByItsOverlappedShare) {
  const auto [plain, shared] = colocated_pair(1.2);
  const Cell two{"toy", "cpu", 1, 2, 2};
  Plan p;
  p.micro_batch_size = 4;
  p.stages = {{0, 2, 1, 1}, {2, 2, 1, 1}};
  for (const int B : {1, 2, 4}) {
    p.micro_batches = B;
    const Estimate a = estimate(plain, two, p), b = estimate(shared, two, p);
    const double f = 1 + 0.2 * (B - 1) / B;  // 1, 1.1, 1.15
    for (size_t j = 0; j < 2; ++j) {
      EXPECT_NEAR(b.stages[j].fwd_ms, f * a.stages[j].fwd_ms, 1e-12) << "B=" << B;
      EXPECT_NEAR(b.stages[j].bwd_ms, f * a.stages[j].bwd_ms, 1e-12) << "B=" << B;
    }
  }
  // Unbalanced stages (1 layer against 3, 6 against 18 ms a micro-batch): the
  // short stage overlaps the long one B - 1 of its B micro-batches, the long
  // one overlaps the short one's (B - 1) x 6 of its B x 18 ms.
  p.micro_batches = 4;
  p.stages = {{0, 1, 1, 1}, {1, 3, 1, 1}};
  const Estimate a = estimate(plain, two, p), b = estimate(shared, two, p);
  EXPECT_NEAR(a.stages[1].fwd_ms, 3 * a.stages[0].fwd_ms, 1e-12);
  EXPECT_NEAR(b.stages[0].fwd_ms, (1 + 0.2 * 3 / 4) * a.stages[0].fwd_ms, 1e-12);
  EXPECT_NEAR(b.stages[1].fwd_ms, (1 + 0.2 * 3 / 4 / 3.0) * a.stages[1].fwd_ms, 1e-12);
  EXPECT_NEAR(b.stages[1].bwd_ms, (1 + 0.2 * 3 / 4 / 3.0) * a.stages[1].bwd_ms, 1e-12);
  // A stage of two replicas computes together all the time: the whole factor.
  const Cell four{"toy", "cpu", 1, 4, 2};
  p.micro_batches = 2;
  p.stages = {{0, 2, 2, 1}, {2, 2, 2, 1}};
  EXPECT_NEAR(estimate(shared, four, p).stages[0].fwd_ms, 1.2 * estimate(plain, four, p).stages[0].fwd_ms, 1e-12);
}

// Recomputation: each layer keeps only its input (the previous layer's 100 B
// output, none for the first), one layer at a time holds its 200 B saved set,
// and backward runs the forward again.
TEST(Estimator, RecomputationTradesAForwardForSavedActivations) {
  const auto compute = toy_compute();
  const auto comm = toy_comm();
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  const Cell cell{"toy", "cpu", 1, 2, 2};
  Plan p;
  p.micro_batches = 4;
  p.micro_batch_size = 2;
  p.stages = {{0, 2, 1, 1}, {2, 2, 1, 1}};
  const Estimate plain = estimate(cm, cell, p);
  p.recompute = true;
  const Estimate rc = estimate(cm, cell, p);
  EXPECT_DOUBLE_EQ(rc.stages[0].recompute_ms, 4);  // 2 layers x 2 ms forward
  EXPECT_DOUBLE_EQ(plain.stages[0].recompute_ms, 0);
  EXPECT_NEAR(rc.pipeline_compute_ms - plain.pipeline_compute_ms, 5 * 4, 1e-9);  // s_j x 3 + 2 s_j
  // Stage 0 (2 in flight): 2000 B saved plus buffers before, inputs (0 + 100) x 2 samples x 2
  // + one layer's 200 x 2 + 2 x 200 after; stage 1 (1 in flight): the same 1200 either way.
  EXPECT_DOUBLE_EQ(plain.stages[0].activation_bytes, 1600 + 400);
  EXPECT_DOUBLE_EQ(rc.stages[0].activation_bytes, 400 + 400 + 400);
  EXPECT_DOUBLE_EQ(rc.stages[1].activation_bytes, 200 * 2 + 400 + 400);
  EXPECT_TRUE(parse_plan("dp=1,tp=1,mb=4,recompute=1", cm, cell, 8).recompute);
  EXPECT_FALSE(parse_plan("dp=1,tp=1,mb=4", cm, cell, 8).recompute);
  EXPECT_THROW(parse_plan("dp=1,tp=1,mb=4,recompute=yes", cm, cell, 8), InputError);
}

TEST(Estimator, TensorParallelShardsFromTheirOwnProfiles) {
  const auto compute = toy_compute();
  const auto comm = toy_comm();
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  Cell cell{"toy", "cpu", 1, 2, 1};
  Plan p;
  p.micro_batches = 1;
  p.micro_batch_size = 2;
  p.stages = {{0, 4, 1, 2}};
  const Estimate e = estimate(cm, cell, p);
  EXPECT_DOUBLE_EQ(e.stages[0].fwd_ms, 4 * 1.2);
  EXPECT_DOUBLE_EQ(e.stages[0].bwd_ms, 4 * 2.4);
  // 4 all-reduces of 200 B per layer: 20 us each.
  EXPECT_NEAR(e.stages[0].tp_comm_ms, 4 * 4 * 0.020, 1e-12);
  EXPECT_DOUBLE_EQ(e.stages[0].params_bytes, 4 * 500 * 4);
  EXPECT_EQ(e.basis, Basis::Measured);
  // tp=2 at a micro-batch of 4 comes from the single tp=2 point, proportionally.
  EXPECT_DOUBLE_EQ(cm.layer_time(0, 2, 4).fwd_ms, 2.4);
}

TEST(Estimator, MissingShardProfilesAreExtrapolatedAndSaid) {
  auto compute = toy_compute();
  compute.layers.pop_back();  // no tp=2 profile left
  const auto comm = toy_comm();
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  EXPECT_DOUBLE_EQ(cm.layer_time(0, 2, 2).fwd_ms, 1.0);  // whole layer / 2
  EXPECT_EQ(cm.basis(), Basis::Extrapolated);
  EXPECT_FALSE(cm.notes().empty());
}

TEST(Estimator, CommRanksRescaledByBusBandwidth) {
  const auto compute = toy_compute();
  const auto comm = toy_comm();
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  // 4 ranks: factor 1.5 vs 1.0 at 2 ranks.
  EXPECT_NEAR(cm.collective_ms("all_reduce", 4, false, 1000), 0.1 * 1.5, 1e-12);
  EXPECT_DOUBLE_EQ(cm.collective_ms("all_reduce", 1, false, 1000), 0);
}

TEST(Estimator, OptimizerStepAtTheProfilesMeasuredBandwidth) {
  auto compute = toy_compute("cpu");
  const auto comm = toy_comm("cpu");
  Options adam;
  adam.optimizer = "adam";
  // Not measured: the catalogue's 200 GB/s. Adam moves 3 x 4 + 2 x 8 = 28 B per parameter.
  EXPECT_NEAR(CostModel(toy_model(), "cpu", compute, &comm, adam).optimizer_ms(1e6), 1e6 * 28 / 200e9 * 1e3, 1e-12);
  compute.mem_gbps = 20;  // measured on this device
  EXPECT_NEAR(CostModel(toy_model(), "cpu", compute, &comm, adam).optimizer_ms(1e6), 1e6 * 28 / 20e9 * 1e3, 1e-12);
  // A GPU profile priced on the CPU: the measured share of the catalogue figure carries over
  // (cpu 200 GB/s x 90/900 when the v100 profile measured 90 GB/s).
  auto gpu = toy_compute("v100");
  gpu.mem_gbps = 90;
  EXPECT_NEAR(CostModel(toy_model(), "cpu", gpu, &comm, adam).optimizer_ms(1e6), 1e6 * 28 / 20e9 * 1e3, 1e-12);
}

TEST(Estimator, GpuProfilesOnTheCpuAreExtrapolatedByRoofline) {
  const auto compute = toy_compute("v100");
  const auto comm = toy_comm("cpu");
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  EXPECT_EQ(cm.basis(), Basis::Extrapolated);
  // Per layer at mb 1: 1e6 FLOPs, 4000 + 200 bytes (fp32 on the CPU).
  // v100 (fp32 15.7 TFLOPS, 900 GB/s) -> cpu (2 TFLOPS, 200 GB/s).
  const double src = std::max(1e6 / 15.7e12, 4200 / 900e9);
  const double dst = std::max(1e6 / 2e12, 4200 / 200e9);
  EXPECT_NEAR(cm.layer_time(0, 1, 1).fwd_ms, 1.0 * dst / src, 1e-9);
  EXPECT_NEAR(cm.layer_time(0, 1, 1).bwd_ms, 2.0 * dst / src, 1e-9);
}

TEST(Estimator, CpuProfilesNeverPriceAGpu) {
  const auto compute = toy_compute("cpu");
  const auto comm = toy_comm("cpu");
  const CostModel cm(toy_model(), "v100", compute, &comm, sgd());
  EXPECT_EQ(cm.basis(), Basis::Modeled);
  const CostModel none(toy_model(), "v100", nullptr, nullptr, sgd());
  EXPECT_EQ(none.basis(), Basis::Modeled);
  // The same times with and without the CPU profile: its times are not used.
  EXPECT_DOUBLE_EQ(cm.layer_time(0, 1, 4).fwd_ms, none.layer_time(0, 1, 4).fwd_ms);
  EXPECT_LT(cm.layer_time(0, 1, 4).fwd_ms, 0.5);  // the profile says 4 ms
  // Links from the catalogue: NVLink 150 GB/s, 5 us per ring step; the V100 NIC default 12.5 GB/s.
  EXPECT_NEAR(cm.collective_ms("all_reduce", 2, false, 1.5e6), (2 * 5 + 1.5e6 / 150e3) / 1000, 1e-12);
  EXPECT_NEAR(cm.collective_ms("all_reduce", 2, true, 1.25e6), (2 * 20 + 1.25e6 / 12.5e3) / 1000, 1e-12);
  Cell cell{"toy", "v100", 1, 1, 1};
  Plan p;
  p.stages = {{0, 4, 1, 1}};
  const Estimate e = estimate(cm, cell, p);
  EXPECT_EQ(e.basis, Basis::Modeled);
  EXPECT_EQ(e.precision, Precision::FP16);  // the V100's default: fp16 mixed precision
  EXPECT_FALSE(e.notes.empty());
  EXPECT_THROW(CostModel(toy_model(), "cpu", nullptr, nullptr), InputError);  // a CPU needs a profile
}

TEST(Estimator, MemoryBeyondTheDeviceIsInfeasible) {
  const auto compute = toy_compute();
  const auto comm = toy_comm();
  Options o;  // adam: 8 B of state per parameter
  const CostModel cm(toy_model(4, 1e10), "v100", compute, &comm, o);
  Cell one{"toy", "v100", 1, 1, 1};
  Plan p;
  p.stages = {{0, 4, 1, 1}};
  const Estimate e = estimate(cm, one, p);
  EXPECT_FALSE(e.feasible);
  EXPECT_NE(e.infeasible_reason.find("GiB"), std::string::npos);
  EXPECT_NEAR(e.stages[0].optimizer_bytes, 4e10 * 12, 1);  // fp16 on a V100: Adam + fp32 master weights
  // 1e9 params per GPU still need 16 GB; 1e8 per GPU fit.
  const CostModel small(toy_model(4, 1e8), "v100", compute, &comm, o);
  EXPECT_TRUE(estimate(small, one, p).feasible);
}

TEST(Estimator, BadPlansAndCellsGetClearErrors) {
  const auto compute = toy_compute();
  const auto comm = toy_comm();
  const CostModel cm(toy_model(), "cpu", compute, &comm, sgd());
  Cell cell{"toy", "cpu", 1, 2, 2};
  auto msg = [&](const Plan& p) {
    try {
      check_plan(cm, cell, p);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  Plan p;
  p.micro_batches = 2;
  p.micro_batch_size = 2;
  p.stages = {{0, 2, 1, 1}, {2, 2, 1, 1}};
  EXPECT_EQ(msg(p), "");
  Plan gap = p;
  gap.stages[1].first_layer = 3;
  EXPECT_NE(msg(gap).find("contiguous"), std::string::npos);
  Plan short_ = p;
  short_.stages[1].num_layers = 1;
  EXPECT_NE(msg(short_).find("cover 3 of 4"), std::string::npos);
  Plan gpus = p;
  gpus.stages[1].dp = 2;
  EXPECT_NE(msg(gpus).find("uses 3 GPUs"), std::string::npos);
  Plan odd = p;
  odd.micro_batch_size = 3;
  odd.stages = {{0, 2, 2, 1}, {2, 2, 2, 1}};
  Cell four{"toy", "cpu", 1, 4, 2};
  EXPECT_THROW(check_plan(cm, four, odd), InputError);
  Plan tp = p;
  tp.stages = {{0, 2, 1, 2}, {2, 2, 1, 2}};
  Cell two_hosts{"toy", "cpu", 4, 1, 2};
  try {
    check_plan(cm, two_hosts, tp);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("more than one host"), std::string::npos);
  }
  EXPECT_THROW(parse_plan("dp=2,mb=x", cm, cell, 8), InputError);
  EXPECT_THROW(parse_plan("dp=1:1:1", cm, cell, 8), InputError);
  EXPECT_THROW(parse_plan("foo=1", cm, cell, 8), InputError);
  // A key given twice is named (the last one won, silently).
  try {
    parse_plan("dp=2,mb=1,dp=1", cm, cell, 8);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--plan: dp appears twice"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_plan("mb=3", cm, cell, 8), InputError);
  EXPECT_THROW(parse_plan("mb=1", cm, cell, -5), InputError);
  EXPECT_THROW(make_cell("toy", "cpu", 12, 1, 8), InputError);
  Cell too_many{"toy", "cpu", 1, 8, 8};
  EXPECT_THROW(parse_plan("", cm, too_many, 8), InputError);
  EXPECT_THROW(CostModel(toy_model(), "no-such-gpu", compute, &comm), InputError);
  auto other = toy_compute();
  other.model = "gpt-tiny";
  EXPECT_THROW(CostModel(toy_model(), "cpu", other, &comm), InputError);
  auto missing = toy_compute();
  for (auto& l : missing.layers) l.shape_key = "other";
  EXPECT_THROW(CostModel(toy_model(), "cpu", missing, &comm), InputError);
}

TEST(Estimator, ParsePlanFillsDefaults) {
  const auto compute = toy_compute();
  const auto comm = toy_comm();
  const CostModel cm(toy_model(5), "cpu", compute, &comm, sgd());
  Cell cell{"toy", "cpu", 1, 4, 2};
  const Plan p = parse_plan("tp=2,mb=4", cm, cell, 16);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].dp, 1);
  EXPECT_EQ(p.stages[0].tp, 2);
  EXPECT_EQ(p.stages[0].num_layers, 2);
  EXPECT_EQ(p.stages[1].num_layers, 3);
  EXPECT_EQ(p.micro_batch_size, 4);
  const Plan q = parse_plan("dp=2:1,tp=1:2,mb=2,mbs=2,layers=1:4", cm, cell, 0);
  EXPECT_EQ(q.stages[1].first_layer, 1);
  EXPECT_EQ(q.stages[1].tp, 2);
  EXPECT_EQ(q.global_batch(), 4);
  const Cell c = make_cell("toy", "cpu", 16, 2, 8);
  EXPECT_EQ(c.hosts, 2);
  EXPECT_EQ(c.gpus_per_host, 8);
}

TEST(Estimator, PipelineForm) {
  EXPECT_DOUBLE_EQ(pipeline_form({1, 3, 2}, 4), 3 * 3 + 6);
  EXPECT_DOUBLE_EQ(pipeline_form({5}, 1), 5);
}

}  // namespace
}  // namespace cellsched::estimator
