// The analytic per-layer cost model (basis `modeled`): a layer's work split
// into operator classes with FLOPs and bytes, each priced by a roofline at
// the training precision's peak times an efficiency that depends on the GEMM
// shape (tile padding, wave quantization, short reduction dimension) and on
// the GPU generation, with a floor of the host's per-kernel issue time.
// Plain C++; no LibTorch, no CUDA. The tables are in opcost.cc, calibrated on
// the calibration rows of examples/data/gpu_measurements/ (see docs/estimator.md).
#pragma once

#include <string>
#include <vector>

#include "core/gpu.h"
#include "core/model.h"

namespace cellsched::estimator {

enum class OpClass { Gemm, Attention, Conv, Elementwise, Embedding, Loss, Optimizer };
const char* op_class_name(OpClass c);

// One operator of a layer's forward pass. GEMM-like classes (Gemm, Attention,
// Conv) carry their product shape: `batch` independent (m x k) . (k x n)
// products; a convolution is its implicit GEMM (m = images x output pixels,
// n = output channels, k = input channels x kernel area).
struct Op {
  OpClass cls = OpClass::Elementwise;
  double m = 0, n = 0, k = 0, batch = 1;
  double flops = 0;  // forward FLOPs (2 per multiply-add)
  double bytes = 0;  // forward bytes read and written
  int kernels = 1;   // forward kernel launches
  // Fused attention (FlashAttention-style): priced at kFusedAttentionShare of
  // the generation's GEMM efficiency, its backward at kFusedAttentionBackward.
  bool fused = false;
  // A 3x3 convolution at stride 1: cuDNN may run it as a Winograd transform
  // (Efficiency::winograd).
  bool winograd = false;
};

// Backward of an op relative to its forward: GEMM-like ops compute the input
// and the weight gradient (2x FLOPs, bytes and kernels); memory-bound ops read
// the output gradient and the saved input and write the input gradient
// (ReLU 3 passes for 2, batch norm about 5 for 3: 1.6x bytes).
constexpr double kBackwardFactor = 2.0;
constexpr double kBackwardMemoryFactor = 1.6;

// A fused attention kernel reaches this share of the generation's large-GEMM
// efficiency (FlashAttention-2, Dao 2023: 50-73 % of the A100's peak forward
// and backward; 0.72 x 0.8 = 58 % here), and its backward, which recomputes
// the scores, does 2.5x the forward's FLOPs (5 products against 2).
constexpr double kFusedAttentionShare = 0.8;
constexpr double kFusedAttentionBackward = 2.5;

// TF32 kernels reach this share of the generation's tensor-core efficiency
// (calibrated on the A100 TF32 ResNet-50 row).
constexpr double kTf32Share = 0.65;

// A 16-bit tensor-core GEMM (cuBLAS) whose n or k (its leading dimensions;
// m is the tokens) is not a multiple of 8 values (16 bytes) cannot use the
// kernels that load 16 bytes at a time
// (NVIDIA's Matrix Multiplication Background guide, "Tensor Core
// Requirements"; NVIDIA's BERT pads its vocabulary to a multiple of 8 for
// this). It reaches this share of the aligned efficiency: fitted on the H100
// calibration row GPT-350M bf16 batch 8, whose logits have GPT-2's 50,257
// words (docs/estimator.md, "Two costs the GPT rows lacked"). TF32 is not penalized: no row
// calibrates it. Convolutions are not: cuDNN pads channels.
constexpr double kUnalignedShare = 0.22;
// An unaligned 16-bit GEMM is never priced below the CUDA cores' own 16-bit
// rate (GpuSpec::cuda_fp16_tflops): cuBLAS then picks a kernel off the tensor
// cores. Without it a V100 ran an unaligned fp16 model below a P100 (0.22 x
// 125 = 27.5 TFLOP/s against its CUDA cores' 31.4).
// Whether one GEMM size is a multiple of 8 values, as those kernels need.
bool tensor_core_aligned(double size);
// The sizes of a GEMM that 16-bit tensor-core kernels need aligned and that
// are not: n and k (see unaligned_16bit), in that order.
std::vector<double> unaligned_sizes(const Op& op);
bool unaligned_16bit(const GpuSpec& g, Precision p, const Op& op);

// A layer's forward ops at `micro_batch` samples, one of `tp` tensor-parallel
// shards (tp > 1 only for tensor-parallel layers). Kinds the zoo builds
// (embedding, decoder, moe_decoder, head, conv, residual_block) are split by
// their structure; other kinds become one square GEMM of the layer's FLOPs and
// an elementwise pass over its activations.
std::vector<Op> layer_ops(const ModelSpec& model, const LayerSpec& layer, double micro_batch, int tp);

// Whether `model` trains with fused attention on `g`: as the model says, and
// for Attention::Auto when it is a transformer trained in fp16/bf16 on a GPU
// with tensor cores (Volta and newer), where PyTorch 2's
// scaled_dot_product_attention picks a fused kernel (flash on Ampere and
// newer, the memory-efficient one before).
bool fused_attention(const ModelSpec& model, const GpuSpec& g);

// The calibrated constants of one GPU generation (docs/estimator.md lists them).
struct Efficiency {
  double gemm_fp32 = 0.85;   // best fraction of the FP32 peak a large GEMM reaches
  double gemm_tensor = 0.75; // ... of the tensor-core peak (fp16/bf16/tf32)
  double conv = 0.85;        // convolutions relative to a GEMM of the same shape
  double memory = 0.8;       // fraction of the memory bandwidth streaming kernels reach
  double issue_us = 10;      // host time to issue one kernel (framework dispatch)
  double winograd = 1.0;     // speedup of an fp32 3x3 stride-1 convolution over its implicit GEMM
  // An SM's FP32 lanes over the 64 that the tiles' slots per SM are counted
  // for: Kepler's SMX has 192, which it feeds by dual issue (3); others 1.
  double sm_width = 1.0;
};
const Efficiency& efficiency_of(const GpuSpec& g);

// Share of the precision's peak a (m x k) . (k x n) product, `batch` times,
// reaches on `g` from shape alone (best of the candidate tiles: padding x wave
// quantization x the short-k penalty, with the reduction split into slices of
// at least 2048 when the output's tiles leave slots empty), times the
// generation's GEMM efficiency.
double gemm_efficiency(const GpuSpec& g, Precision p, double m, double n, double k, double batch = 1);

// Time of one op, forward (backward = false) or backward, in milliseconds:
// max(FLOPs / (peak x efficiency), bytes / (bandwidth x memory efficiency))
// per kernel, never below kernels x the issue time.
double op_time_ms(const GpuSpec& g, Precision p, const Op& op, bool backward);

// The optimizer step over `params` parameters held as `tensors` tensors:
// `bytes_per_param` streamed at the memory bandwidth, at least one kernel
// per 8 tensors (multi-tensor apply).
double optimizer_step_ms(const GpuSpec& g, double params, double bytes_per_param, double tensors);

// Parameter tensors of a layer (for the optimizer's launches).
double layer_param_tensors(const LayerSpec& layer);

}  // namespace cellsched::estimator
