// Details of the modeled estimates: what each kind of tensor-parallel layer
// all-reduces, how many NICs a data-parallel group spanning hosts drives at
// once, and a precision the GPU type has no arithmetic for.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/model.h"
#include "estimator/estimator.h"

namespace cellsched::estimator {
namespace {

// Megatron: a block all-reduces its s x h output twice forward and twice
// backward; the vocabulary-parallel embedding once forward; the
// vocabulary-parallel head keeps its logits sharded (its input's gradient
// once backward, three fp32 values a token for the cross-entropy).
TEST(CommModel, TensorParallelLayersAllReduceAsMegatronDoes) {
  const ModelSpec m = model_by_name("gpt-125m");
  const CostModel cm(m, "a100-80", nullptr, nullptr);  // bf16: 2 bytes a value
  ASSERT_EQ(m.layers.front().kind, "embedding");
  ASSERT_EQ(m.layers[1].kind, "decoder");
  ASSERT_EQ(m.layers.back().kind, "head");
  const int tp = 8, head = static_cast<int>(m.layers.size()) - 1;
  const double mb = 2, s = m.seq, bpv = cm.model().bytes_per_value;
  ASSERT_EQ(bpv, 2);
  // What a layer hands on (the residual stream, fp32 under autocast).
  const auto out = [&](int l) { return cm.model().layers[static_cast<size_t>(l)].activation_bytes_per_sample * mb; };
  const auto ar = [&](double bytes) { return cm.collective_ms("all_reduce", tp, false, bytes); };
  EXPECT_NEAR(cm.tp_comm_ms(0, tp, mb, false), ar(out(0)), 1e-12);
  EXPECT_NEAR(cm.tp_comm_ms(1, tp, mb, false), 4 * ar(out(1)), 1e-12);
  const double head_ms = cm.tp_comm_ms(head, tp, mb, false);
  EXPECT_NEAR(head_ms, ar(out(head - 1)) + 3 * ar(s * 4 * mb), 1e-12);
  // The whole logits four times cost over ten times as much: gpt-1.3b's
  // head was priced above all its blocks at tp=8.
  EXPECT_LT(10 * head_ms, 4 * ar(s * m.vocab * bpv * mb));
  EXPECT_EQ(cm.tp_comm_ms(head, 1, mb, false), 0);
}

TEST(CommModel, DataParallelGroupsDriveOneNicPerReplicaOnAHost) {
  EXPECT_EQ(dp_nics(16, 1, 8), 8);
  EXPECT_EQ(dp_nics(16, 2, 8), 4);  // two shard groups share the host's 8 NICs
  EXPECT_EQ(dp_nics(2, 1, 8), 2);
  EXPECT_EQ(dp_nics(4, 8, 4), 1);  // tp wider than the host: still one NIC
  const CostModel cm(model_by_name("gpt-125m"), "a100-80", nullptr, nullptr);
  // A100: 25 GB/s a NIC (one 200 Gb/s HDR per GPU), NVLink 300 GB/s, 20 us a
  // ring step between hosts. 16 ranks, busbw factor 2 x 15 / 16.
  const double bytes = 1e9, busbw = 2.0 * 15 / 16;
  const auto ring = [&](double gbps) { return (20 * 30 + busbw * bytes / (gbps * 1e3)) / 1000; };
  EXPECT_NEAR(cm.collective_ms("all_reduce", 16, true, bytes), ring(25), 1e-9);
  EXPECT_NEAR(cm.collective_ms("all_reduce", 16, true, bytes, 8), ring(200), 1e-9);
  EXPECT_NEAR(cm.collective_ms("all_reduce", 16, true, bytes, 16), ring(300), 1e-9);  // the host's NVLink caps it
  EXPECT_NEAR(cm.collective_ms("all_reduce", 8, false, bytes, 8), cm.collective_ms("all_reduce", 8, false, bytes),
              1e-12);  // inside a host NICs do not matter
  // In an estimate: 16 replicas over two 8-GPU hosts use all 8 NICs of each.
  const Cell cell{"gpt-125m", "a100-80", 2, 8, 1};
  Plan p;
  p.micro_batch_size = 16;
  p.stages = {{0, static_cast<int>(cm.model().layers.size()), 16, 1}};
  const Estimate e = estimate(cm, cell, p);
  const double grads = cm.model().total_params() * cm.model().bytes_per_value;
  EXPECT_TRUE(e.stages[0].network_grad_sync);
  EXPECT_NEAR(e.stages[0].grad_sync_total_ms, cm.collective_ms("all_reduce", 16, true, grads, 8), 1e-9);
}

// The K80 has no fp16 arithmetic: fp16 there is priced at the fp32 rate and
// says so; the P100 (fp16 at twice fp32) and fp32 on the K80 say nothing.
TEST(CommModel, Fp16WithoutFp16ArithmeticIsNoted) {
  const auto noted = [](const char* gpu, Precision p) {
    Options o;
    o.precision = p;
    const CostModel cm(model_by_name("gpt-125m"), gpu, nullptr, nullptr, o);
    for (const std::string& n : cm.notes())
      if (n.find("no fast fp16 arithmetic") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(noted("k80", Precision::FP16));
  EXPECT_FALSE(noted("k80", Precision::FP32));
  EXPECT_FALSE(noted("p100", Precision::FP16));
  EXPECT_FALSE(noted("v100", Precision::FP16));
}

// The A40's NVLink bridge joins two boards: a ring over more of them has
// PCIe hops, which bound it; the A100's NVSwitch joins the whole host.
TEST(CommModel, RingsOverMoreA40sThanTheBridgeJoinsRunAtPcieSpeed) {
  const double bytes = 1e9;
  // 5 us a step inside a host, 2(n-1) steps, busbw factor 2(n-1)/n.
  const auto ring = [&](int n, double gbps) {
    return (5.0 * 2 * (n - 1) + 2.0 * (n - 1) / n * bytes / (gbps * 1e3)) / 1000;
  };
  const CostModel a40(model_by_name("gpt-125m"), "a40", nullptr, nullptr);
  EXPECT_NEAR(a40.collective_ms("all_reduce", 2, false, bytes), ring(2, 56.25), 1e-9);
  EXPECT_NEAR(a40.collective_ms("all_reduce", 4, false, bytes), ring(4, 31.5), 1e-9);
  EXPECT_NEAR(a40.collective_ms("all_reduce", 8, false, bytes), ring(8, 31.5), 1e-9);
  // Between hosts too: 2 hosts of 4 A40s ring over PCIe inside each (4 NICs'
  // 50 GB/s capped at 31.5, not at the bridge's 56.25), so never faster than
  // one host of 8 (they were, by 7 % on gpt-1.3b).
  const auto net_ring = [&](int n, double gbps) {
    return (20.0 * 2 * (n - 1) + 2.0 * (n - 1) / n * bytes / (gbps * 1e3)) / 1000;
  };
  EXPECT_NEAR(a40.collective_ms("all_reduce", 8, true, bytes, 4), net_ring(8, 31.5), 1e-9);
  EXPECT_GE(a40.collective_ms("all_reduce", 8, true, bytes, 4), a40.collective_ms("all_reduce", 8, false, bytes));
  EXPECT_NEAR(a40.collective_ms("all_reduce", 4, true, bytes, 2), net_ring(4, 25), 1e-9);  // a bridged pair: 2 NICs
  const CostModel a100(model_by_name("gpt-125m"), "a100-80", nullptr, nullptr);
  EXPECT_NEAR(a100.collective_ms("all_reduce", 8, false, bytes), ring(8, 300), 1e-9);
}

// Tensor parallelism stays inside a host: a plan whose tp group (consecutive
// GPUs, tp innermost) crosses a host boundary is refused.
TEST(Estimator, RefusesATensorParallelGroupAcrossHosts) {
  const CostModel cm(model_by_name("gpt-1.3b"), "a100-80", nullptr, nullptr);
  const int L = static_cast<int>(cm.model().layers.size());
  const auto refused = [&](const Cell& cell, const Plan& p) -> std::string {
    try {
      estimate(cm, cell, p);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  Plan p;
  p.micro_batch_size = 3;
  p.stages = {{0, L, 3, 4}};  // 2 hosts of 6: GPUs 4-7 are one group
  const Cell six{"gpt-1.3b", "a100-80", 2, 6, 1};
  EXPECT_NE(refused(six, p).find("stage 0: its tp group on GPUs 4-7 spans two hosts of 6 GPUs"), std::string::npos)
      << refused(six, p);
  p.micro_batch_size = 6;
  p.stages = {{0, L, 6, 2}};
  EXPECT_EQ(refused(six, p), "");
  // Stages of different widths: a tp=8 stage starting at GPU 2 of 8-GPU hosts.
  Plan q;
  q.micro_batch_size = 3;
  q.stages = {{0, 2, 1, 2}, {2, 10, 1, 8}, {12, L - 12, 3, 2}};
  const Cell sixteen{"gpt-1.3b", "a100-80", 2, 8, 3};
  EXPECT_NE(refused(sixteen, q).find("stage 1: its tp group on GPUs 2-9 spans two hosts of 8 GPUs"),
            std::string::npos)
      << refused(sixteen, q);
}

}  // namespace
}  // namespace cellsched::estimator
