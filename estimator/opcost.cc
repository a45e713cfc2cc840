#include "estimator/opcost.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace cellsched::estimator {

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::Gemm: return "gemm";
    case OpClass::Attention: return "attention";
    case OpClass::Conv: return "conv";
    case OpClass::Elementwise: return "elementwise";
    case OpClass::Embedding: return "embedding";
    case OpClass::Loss: return "loss";
    case OpClass::Optimizer: return "optimizer";
  }
  return "?";
}

namespace {

// A GEMM-like op; bytes are both operands and the result once each (weights
// of a Gemm are shared by the batch, attention and conv operands are not).
Op product(OpClass cls, double m, double n, double k, double batch, double bpv, int kernels = 1) {
  Op o;
  o.cls = cls;
  o.m = m;
  o.n = n;
  o.k = k;
  o.batch = batch;
  o.flops = 2 * m * n * k * batch;
  const double b_operand = cls == OpClass::Gemm ? k * n : k * n * batch;
  o.bytes = (m * k * batch + b_operand + m * n * batch) * bpv;
  o.kernels = kernels;
  return o;
}

Op stream(OpClass cls, double bytes, int kernels, double flops = 0) {
  Op o;
  o.cls = cls;
  o.bytes = bytes;
  o.kernels = kernels;
  o.flops = flops;
  return o;
}

// Convolution + batch norm (+ ReLU) at `pixels` output pixels per image.
void conv_bn(std::vector<Op>& ops, double mb, double in, double out, double ksize, double pixels, double bpv,
             bool relu, double stride = 1) {
  ops.push_back(product(OpClass::Conv, mb * pixels, out, in * ksize * ksize, 1, bpv));
  ops.back().winograd = ksize == 3 && stride == 1;
  // Training batch norm: statistics pass (read) and normalize (read + write); ReLU read + write.
  ops.push_back(stream(OpClass::Elementwise, mb * out * pixels * bpv * (relu ? 5 : 3), relu ? 2 : 1));
}

// Mixed precision as torch.autocast runs it: the GEMMs take 16-bit operands,
// but the embedding's output (an fp32 table), every residual add (fp32 + 16-bit
// promotes to fp32) and layer norm (on autocast's fp32 list) stay fp32, and
// the next GEMM's input is a cast. `rb` is the residual stream's value size.
double residual_bytes(const ModelSpec& m) { return std::max(4, m.bytes_per_value); }

// Layer norm over the residual stream: read and write at `rb`, plus the cast
// to the GEMMs' precision when that is narrower.
Op layer_norm(double elements, double bpv, double rb) {
  return rb > bpv ? stream(OpClass::Elementwise, elements * (3 * rb + bpv), 2)
                  : stream(OpClass::Elementwise, elements * 2 * bpv, 1);
}

void decoder_ops(std::vector<Op>& ops, const ModelSpec& m, const LayerSpec& l, double mb, double tp) {
  const double h = m.hidden, s = m.seq, a = m.heads, bpv = m.bytes_per_value, rb = residual_bytes(m);
  const double T = mb * s, d = h / a, ap = a / tp, hp = h / tp;
  // Dropout over the branch output (read, write) and the residual add (read
  // the stream and the branch, write the stream).
  const double residual_add = T * h * (3 * bpv + 2 * rb);
  ops.push_back(layer_norm(T * h, bpv, rb));
  ops.push_back(product(OpClass::Gemm, T, 3 * hp, h, 1, bpv));      // QKV
  if (m.fused_attention) {
    // One kernel: both products, the softmax in registers; reads Q, K, V and
    // writes the output (and the per-row statistics).
    Op fa = product(OpClass::Attention, s, s, d, mb * ap, bpv);
    fa.flops *= 2;
    fa.bytes = 4 * T * hp * bpv + mb * ap * s * 4;
    fa.fused = true;
    ops.push_back(fa);
  } else {
    ops.push_back(product(OpClass::Attention, s, s, d, mb * ap, bpv));  // Q K^T
    // scale + mask, softmax, dropout over the score matrix.
    ops.push_back(stream(OpClass::Elementwise, 6 * mb * ap * s * s * bpv, 3));
    ops.push_back(product(OpClass::Attention, s, d, s, mb * ap, bpv));  // scores V
  }
  ops.push_back(stream(OpClass::Elementwise, 4 * T * hp * bpv, 2));   // head split / merge copies
  ops.push_back(product(OpClass::Gemm, T, h, hp, 1, bpv));            // output projection
  ops.push_back(stream(OpClass::Elementwise, residual_add, 2));       // dropout + residual
  ops.push_back(layer_norm(T * h, bpv, rb));
  if (l.kind == "moe_decoder") {
    const double e = m.experts, k = m.top_k, te = T * k / e;
    ops.push_back(product(OpClass::Gemm, T, e, h, 1, bpv));  // router
    ops.push_back(stream(OpClass::Elementwise, 4 * T * k * h * bpv, 4));  // dispatch / combine
    ops.push_back(product(OpClass::Gemm, te, 4 * hp, h, e, bpv, static_cast<int>(e)));
    ops.push_back(stream(OpClass::Elementwise, 2 * T * k * 4 * hp * bpv, static_cast<int>(e)));  // GELU
    ops.push_back(product(OpClass::Gemm, te, h, 4 * hp, e, bpv, static_cast<int>(e)));
  } else {
    ops.push_back(product(OpClass::Gemm, T, 4 * hp, h, 1, bpv));         // MLP up
    ops.push_back(stream(OpClass::Elementwise, 2 * T * 4 * hp * bpv, 1));  // GELU
    ops.push_back(product(OpClass::Gemm, T, h, 4 * hp, 1, bpv));         // MLP down
  }
  ops.push_back(stream(OpClass::Elementwise, residual_add, 2));  // dropout + residual
}

void residual_ops(std::vector<Op>& ops, const LayerSpec& l, double mb, double bpv) {
  const double si = l.spatial, so = si / l.stride, pi = si * si, po = so * so;
  const double in = l.in_channels, mid = l.mid_channels, out = l.out_channels;
  if (mid == 0) {
    conv_bn(ops, mb, in, out, 3, po, bpv, true, l.stride);
    conv_bn(ops, mb, out, out, 3, po, bpv, false);
  } else {  // v1.5 bottleneck: the stride on the 3x3 conv
    conv_bn(ops, mb, in, mid, 1, pi, bpv, true);
    conv_bn(ops, mb, mid, mid, 3, po, bpv, true, l.stride);
    conv_bn(ops, mb, mid, out, 1, po, bpv, false);
  }
  if (in != out || l.stride != 1) conv_bn(ops, mb, in, out, 1, po, bpv, false);  // projection
  ops.push_back(stream(OpClass::Elementwise, 5 * mb * out * po * bpv, 2));     // add + ReLU
}

// A CycleGAN layer over `images` images (its parts: gan_parts): its
// convolution(s) as implicit GEMMs and the passes over the activations:
// nearest upsampling (read, write 4x), reflection padding (a copy), instance
// norm (statistics, then normalize: 3 passes), the activation (2), the
// residual add (3).
void gan_ops(std::vector<Op>& ops, const LayerSpec& l, double images, double bpv) {
  const GanParts g = gan_parts(l);
  const double in = l.in_channels, out = l.out_channels, k = l.kernel, si = l.spatial;
  const double pixels = double(g.out_spatial) * g.out_spatial;
  if (g.upsample) ops.push_back(stream(OpClass::Elementwise, images * in * (si * si + pixels) * bpv, 1));
  for (int c = 0; c < g.convs; ++c) {
    if (g.reflect_pad) ops.push_back(stream(OpClass::Elementwise, 2 * images * in * pixels * bpv, 1));
    ops.push_back(product(OpClass::Conv, images * pixels, out, in * k * k, 1, bpv));
    ops.back().winograd = k == 3 && g.conv_stride == 1;
    const bool act = g.activation != GanActivation::None && c == 0;
    const double passes = (g.norm ? 3 : 0) + (act ? 2 : 0);
    if (passes > 0)
      ops.push_back(stream(OpClass::Elementwise, passes * images * out * pixels * bpv, (g.norm ? 2 : 0) + (act ? 1 : 0)));
  }
  if (g.convs == 2) ops.push_back(stream(OpClass::Elementwise, 3 * images * out * pixels * bpv, 1));  // + input
  if (l.kind == "gan_disc_out") ops.push_back(stream(OpClass::Loss, 3 * images * pixels * bpv, 2));  // MSE
}

}  // namespace

std::vector<Op> layer_ops(const ModelSpec& m, const LayerSpec& l, double samples, int tp_in) {
  const double mb = samples * std::max(1, l.passes);  // images (sequences) through the layer
  const double tp = l.tensor_parallel ? std::max(1, tp_in) : 1;
  const double bpv = m.bytes_per_value;
  std::vector<Op> ops;
  if ((l.kind == "decoder" || l.kind == "moe_decoder") && m.hidden > 0) {
    decoder_ops(ops, m, l, mb, tp);
  } else if (l.kind == "embedding" && m.hidden > 0) {
    // The table is fp32 under autocast: the gather and the stream are at `rb`.
    const double T = mb * m.seq, h = m.hidden, rb = residual_bytes(m);
    ops.push_back(stream(OpClass::Embedding, 2 * T * h / tp * rb + 8 * T, 1));  // gather
    ops.push_back(stream(OpClass::Elementwise, 3 * T * h * rb, 2));           // + positions, dropout
  } else if (l.kind == "head" && m.hidden > 0 && m.vocab > 0) {
    // Each tensor-parallel rank holds a whole number of vocabulary rows (the last one padded).
    const double T = mb * m.seq, h = m.hidden, v = std::ceil(static_cast<double>(m.vocab) / tp);
    ops.push_back(layer_norm(T * h, bpv, residual_bytes(m)));  // final layer norm
    ops.push_back(product(OpClass::Gemm, T, v, h, 1, bpv));    // logits
    // Cross-entropy: log-softmax in fp32 (read logits, write fp32), the loss
    // gather; 16-bit logits are first cast to an fp32 copy (autocast's fp32 list).
    const bool cast = bpv < 4;
    ops.push_back(stream(OpClass::Loss, T * v * (bpv + 8 + (cast ? bpv + 4 : 0)), cast ? 4 : 3));
  } else if (l.kind == "conv" && l.out_channels > 0) {
    const bool imagenet = l.stride > 1;
    const double out = l.out_channels, img = m.image > 0 ? m.image : l.spatial;
    const double ho = imagenet ? img / 2 : img;
    conv_bn(ops, mb, 3, out, imagenet ? 7 : 3, ho * ho, bpv, true);
    if (imagenet) ops.push_back(stream(OpClass::Elementwise, mb * out * ho * ho * bpv * 1.25, 1));  // max pool
  } else if (l.kind == "residual_block" && l.out_channels > 0) {
    residual_ops(ops, l, mb, bpv);
  } else if (l.kind.rfind("gan_", 0) == 0 && l.kernel > 0 && l.out_channels > 0) {
    gan_ops(ops, l, mb, bpv);
  } else if (l.kind == "head" && l.in_channels > 0) {  // image classifier: pool, linear, loss
    const double c = l.in_channels, sp = l.spatial, n = l.out_channels;
    ops.push_back(stream(OpClass::Elementwise, mb * c * (sp * sp + 1) * bpv, 1));
    ops.push_back(product(OpClass::Gemm, mb, n, c, 1, bpv));
    ops.push_back(stream(OpClass::Loss, mb * n * (bpv + 8), 3));
  } else if (l.kind == "lstm" && m.hidden > 0) {
    // cuDNN's LSTM: the input product of every step at once, then one
    // recurrent product and one fused gate kernel per step, in sequence (a
    // step's GEMM is small: its efficiency is that of one (mb x 4h x h)).
    const double h = m.hidden, s = m.seq;
    ops.push_back(product(OpClass::Gemm, mb * s, 4 * h, h, 1, bpv));
    Op rec = product(OpClass::Gemm, mb, 4 * h, h, 1, bpv, static_cast<int>(s));
    rec.flops *= s;
    rec.bytes *= s;
    ops.push_back(rec);
    ops.push_back(stream(OpClass::Elementwise, s * mb * 4 * h * bpv * 3, static_cast<int>(s)));
  } else if ((l.kind == "dense" || l.kind == "dense_head") && l.in_channels > 0) {
    const double in = l.in_channels, out = l.out_channels;
    ops.push_back(stream(OpClass::Elementwise, 3 * mb * in * bpv, 1));  // input dropout / normalization
    ops.push_back(product(OpClass::Gemm, mb, out, in, 1, bpv));
    if (l.kind == "dense") ops.push_back(stream(OpClass::Elementwise, 2 * mb * out * bpv, 1));  // tanh
    else ops.push_back(stream(OpClass::Loss, mb * out * (bpv + 8), 3));  // logistic loss per item
  } else {  // unknown structure: one square GEMM of the FLOPs, one pass over the activations
    const double f = l.flops_per_sample * mb / tp;
    if (f > 0) {
      const double side = std::cbrt(f / 2);
      ops.push_back(product(OpClass::Gemm, side, side, side, 1, bpv));
    }
    ops.push_back(stream(OpClass::Elementwise, 2 * l.activation_bytes_per_sample * mb / tp, 1));
  }
  return ops;
}

bool fused_attention(const ModelSpec& m, const GpuSpec& g) {
  if (m.attention != Attention::Auto) return m.attention == Attention::Fused;
  const bool transformer = (m.family == "gpt" || m.family == "moe") && m.hidden > 0;
  // PyTorch 2's scaled_dot_product_attention: flash for 16-bit on Ampere and
  // newer, else the memory-efficient (CUTLASS) kernel, which also takes fp32
  // (what ran for the fp32 and TF32 rows of h100.csv); both fused.
  const bool fused_arch = g.arch == "volta" || g.arch == "turing" || g.arch == "ampere" || g.arch == "ada" ||
                          g.arch == "hopper";
  return transformer && fused_arch;
}

// Winograd's speedup on an fp32 3x3 stride-1 convolution, Maxwell and newer
// (cuDNN 5 added the transform for 3x3 filters; cuDNN's heuristics, or timing
// under cudnn.benchmark, pick it). Fitted on the Pascal/Volta ResNet
// calibration rows; the K80's rows reject it (docs/estimator.md, "Winograd,
// and the K80's wide SMX").
constexpr double kWinograd = 1.4;

const Efficiency& efficiency_of(const GpuSpec& g) {
  // Calibrated on the `calibration` rows of examples/data/gpu_measurements/
  // (docs/estimator.md: which rows, and the errors before and after).
  static const std::map<std::string, Efficiency> by_arch = {
      {"kepler", {0.55, 0.55, 0.80, 0.60, 10, 1.0, 3.0}},
      {"pascal", {0.85, 0.85, 0.85, 0.80, 10, kWinograd}},
      {"volta", {0.88, 0.52, 0.85, 0.80, 10, kWinograd}},
      {"turing", {0.85, 0.60, 0.85, 0.80, 10, kWinograd}},
      {"ampere", {0.88, 0.72, 0.85, 0.80, 10, kWinograd}},
      {"ada", {0.85, 0.62, 0.85, 0.80, 10, kWinograd}},
      {"hopper", {0.85, 0.62, 0.80, 0.80, 10, kWinograd}},
      {"cpu", {0.50, 0.50, 0.50, 0.50, 10, 1.0}},
  };
  // Power-limited boards sustain clocks well below the datasheet boost.
  static const std::map<std::string, Efficiency> by_name = {
      {"a10", {0.80, 0.55, 0.85, 0.80, 10, kWinograd}},
      {"a40", {0.85, 0.65, 0.85, 0.80, 10, kWinograd}},
      {"t4", {0.75, 0.50, 0.85, 0.75, 10, kWinograd}},
  };
  if (auto it = by_name.find(g.name); it != by_name.end()) return it->second;
  if (auto it = by_arch.find(g.arch); it != by_arch.end()) return it->second;
  return by_arch.at("cpu");
}

namespace {

struct Tile {
  double m, n, per_sm, efficiency;  // CTAs resident per SM, efficiency of the tile's inner loop
};

// cuBLAS/cuDNN pick among tiles like these by the problem shape.
constexpr Tile kTiles[] = {
    {256, 128, 1, 1.00}, {128, 128, 2, 0.95}, {128, 64, 2, 0.88}, {64, 64, 4, 0.72}, {32, 32, 8, 0.40}};

// A short reduction dimension cannot hide the tile's prologue and epilogue.
constexpr double kHalfK = 32;

// Split-K slices keep at least this much of the reduction each.
constexpr double kMinSliceK = 2048;

}  // namespace

bool tensor_core_aligned(double size) { return std::fmod(size, 8) == 0; }

std::vector<double> unaligned_sizes(const Op& op) {
  // n and k only: every GEMM here has the tokens (or samples) as m, which is
  // no leading dimension of the forward product nor of either backward one
  // (X W^T, dY W and dY^T X load rows of k or n values), so an odd batch
  // costs tile quantization, priced elsewhere, not the 16-byte loads.
  std::vector<double> odd;
  for (const double d : {op.n, op.k})
    if (!tensor_core_aligned(d)) odd.push_back(d);
  return odd;
}

bool unaligned_16bit(const GpuSpec& g, Precision p, const Op& op) {
  if ((p != Precision::FP16 && p != Precision::BF16) || !g.tensor_cores()) return false;
  return !unaligned_sizes(op).empty();
}

namespace {

bool on_tensor_cores(const GpuSpec& g, Precision p) { return p != Precision::FP32 && g.tensor_cores(); }

// The best share of the precision's peak a large GEMM reaches on `g` (whose
// constants are `e`).
double top_gemm_efficiency(const GpuSpec& g, const Efficiency& e, Precision p) {
  // TF32 kernels reach a smaller share of their peak than fp16/bf16 ones.
  return on_tensor_cores(g, p) ? e.gemm_tensor * (p == Precision::TF32 ? kTf32Share : 1.0) : e.gemm_fp32;
}

}  // namespace

double gemm_efficiency(const GpuSpec& g, Precision p, double m, double n, double k, double batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  const Efficiency& e = efficiency_of(g);
  const double top = top_gemm_efficiency(g, e, p);
  // CUDA-core GEMMs fill an SM by its FP32 lanes (Efficiency::sm_width).
  const double sms = std::max(1, g.sm_count) * (on_tensor_cores(g, p) ? 1.0 : e.sm_width);
  double best = 0;
  for (const Tile& t : kTiles) {
    const double tm = std::ceil(m / t.m), tn = std::ceil(n / t.n);
    const double tiles = tm * tn * batch;
    const double slots = sms * t.per_sm;
    const double padding = (m * n) / (tm * t.m * tn * t.n);
    // Split-K: when the output has too few tiles to fill the GPU, the
    // reduction is cut into `split` slices that run as tiles of their own
    // (then summed; that pass is small beside the operands and not priced).
    const int max_split = tiles < slots ? static_cast<int>(std::min(slots / tiles, std::floor(k / kMinSliceK))) : 1;
    for (int split = 1; split <= std::max(1, max_split); ++split) {
      const double all = tiles * split, slice = k / split;
      const double waves = std::ceil(all / slots);
      const double wave = all / (waves * slots);
      best = std::max(best, t.efficiency * padding * wave * slice / (slice + kHalfK));
    }
  }
  return top * best;
}

double op_time_ms(const GpuSpec& g, Precision p, const Op& op, bool backward) {
  const Efficiency& e = efficiency_of(g);
  const bool product = op.cls == OpClass::Gemm || op.cls == OpClass::Attention || op.cls == OpClass::Conv;
  const double f = !backward ? 1.0 : op.fused ? kFusedAttentionBackward : product ? kBackwardFactor : kBackwardMemoryFactor;
  double compute_s = 0;
  if (op.fused) {
    compute_s = op.flops * f / (matmul_peak_tflops(g, p) * 1e12 * top_gemm_efficiency(g, e, p) * kFusedAttentionShare);
  } else if (product) {
    double eff = gemm_efficiency(g, p, op.m, op.n, op.k, op.batch);
    if (op.cls == OpClass::Conv) eff *= e.conv;
    if (op.winograd && p == Precision::FP32) eff *= e.winograd;
    double rate = matmul_peak_tflops(g, p) * eff;
    if (op.cls == OpClass::Gemm && unaligned_16bit(g, p, op))
      rate = std::max(rate * kUnalignedShare,
                      g.cuda_fp16_tflops * gemm_efficiency(g, Precision::FP32, op.m, op.n, op.k, op.batch));
    if (rate > 0) compute_s = op.flops * f / (rate * 1e12);
  } else if (op.flops > 0) {
    compute_s = op.flops * f / (g.fp32_tflops * 1e12 * e.gemm_fp32);
  }
  const double memory_s = op.bytes * f / (g.memory_gbps * 1e9 * e.memory);
  return std::max(compute_s, memory_s) * 1000.0;
}

double optimizer_step_ms(const GpuSpec& g, double params, double bytes_per_param, double tensors) {
  const Efficiency& e = efficiency_of(g);
  const double stream_ms = params * bytes_per_param / (g.memory_gbps * 1e9 * e.memory) * 1000.0;
  const double issue_ms = std::ceil(tensors / 8) * e.issue_us / 1000.0;
  return std::max(stream_ms, issue_ms);
}

double layer_param_tensors(const LayerSpec& l) {
  if (l.kind == "decoder") return 12;  // 4 linear layers (weight, bias), 2 layer norms
  if (l.kind == "moe_decoder") return 9 + 4.0 * std::max(1, l.mid_channels);
  if (l.kind == "residual_block") return (l.mid_channels ? 9 : 6) + (l.in_channels != l.out_channels ? 3 : 0);
  if (l.kind == "embedding") return 2;
  if (l.kind == "lstm") return 4;
  if (l.kind == "head") return 3;
  if (l.kind == "gan_residual") return 4;  // two convolutions (weight, bias); instance norm has none
  return 2;
}

}  // namespace cellsched::estimator
