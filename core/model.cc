// The analytic model zoo: GPT-style decoders, a mixture-of-experts variant and
// Wide-ResNets, described layer by layer with parameter counts, FLOPs and
// activation sizes. The profiler builds LibTorch modules from the same specs.
#include "core/model.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include "core/error.h"
#include "core/model_build.h"
#include "core/parse_util.h"

namespace cellsched {

double ModelSpec::total_params() const {
  return std::accumulate(layers.begin(), layers.end(), 0.0,
                         [](double s, const LayerSpec& l) { return s + l.params; });
}

namespace {


// ---- GPT ------------------------------------------------------------------

// One decoder block (pre-LN): attention QKV + output projection, 4h MLP.
// Parameters 12h^2 + 13h; forward FLOPs per sequence 24 s h^2 + 4 s^2 h
// (matmuls only, 2 FLOPs per multiply-add); saved activations per Megatron's
// estimate s h (34 + 5 a s / h) bytes at 2 bytes per value, scaled to bpv.
LayerSpec decoder_layer(const ModelSpec& m, int i) {
  const double h = m.hidden, s = m.seq, a = m.heads, bpv = m.bytes_per_value;
  LayerSpec l;
  l.name = "block." + std::to_string(i);
  l.kind = "decoder";
  l.shape_key = "decoder:h" + std::to_string(m.hidden) + ":a" + std::to_string(m.heads) + ":s" +
                std::to_string(m.seq);
  l.params = 12 * h * h + 13 * h;
  l.flops_per_sample = 24 * s * h * h + 4 * s * s * h;
  l.activation_bytes_per_sample = s * h * bpv;
  l.saved_bytes_per_sample = s * h * (34 + 5 * a * s / h) * bpv / 2;
  l.tensor_parallel = true;
  return l;
}

// A decoder block whose MLP is `experts` experts with top-k routing.
LayerSpec moe_layer(const ModelSpec& m, int i) {
  const double h = m.hidden, s = m.seq, a = m.heads, bpv = m.bytes_per_value;
  const double e = m.experts, k = m.top_k;
  LayerSpec l;
  l.name = "block." + std::to_string(i);
  l.kind = "moe_decoder";
  l.shape_key = "moe:h" + std::to_string(m.hidden) + ":a" + std::to_string(m.heads) + ":s" +
                std::to_string(m.seq) + ":e" + std::to_string(m.experts) + ":k" +
                std::to_string(m.top_k);
  l.params = 4 * h * h + 4 * h + e * (8 * h * h + 5 * h) + h * e + 4 * h;
  l.flops_per_sample = 8 * s * h * h + 4 * s * s * h + k * 16 * s * h * h + 2 * s * h * e;
  l.activation_bytes_per_sample = s * h * bpv;
  l.saved_bytes_per_sample = s * h * (16 + 5 * a * s / h + k * 18) * bpv / 2;
  l.tensor_parallel = true;
  return l;
}

void add_gpt_layers(ModelSpec& m) {
  const double h = m.hidden, s = m.seq, v = m.vocab, bpv = m.bytes_per_value;
  LayerSpec emb;
  emb.name = "embedding";
  emb.kind = "embedding";
  emb.shape_key = "embedding:v" + std::to_string(m.vocab) + ":h" + std::to_string(m.hidden) +
                  ":s" + std::to_string(m.seq);
  emb.params = v * h + s * h;
  emb.flops_per_sample = s * h;  // the position add
  emb.activation_bytes_per_sample = s * h * bpv;
  emb.saved_bytes_per_sample = s * 8;  // token ids
  emb.tensor_parallel = true;          // vocabulary-parallel
  m.layers.push_back(emb);
  for (int i = 0; i < m.num_layers; ++i) {
    // MoE models alternate dense and expert blocks (GShard / Switch style).
    if (m.family == "moe" && i % 2 == 1)
      m.layers.push_back(moe_layer(m, i));
    else
      m.layers.push_back(decoder_layer(m, i));
  }
  LayerSpec head;
  head.name = "head";
  head.kind = "head";
  head.shape_key = "head:v" + std::to_string(m.vocab) + ":h" + std::to_string(m.hidden) + ":s" +
                   std::to_string(m.seq);
  head.params = v * h + 2 * h;  // final layer norm + output projection
  head.flops_per_sample = 2 * s * h * v;
  head.activation_bytes_per_sample = s * v * bpv;  // logits
  head.saved_bytes_per_sample = s * h * bpv + s * v * bpv;
  head.tensor_parallel = true;
  m.layers.push_back(head);
}

ModelSpec gpt(std::string name, int hidden, int layers, int heads, int seq, int vocab) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = "gpt";
  m.hidden = hidden;
  m.num_layers = layers;
  m.heads = heads;
  m.seq = seq;
  m.vocab = vocab;
  return m;
}

// ---- Wide-ResNet ----------------------------------------------------------

double conv_params(double in, double out, double k) { return in * out * k * k; }

// A convolutional layer's FLOPs per image: 2 x params x output pixels.
double conv_flops(double in, double out, double k, double out_spatial) {
  return 2 * conv_params(in, out, k) * out_spatial * out_spatial;
}

std::string conv_key(const LayerSpec& l) {
  return l.kind + ":" + (l.mid_channels ? "bottleneck" : "basic") + ":i" +
         std::to_string(l.in_channels) + ":m" + std::to_string(l.mid_channels) + ":o" +
         std::to_string(l.out_channels) + ":s" + std::to_string(l.stride) + ":x" +
         std::to_string(l.spatial);
}

// Residual block: basic (two 3x3 convs, CIFAR WRN-d-k) or bottleneck (1x1,
// 3x3, 1x1; ImageNet WRN-50-2). A 1x1 projection when the shape changes.
LayerSpec residual_block(const ModelSpec& m, const std::string& name, int in, int mid, int out,
                         int stride, int spatial) {
  LayerSpec l;
  l.name = name;
  l.kind = "residual_block";
  l.in_channels = in;
  l.mid_channels = mid;
  l.out_channels = out;
  l.stride = stride;
  l.spatial = spatial;
  const double so = spatial / stride, si = spatial, bpv = m.bytes_per_value;
  double params = 0, flops = 0, saved = 0;
  if (mid == 0) {
    params = conv_params(in, out, 3) + conv_params(out, out, 3) + 2 * (in + out);  // + BN
    flops = conv_flops(in, out, 3, so) + conv_flops(out, out, 3, so);
    saved = (2 * in * si * si + 3 * out * so * so) * bpv;
  } else {
    params = conv_params(in, mid, 1) + conv_params(mid, mid, 3) + conv_params(mid, out, 1) +
             2 * (2 * mid + out);
    flops = conv_flops(in, mid, 1, si) + conv_flops(mid, mid, 3, so) + conv_flops(mid, out, 1, so);
    saved = (in * si * si + 3 * mid * si * si + 3 * mid * so * so + 2 * out * so * so) * bpv;
  }
  if (in != out || stride != 1) {
    params += conv_params(in, out, 1) + 2 * out;
    flops += conv_flops(in, out, 1, so);
  }
  l.params = params;
  l.flops_per_sample = flops;
  l.activation_bytes_per_sample = out * so * so * bpv;
  l.saved_bytes_per_sample = saved;
  l.shape_key = conv_key(l);
  return l;
}

void add_wrn_layers(ModelSpec& m) {
  const double bpv = m.bytes_per_value;
  const bool imagenet = m.image >= 128;
  LayerSpec stem;
  stem.name = "stem";
  stem.kind = "conv";
  stem.in_channels = 3;
  stem.spatial = m.image;
  int spatial = m.image;
  if (imagenet) {  // 7x7/2 conv, BN, ReLU, 3x3/2 max pool
    stem.out_channels = 64;
    stem.stride = 4;
    stem.params = conv_params(3, 64, 7) + 128;
    stem.flops_per_sample = conv_flops(3, 64, 7, m.image / 2.0);
    spatial = m.image / 4;
  } else {  // 3x3 conv (64 channels for the CIFAR ResNet-18 layout)
    stem.out_channels = m.depth == 18 ? 64 : 16;
    stem.params = conv_params(3, stem.out_channels, 3);
    stem.flops_per_sample = conv_flops(3, stem.out_channels, 3, m.image);
  }
  stem.activation_bytes_per_sample = stem.out_channels * double(spatial) * spatial * bpv;
  stem.saved_bytes_per_sample = 3.0 * m.image * m.image * bpv + 2 * stem.activation_bytes_per_sample;
  stem.shape_key = "conv:stem:o" + std::to_string(stem.out_channels) + ":x" +
                   std::to_string(m.image);
  m.layers.push_back(stem);

  int channels = stem.out_channels;
  if (imagenet) {  // bottleneck stages, ResNet-50 layout [3, 4, 6, 3]
    const int blocks[4] = {3, 4, 6, 3};
    for (int g = 0; g < 4; ++g) {
      const int mid = 64 * (1 << g) * m.width_factor, out = 256 * (1 << g);
      for (int b = 0; b < blocks[g]; ++b) {
        const int stride = (b == 0 && g > 0) ? 2 : 1;
        m.layers.push_back(residual_block(m, "group" + std::to_string(g + 1) + ".block" +
                                                 std::to_string(b),
                                          channels, mid, out, stride, spatial));
        spatial /= stride;
        channels = out;
      }
    }
  } else {  // basic blocks: ResNet-18 on CIFAR (He et al.) [2, 2, 2, 2] at 64k..512k, else WRN
    const bool r18 = m.depth == 18;  // (depth - 4) / 6 per group at 16k, 32k, 64k
    const int groups = r18 ? 4 : 3, n = r18 ? 2 : (m.depth - 4) / 6, base = r18 ? 64 : 16;
    for (int g = 0; g < groups; ++g) {
      const int out = base * (1 << g) * m.width_factor;
      for (int b = 0; b < n; ++b) {
        const int stride = (b == 0 && g > 0) ? 2 : 1;
        m.layers.push_back(residual_block(m, "group" + std::to_string(g + 1) + ".block" +
                                                 std::to_string(b),
                                          channels, 0, out, stride, spatial));
        spatial /= stride;
        channels = out;
      }
    }
  }
  LayerSpec head;
  head.name = "head";
  head.kind = "head";
  head.in_channels = channels;
  head.out_channels = m.classes;
  head.spatial = spatial;
  head.params = double(channels) * m.classes + m.classes;
  head.flops_per_sample = 2.0 * channels * m.classes + double(channels) * spatial * spatial;
  head.activation_bytes_per_sample = m.classes * bpv;
  head.saved_bytes_per_sample = double(channels) * spatial * spatial * bpv;
  head.shape_key = "wrn-head:c" + std::to_string(channels) + ":n" + std::to_string(m.classes) +
                   ":x" + std::to_string(spatial);
  m.layers.push_back(head);
}

ModelSpec wrn(std::string name, int depth, int width, int image, int classes) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = "wrn";
  m.depth = depth;
  m.width_factor = width;
  m.image = image;
  m.classes = classes;
  return m;
}

// torch.autocast keeps a transformer's residual stream and its loss in fp32:
// each layer norm saves an fp32 input (two per block), the embedding's output
// is fp32, and the loss keeps fp32 log-probabilities (and, in backward, fp32
// gradients) of every logit. `sign` adds (+1) or removes (-1) those bytes
// beyond what the layers' formulas count at `bpv`. Measured on an H100:
// GPT-125M's peak memory at bf16 exceeded the 2-byte count by about 8 bytes
// per logit (docs/estimator.md, "H100, measured here").
void autocast_fp32_bytes(ModelSpec& m, int bpv, double sign) {
  if (bpv >= 4 || (m.family != "gpt" && m.family != "moe") || m.hidden <= 0) return;
  const double s = m.seq, h = m.hidden, v = m.vocab, gap = sign * (4 - bpv);
  for (LayerSpec& l : m.layers) {
    if (l.kind == "decoder" || l.kind == "moe_decoder") {
      l.saved_bytes_per_sample += 2 * s * h * gap;
    } else if (l.kind == "embedding") {
      l.activation_bytes_per_sample += s * h * gap;
    } else if (l.kind == "head") {
      l.saved_bytes_per_sample += s * v * gap;
      l.activation_bytes_per_sample += s * v * gap;
    }
  }
}

ModelSpec unfused(ModelSpec m) {
  m.attention = Attention::Unfused;
  return m;
}

const std::map<std::string, ModelSpec>& zoo() {
  static const std::map<std::string, ModelSpec> z = [] {
    std::vector<ModelSpec> v = {
        // GPT-3 paper sizes (Brown et al., Table 2.1) with 128-wide heads
        // past 1.3B as in Megatron; GPT-2's vocabulary and 1024 tokens.
        gpt("gpt-125m", 768, 12, 12, 1024, 50257),
        gpt("gpt-350m", 1024, 24, 16, 1024, 50257),
        gpt("gpt-760m", 1536, 24, 16, 1024, 50257),
        gpt("gpt-1.3b", 2048, 24, 16, 1024, 50257),
        gpt("gpt-2.7b", 2560, 32, 32, 1024, 50257),
        gpt("gpt-6.7b", 4096, 32, 32, 1024, 50257),
        gpt("gpt-13b", 5120, 40, 40, 1024, 50257),
        gpt("gpt-tiny", 64, 4, 4, 32, 512),  // for tests: profiles in well under a second
        // For `cellsched validate` on a CPU: layers of tens of milliseconds
        // (compute dominates framework overhead), iterations of ~0.3 s.
        gpt("gpt-cpu", 384, 4, 6, 128, 2048),
        wrn("wrn-50-2", 50, 2, 224, 1000),
        wrn("wrn-28-10", 28, 10, 32, 10),
        wrn("wrn-tiny", 10, 1, 16, 10),
        // The image models of Gavel's measured table: ResNet-50 on ImageNet
        // (WRN-50 at width 1 is ResNet-50 v1.5) and ResNet-18 on CIFAR-10.
        wrn("resnet-50", 50, 1, 224, 1000),
        wrn("resnet-18", 18, 1, 32, 10),
        // The other models of Gavel's table (stanford-futuredata/gavel
        // workloads/pytorch, fp32). Transformer: attention-is-all-you-need-
        // pytorch on Multi30k, d_model 512, 8 heads, FFN 2048, 6 encoder and
        // 6 decoder layers; a decoder layer (self- and cross-attention, 16
        // d^2 weights) is priced as 4/3 of a block, so 14 blocks; sentences
        // padded to the preprocessing's maximum of 52 tokens (max_len 50 +
        // BOS/EOS); a 5,000-word target vocabulary (the source embedding, a
        // lookup, is not priced). Its code predates fused attention kernels.
        unfused(gpt("transformer", 512, 14, 8, 52, 5000)),
        // LM: PyTorch's word-language-model LSTM on WikiText-2 (emsize =
        // nhid = 200, 2 layers, bptt 35, 33,278 words, untied).
        detail::lstm("lm", 200, 2, 35, 33278),
        // Recommendation: recoder's autoencoder on MovieLens-20M, one hidden
        // layer of 200 (tanh) over the 20,108 items of the usual
        // preprocessing, every item scored (an upper bound: Gavel's runs
        // sample negatives, scoring only the batch's items).
        detail::autoencoder("recommendation", 20108, 200),
        // CycleGAN: PyTorch-GAN's implementation as Gavel runs it (monet2photo
        // at 256 x 256, 9 residual blocks, 64 channels first, batch 1).
        detail::cyclegan("cyclegan", 256, 9, 64),
    };
    auto moe = [](std::string name, int hidden, int layers, int heads, int seq, int vocab,
                  int experts, int top_k) {
      ModelSpec m = gpt(std::move(name), hidden, layers, heads, seq, vocab);
      m.family = "moe";
      m.experts = experts;
      m.top_k = top_k;
      return m;
    };
    v.push_back(moe("moe-350m-8e", 1024, 24, 16, 1024, 50257, 8, 2));
    v.push_back(moe("moe-1.3b-8e", 2048, 24, 16, 1024, 50257, 8, 2));
    v.push_back(moe("moe-tiny", 64, 4, 4, 32, 512, 4, 2));
    std::map<std::string, ModelSpec> out;
    for (ModelSpec& m : v) {
      detail::build_layers(m, "<zoo>", detail::FieldLines{});
      out.emplace(m.name, std::move(m));
    }
    return out;
  }();
  return z;
}


}  // namespace

namespace detail {

void build_layers(ModelSpec& m, const std::string& file, const FieldLines& lines) {
  auto need = [&](bool ok, std::initializer_list<const char*> keys, const std::string& what) {
    if (!ok) fail_input(file, lines.of(keys), m.name + ": " + what);
  };
  // Each named field > 0: the first that is not is named at its line, or as
  // missing where the file left it out (a field left out reads 0).
  auto positive = [&](std::initializer_list<std::pair<const char*, int>> fields) {
    for (const auto& [key, value] : fields) {
      if (value > 0) continue;
      if (lines.root > 0 && !lines.has(key)) fail_input(file, lines.root, m.name + ": missing field '" + key + "'");
      fail_input(file, lines.of({key}), m.name + ": '" + std::string(key) + "' must be positive");
    }
  };
  need(m.bytes_per_value == 2 || m.bytes_per_value == 4, {"bytes_per_value", "precision"},
       "bytes_per_value must be 2 or 4");
  m.layers.clear();
  if (m.family == "gpt" || m.family == "moe") {
    positive({{"hidden", m.hidden}, {"num_layers", m.num_layers}, {"heads", m.heads}, {"seq", m.seq}, {"vocab", m.vocab}});
    need(m.hidden % m.heads == 0, {"heads", "hidden"}, "hidden (" + std::to_string(m.hidden) +
         ") must be a multiple of heads (" + std::to_string(m.heads) + ")");
    if (m.family == "moe") {
      positive({{"experts", m.experts}, {"top_k", m.top_k}});
      need(m.top_k <= m.experts, {"top_k", "experts"}, "top_k must be at most experts");
    }
    add_gpt_layers(m);
    autocast_fp32_bytes(m, m.bytes_per_value, +1);  // a model built at 16 bits
  } else if (m.family == "wrn") {
    positive({{"width_factor", m.width_factor}, {"classes", m.classes}});
    need(m.image >= 8, {"image"}, "image must be at least 8");
    if (m.image >= 128) {
      need(m.depth == 50, {"depth"}, "ImageNet-size WRNs (image >= 128) are WRN-50-k: depth must be 50");
      need(m.image % 32 == 0, {"image"}, "image must be a multiple of 32");
    } else {
      need(m.depth == 18 || (m.depth >= 10 && (m.depth - 4) % 6 == 0), {"depth"},
           "CIFAR WRN depth must be 6n + 4 (n >= 1), or 18 (the ResNet-18 layout)");
      need(m.image % (m.depth == 18 ? 8 : 4) == 0, {"image"}, "image must be a multiple of 4 (8 for depth 18)");
    }
    add_wrn_layers(m);
  } else if (m.family == "lstm") {
    positive({{"hidden", m.hidden}, {"num_layers", m.num_layers}, {"seq", m.seq}, {"vocab", m.vocab}});
    add_lstm_layers(m);
  } else if (m.family == "autoencoder") {
    positive({{"hidden", m.hidden}, {"vocab", m.vocab}});  // vocab: the items
    add_autoencoder_layers(m);
  } else if (m.family == "cyclegan") {
    need(m.image >= 16 && m.image % 16 == 0, {"image"}, "image must be a positive multiple of 16");
    positive({{"hidden", m.hidden}, {"num_layers", m.num_layers}});
    need(m.hidden <= 1024, {"hidden"}, "hidden (the generators' first channels) must be at most 1024");
    add_cyclegan_layers(m);
  } else if (m.family == "torchscript") {
    need(!m.torchscript_path.empty(), {"path"}, "torchscript needs 'path'");
  } else {
    fail_input(file, lines.of({"family"}),
               "unknown family '" + m.family + "' (expected gpt, moe, wrn, lstm, autoencoder, cyclegan, torchscript)");
  }
}

}  // namespace detail

std::vector<std::string> zoo_names() {
  std::vector<std::string> names;
  for (const auto& [n, m] : zoo()) names.push_back(n);
  return names;
}

ModelSpec model_by_name(const std::string& name) {
  const auto it = zoo().find(detail::lower(name));
  if (it != zoo().end()) return it->second;
  std::string all;
  for (const auto& n : zoo_names()) all += (all.empty() ? "" : ", ") + n;
  throw InputError("unknown model '" + name + "' (built-in: " + all +
                   "; or a .yaml description or a TorchScript .pt file)");
}

ModelSpec with_precision(ModelSpec m, Precision p) {
  if (p == Precision::Default) throw std::logic_error("with_precision: resolve the precision first");
  autocast_fp32_bytes(m, m.bytes_per_value, -1);
  const double r = static_cast<double>(bytes_per_value(p)) / m.bytes_per_value;
  for (LayerSpec& l : m.layers) {
    l.activation_bytes_per_sample *= r;
    if (l.kind != "embedding") l.saved_bytes_per_sample *= r;  // it saves token ids (int64)
  }
  m.bytes_per_value = bytes_per_value(p);
  m.precision = p;
  autocast_fp32_bytes(m, m.bytes_per_value, +1);
  return m;
}

ModelSpec with_attention(ModelSpec m, bool fused) {
  if (fused == m.fused_attention) return m;
  const double s = m.seq, heads = m.heads, bpv = m.bytes_per_value;
  // Per sample: the unfused scores (5 a s^2 values, the layer formulas' term)
  // against the fused kernel's per-row statistics (a s fp32 values).
  const double delta = 5 * heads * s * s * bpv / 2 - heads * s * 4;
  for (LayerSpec& l : m.layers) {
    if ((l.kind != "decoder" && l.kind != "moe_decoder") || m.hidden <= 0) continue;
    l.saved_bytes_per_sample = std::max(0.0, l.saved_bytes_per_sample + (fused ? -delta : delta));
  }
  m.fused_attention = fused;
  return m;
}

ModelSpec load_model(const std::string& name_or_path) {
  const std::string& s = name_or_path;
  if (detail::ends_with_ci(s, ".yaml") || detail::ends_with_ci(s, ".yml")) return load_model_yaml(s);
  if (detail::ends_with_ci(s, ".pt") || detail::ends_with_ci(s, ".pth") ||
      detail::ends_with_ci(s, ".ts")) {
    if (!std::filesystem::exists(s)) fail_input(s, 0, "no such file");
    ModelSpec m;
    m.name = std::filesystem::path(s).filename().string();
    m.family = "torchscript";
    m.torchscript_path = s;
    return m;
  }
  return model_by_name(s);
}

}  // namespace cellsched
