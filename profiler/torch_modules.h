// The LibTorch modules the compute profiler builds from a ModelSpec's layers:
// one module per layer kind (or tensor-parallel shard of one). Internal to
// profiler/torch_compute.cc, the one translation unit of the compute path
// that includes LibTorch; include it nowhere else.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/model.h"

namespace cellsched::profiler::detail {

using torch::Tensor;

// A layer as the profiler sees it: one input tensor, one output tensor.
struct Layer : torch::nn::Module {
  virtual Tensor forward(Tensor x) = 0;
};

// Causal self-attention (heads_shard heads of width d) and the dense or
// mixture-of-experts MLP of one tensor-parallel shard of a decoder block.
struct DecoderShard : Layer {
  DecoderShard(int h, int heads_shard, int d, int seq, int ffn, int experts, int top_k)
      : heads(heads_shard), head_dim(d), top_k(top_k) {
    const int hs = heads_shard * d;
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
    qkv = register_module("qkv", torch::nn::Linear(h, 3 * hs));
    proj = register_module("proj", torch::nn::Linear(hs, h));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
    if (experts == 0) {
      fc1.push_back(register_module("fc1", torch::nn::Linear(h, ffn)));
      fc2.push_back(register_module("fc2", torch::nn::Linear(ffn, h)));
    } else {
      router = register_module("router", torch::nn::Linear(h, experts));
      for (int e = 0; e < experts; ++e) {
        fc1.push_back(register_module("expert" + std::to_string(e) + "_fc1", torch::nn::Linear(h, ffn)));
        fc2.push_back(register_module("expert" + std::to_string(e) + "_fc2", torch::nn::Linear(ffn, h)));
      }
    }
    mask = register_buffer("mask", torch::ones({seq, seq}, torch::kBool).triu(1));
  }

  Tensor attention(const Tensor& x) {
    const int64_t b = x.size(0), s = x.size(1);
    auto parts = qkv(ln1(x)).view({b, s, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
    Tensor q = parts[0], k = parts[1], v = parts[2];
    Tensor att = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(head_dim));
    att = torch::softmax(att.masked_fill(mask, -std::numeric_limits<float>::infinity()), -1);
    Tensor o = torch::matmul(att, v).transpose(1, 2).reshape({b, s, heads * head_dim});
    return proj(o);
  }

  Tensor mlp(const Tensor& y) {
    if (!router) return fc2[0](torch::gelu(fc1[0](y)));
    const auto shape = y.sizes().vec();
    Tensor t = y.reshape({-1, y.size(-1)});
    auto [w, idx] = torch::topk(torch::softmax(router(t), -1), top_k, -1);
    Tensor out = torch::zeros_like(t);
    for (size_t e = 0; e < fc1.size(); ++e) {
      Tensor hit = idx.eq(static_cast<int64_t>(e));
      Tensor sel = hit.any(1).nonzero().squeeze(1);
      if (sel.numel() == 0) continue;
      Tensor gate = (w * hit).sum(1).index_select(0, sel).unsqueeze(1);
      Tensor ye = fc2[e](torch::gelu(fc1[e](t.index_select(0, sel)))) * gate;
      out = out.index_add(0, sel, ye);
    }
    return out.view(shape);
  }

  Tensor forward(Tensor x) override {
    x = x + attention(x);
    return x + mlp(ln2(x));
  }

  int64_t heads, head_dim, top_k;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, router{nullptr};
  std::vector<torch::nn::Linear> fc1, fc2;
  Tensor mask;
};

// Token + position embedding; a vocabulary-parallel shard holds vocab_shard rows.
struct EmbeddingShard : Layer {
  EmbeddingShard(int vocab_shard, int h, int seq) {
    tok = register_module("tok", torch::nn::Embedding(vocab_shard, h));
    pos = register_module("pos", torch::nn::Embedding(seq, h));
  }
  Tensor forward(Tensor ids) override {
    return tok(ids) + pos(torch::arange(ids.size(1), ids.options()));
  }
  torch::nn::Embedding tok{nullptr}, pos{nullptr};
};

// Final layer norm and the (vocabulary-parallel) output projection.
struct LmHeadShard : Layer {
  LmHeadShard(int h, int vocab_shard) {
    ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
    out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(h, vocab_shard).bias(false)));
  }
  Tensor forward(Tensor x) override { return out(ln(x)); }
  torch::nn::LayerNorm ln{nullptr};
  torch::nn::Linear out{nullptr};
};

inline torch::nn::Conv2d conv(int in, int out, int k, int stride) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

struct WrnStem : Layer {
  WrnStem(int out_channels, bool imagenet) : imagenet(imagenet) {
    c = register_module("conv", imagenet ? conv(3, out_channels, 7, 2) : conv(3, out_channels, 3, 1));
    bn = register_module("bn", torch::nn::BatchNorm2d(out_channels));
  }
  Tensor forward(Tensor x) override {
    x = c(x);
    if (!imagenet) return x;
    return torch::max_pool2d(torch::relu(bn(x)), 3, 2, 1);
  }
  bool imagenet;
  torch::nn::Conv2d c{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
};

// Pre-activation basic block (WRN-d-k) or bottleneck block (WRN-50-2).
struct ResidualBlock : Layer {
  ResidualBlock(int in, int mid, int out, int stride) : bottleneck(mid > 0) {
    if (!bottleneck) {
      bn1 = register_module("bn1", torch::nn::BatchNorm2d(in));
      c1 = register_module("conv1", conv(in, out, 3, stride));
      bn2 = register_module("bn2", torch::nn::BatchNorm2d(out));
      c2 = register_module("conv2", conv(out, out, 3, 1));
    } else {
      c1 = register_module("conv1", conv(in, mid, 1, 1));
      bn1 = register_module("bn1", torch::nn::BatchNorm2d(mid));
      c2 = register_module("conv2", conv(mid, mid, 3, stride));
      bn2 = register_module("bn2", torch::nn::BatchNorm2d(mid));
      c3 = register_module("conv3", conv(mid, out, 1, 1));
      bn3 = register_module("bn3", torch::nn::BatchNorm2d(out));
    }
    if (in != out || stride != 1) shortcut = register_module("shortcut", conv(in, out, 1, stride));
  }
  Tensor forward(Tensor x) override {
    if (!bottleneck) {
      Tensor o = torch::relu(bn1(x));
      Tensor skip = shortcut ? shortcut(o) : x;
      o = c2(torch::relu(bn2(c1(o))));
      return o + skip;
    }
    Tensor o = torch::relu(bn1(c1(x)));
    o = torch::relu(bn2(c2(o)));
    o = bn3(c3(o));
    return torch::relu(o + (shortcut ? shortcut(x) : x));
  }
  bool bottleneck;
  torch::nn::Conv2d c1{nullptr}, c2{nullptr}, c3{nullptr}, shortcut{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
};

struct WrnHead : Layer {
  WrnHead(int channels, int classes) { fc = register_module("fc", torch::nn::Linear(channels, classes)); }
  Tensor forward(Tensor x) override {
    return fc(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  torch::nn::Linear fc{nullptr};
};

// One LSTM layer over a [batch, seq, hidden] sequence (Gavel's LM).
struct LstmLayer : Layer {
  explicit LstmLayer(int h) {
    lstm = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(h, h).batch_first(true)));
  }
  Tensor forward(Tensor x) override { return std::get<0>(lstm->forward(x)); }
  torch::nn::LSTM lstm{nullptr};
};

// A fully connected layer, tanh after it unless it is the output (Gavel's
// Recommendation autoencoder).
struct DenseLayer : Layer {
  DenseLayer(int in, int out, bool output) : output(output) {
    fc = register_module("fc", torch::nn::Linear(in, out));
  }
  Tensor forward(Tensor x) override { return output ? fc(x) : torch::tanh(fc(x)); }
  torch::nn::Linear fc{nullptr};
  bool output;
};

// A CycleGAN layer (PyTorch-GAN's ResNet generators and PatchGAN
// discriminators), built from its parts (gan_parts): [nearest upsampling x2],
// [reflection padding], a k x k convolution, [instance norm], the activation.
// A residual block is two padded convolutions with norms and a ReLU between,
// added to its input; the discriminators' output layer pads (1, 0, 1, 0) first.
struct GanLayer : Layer {
  explicit GanLayer(const LayerSpec& l) : parts(gan_parts(l)), disc_out(l.kind == "gan_disc_out") {
    const int pad = parts.reflect_pad ? 0 : l.kernel == 4 ? 1 : l.kernel / 2;
    c1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(l.in_channels, l.out_channels, l.kernel)
                                                        .stride(parts.conv_stride)
                                                        .padding(pad)));
    if (parts.convs == 2)
      c2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(l.out_channels, l.out_channels, l.kernel)));
  }
  Tensor forward(Tensor x) override {
    namespace F = torch::nn::functional;
    const int64_t r = parts.reflect_pad;
    auto padded = [r](const Tensor& t) {
      return r ? F::pad(t, F::PadFuncOptions({r, r, r, r}).mode(torch::kReflect)) : t;
    };
    auto norm = [this](const Tensor& t) { return parts.norm ? F::instance_norm(t, F::InstanceNormFuncOptions()) : t; };
    if (parts.upsample)
      x = F::interpolate(x, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2, 2}).mode(torch::kNearest));
    if (disc_out) x = F::pad(x, F::PadFuncOptions({1, 0, 1, 0}));
    Tensor y = norm(c1(padded(x)));
    switch (parts.activation) {
      case GanActivation::Relu: y = torch::relu(y); break;
      case GanActivation::LeakyRelu: y = torch::leaky_relu(y, 0.2); break;
      case GanActivation::Tanh: y = torch::tanh(y); break;
      case GanActivation::None: break;
    }
    return c2 ? x + norm(c2(padded(y))) : y;
  }
  GanParts parts;
  bool disc_out;
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
};

// One top-level child of a TorchScript module.
struct ScriptedLayer : Layer {
  explicit ScriptedLayer(torch::jit::Module m) : module(std::move(m)) {}
  Tensor forward(Tensor x) override { return module.forward({x}).toTensor(); }
  std::vector<Tensor> params() {
    std::vector<Tensor> p;
    for (const auto& t : module.parameters()) p.push_back(t);
    return p;
  }
  torch::jit::Module module;
};

// The share of `n` that shard 0 of `tp` holds (the largest one).
inline int shard_of(int n, int tp) { return (n + tp - 1) / tp; }

}  // namespace cellsched::profiler::detail
