// Model descriptions: a model as a sequence of layers with analytic sizes.
// The profiler builds real LibTorch modules from these; the estimator prices
// plans with them. No LibTorch here.
#pragma once

#include <string>
#include <vector>

#include "core/gpu.h"

namespace cellsched {

struct LayerSpec {
  std::string name;        // "block.7", "embedding", "head"
  std::string kind;        // "embedding", "decoder", "moe_decoder", "head", "conv", "residual_block", "lstm",
                           // "dense", "dense_head", "gan_conv", "gan_up", "gan_residual", "gan_out",
                           // "gan_disc", "gan_disc_out", "torchscript"
  // Layers with equal shape_key have identical shapes and are profiled once.
  std::string shape_key;
  double params = 0;                  // parameter count
  double flops_per_sample = 0;        // forward FLOPs for one sample (sequence / image)
  double activation_bytes_per_sample = 0;  // output activation sent to the next layer, one sample
  double saved_bytes_per_sample = 0;       // activations kept for backward, one sample
  bool tensor_parallel = false;       // can be split 1/2/4/8-way (Megatron-style)
  // Convolutional layers (wrn): channels, stride and input height = width.
  // "bottleneck" blocks use mid_channels; "basic" blocks leave it 0.
  int in_channels = 0, mid_channels = 0, out_channels = 0, stride = 1, spatial = 0;
  int kernel = 0;  // gan_* convolutions: the kernel's height = width
  // Images (sequences) the layer runs per sample: a CycleGAN sample is one
  // pair of images, and each generator translates, cycles back and maps an
  // identity (3 passes), each discriminator judges 3 images. Per-sample sizes
  // above include the passes; the profiler feeds micro-batch x passes inputs.
  int passes = 1;
};

// How a CycleGAN layer (kind "gan_*") runs, derived from its kind and sizes:
// the builder sizes it, the estimator prices it and the profiler builds it
// from these parts.
enum class GanActivation { None, Relu, LeakyRelu, Tanh };
struct GanParts {
  int convs = 1;            // 2 for a residual block
  int conv_stride = 1;
  int out_spatial = 0;      // output height = width
  bool upsample = false;    // nearest x2 before the convolution
  int reflect_pad = 0;      // reflection padding on each side (7x7 convolutions, residual blocks)
  bool norm = false;        // instance norm after each convolution
  // After the (first) convolution; a residual block's second one is added to its input instead.
  GanActivation activation = GanActivation::None;
};
GanParts gan_parts(const LayerSpec& l);

// How attention is computed: Unfused materializes the score matrices (softmax,
// masking and dropout as separate kernels, the scores saved for backward);
// Fused is a FlashAttention-style kernel (no score matrix in memory, the
// forward recomputed in backward). Auto: fused for 16-bit training on
// Volta and newer, as PyTorch 2's scaled_dot_product_attention dispatches.
enum class Attention { Auto, Unfused, Fused };

struct ModelSpec {
  std::string name;     // "gpt-350m", "moe-1.3b", "wrn-50-2", or a file name
  std::string family;   // "gpt", "moe", "wrn", "lstm", "autoencoder", "cyclegan", "torchscript"
  // Family parameters (0 where they do not apply).
  int hidden = 0, num_layers = 0, heads = 0, seq = 0, vocab = 0;
  int experts = 0, top_k = 0;              // moe
  int depth = 0, width_factor = 0, image = 0, classes = 0;  // wrn
  std::string torchscript_path;            // torchscript
  std::vector<int> input_shape;            // torchscript: one sample's input shape (float)
  int bytes_per_value = 4;                 // 4 = fp32 (CPU), 2 = fp16/bf16
  // Training precision as the model asks (YAML `precision:`); Default = the
  // device's default (see resolve_precision). bytes_per_value 2 without a
  // precision reads as fp16.
  Precision precision = Precision::Default;
  Attention attention = Attention::Auto;   // gpt/moe: YAML `attention: auto|fused|unfused`
  bool fused_attention = false;            // how the layers are sized and priced (with_attention)
  std::vector<LayerSpec> layers;           // in forward order

  double total_params() const;
};

// The model trained at a resolved precision (not Default): bytes_per_value
// and every layer's activation and saved bytes rescaled to its value size.
ModelSpec with_precision(ModelSpec m, Precision p);

// The model with its layers sized for fused or unfused attention (they are
// built unfused): fused attention saves no score matrices (each attention
// layer's saved bytes lose their heads x seq^2 term and gain the softmax
// statistics).
ModelSpec with_attention(ModelSpec m, bool fused);

// Names of the built-in zoo ("gpt-125m" ... "gpt-13b", "gpt-tiny", "moe-*", "wrn-*").
std::vector<std::string> zoo_names();

// A zoo model by name; throws InputError listing the names when unknown.
ModelSpec model_by_name(const std::string& name);

// A model from YAML (family and its parameters, e.g. `family: gpt, hidden: 1024,
// num_layers: 24, heads: 16, seq: 1024, vocab: 50257`); `file:line:` errors.
ModelSpec load_model_yaml(const std::string& path);

// A zoo name, a .yaml path, or a TorchScript file (.pt/.pth/.ts): the last
// comes back with family "torchscript" and no layers (the profiler reads them).
ModelSpec load_model(const std::string& name_or_path);

}  // namespace cellsched
