// The LibTorch compute backend: one LibTorch module per layer shape (or
// tensor-parallel shard of it) built from the analytic ModelSpec, and the
// top-level children of a TorchScript module; forward + backward timed with a
// steady clock on the CPU, or with a DeviceTimer (CUPTI / CUDA events) on CUDA.
// The only translation unit of the compute path that includes LibTorch.
#include <torch/script.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <dlfcn.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/stats.h"
#include "profiler/backends.h"
#include "profiler/torch_layers.h"

namespace cellsched::profiler::detail {
namespace {

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

torch::nn::Conv2d conv(int in, int out, int k, int stride) {
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
// discriminators): [nearest upsampling x2], [reflection padding], a k x k
// convolution, [instance norm], then ReLU (generators), LeakyReLU 0.2
// (discriminators) or tanh (a generator's output). A residual block is two
// padded convolutions with norms and a ReLU between, added to its input; the
// discriminators' output layer pads (1, 0, 1, 0) first.
struct GanLayer : Layer {
  explicit GanLayer(const LayerSpec& l) : kind(l.kind) {
    const bool residual = kind == "gan_residual", reflect = residual || l.kernel == 7;
    const int pad = reflect ? 0 : l.kernel == 4 ? 1 : l.kernel / 2;
    const int stride = kind == "gan_up" ? 1 : l.stride;
    c1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(l.in_channels, l.out_channels, l.kernel)
                                                        .stride(stride)
                                                        .padding(pad)));
    if (residual)
      c2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(l.out_channels, l.out_channels, l.kernel)));
    norm = kind == "gan_conv" || kind == "gan_up" || residual || (kind == "gan_disc" && l.in_channels != 3);
    reflect_pad = reflect ? l.kernel / 2 : 0;
  }
  Tensor forward(Tensor x) override {
    namespace F = torch::nn::functional;
    auto padded = [&](const Tensor& t) {
      return reflect_pad ? F::pad(t, F::PadFuncOptions({reflect_pad, reflect_pad, reflect_pad, reflect_pad}).mode(torch::kReflect)) : t;
    };
    auto in = [](const Tensor& t) { return F::instance_norm(t, F::InstanceNormFuncOptions()); };
    if (kind == "gan_residual") return x + in(c2(padded(torch::relu(in(c1(padded(x)))))));
    if (kind == "gan_up")
      x = F::interpolate(x, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2, 2}).mode(torch::kNearest));
    if (kind == "gan_disc_out") x = F::pad(x, F::PadFuncOptions({1, 0, 1, 0}));
    Tensor y = c1(padded(x));
    if (norm) y = in(y);
    if (kind == "gan_out") return torch::tanh(y);
    if (kind == "gan_disc") return torch::leaky_relu(y, 0.2);
    return kind == "gan_disc_out" ? y : torch::relu(y);
  }
  std::string kind;
  bool norm = false;
  int64_t reflect_pad = 0;
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
int shard_of(int n, int tp) { return (n + tp - 1) / tp; }

class TorchBackend : public ComputeBackend {
 public:
  TorchBackend(const std::string& device, int threads, int64_t cache_bytes,
               std::unique_ptr<DeviceTimer> timer, std::string detected)
      : device_(device), cache_bytes_(cache_bytes), timer_(std::move(timer)), detected_(std::move(detected)) {
    if (threads > 0) set_cpu_threads(threads);
    if (device_.is_cpu()) keep_freed_memory();
    threads_ = torch::get_num_threads();
    torch::manual_seed(0);
  }

  std::string timer() const override { return timer_ ? timer_->name() : "steady_clock"; }
  int64_t cache_bytes() const override { return cache_bytes_; }
  void set_cache_flush(int64_t bytes) override {
    flush_bytes_ = bytes;
    flush_ = Tensor();
  }

  // The memory passes stream two buffers far larger than the caches.
  int64_t stream_buffer_bytes() const { return std::max<int64_t>(64LL << 20, 4 * cache_bytes_); }

  double memory_gbps() override {
    torch::NoGradGuard g;
    const int64_t bytes = stream_buffer_bytes();
    const auto opts = torch::TensorOptions().device(device_);
    Tensor a = torch::ones({bytes / 4}, opts), b = torch::ones({bytes / 4}, opts);
    std::vector<double> ms;
    for (int r = 0; r < 7; ++r) {
      if (timer_) {
        timer_->start(static_cast<uint64_t>(r + 1));
        a.add_(b, 0.5);
        timer_->stop(static_cast<uint64_t>(r + 1));
        continue;
      }
      const auto t0 = std::chrono::steady_clock::now();
      a.add_(b, 0.5);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    if (timer_)
      for (const auto& [id, t] : timer_->collect_ms()) ms.push_back(t);
    if (ms.size() > 1) ms.erase(ms.begin());  // the first pass faults the pages in
    std::sort(ms.begin(), ms.end());
    const double med = ms.empty() ? 0 : ms[ms.size() / 2];
    return med > 0 ? 3.0 * static_cast<double>(bytes) / (med * 1e6) : 0;
  }
  std::vector<double> memory_gbps_shared(int max_streams) override {
    std::vector<double> out;
    if (!device_.is_cpu() || max_streams < 1) return out;
    torch::NoGradGuard g;
    const int64_t bytes = stream_buffer_bytes();
    std::vector<Tensor> a, b;
    for (int k = 0; k < max_streams; ++k) {
      a.push_back(torch::ones({bytes / 4}));
      b.push_back(torch::ones({bytes / 4}));
    }
    // Rounds interleave the stream counts, so that a slow phase of the host
    // spreads over all of them. The pass alone is the median over the rounds;
    // k streams are the median of each round's slowdown against that round's
    // pass alone, applied to it.
    std::vector<std::vector<double>> gbps(static_cast<size_t>(max_streams));
    for (int round = 0; round < 7; ++round)
      for (int k = 1; k <= max_streams; ++k) {
        std::atomic<bool> stop{false};
        std::atomic<int> running{0};
        std::vector<std::thread> others;
        for (int t = 1; t < k; ++t)
          others.emplace_back([&, t] {
            torch::NoGradGuard ng;
            a[static_cast<size_t>(t)].add_(b[static_cast<size_t>(t)], 0.5);
            ++running;
            while (!stop) a[static_cast<size_t>(t)].add_(b[static_cast<size_t>(t)], 0.5);
          });
        while (running < k - 1) std::this_thread::yield();
        std::vector<double> ms;
        for (int r = 0; r < 9; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          a[0].add_(b[0], 0.5);
          ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        stop = true;
        for (auto& t : others) t.join();
        gbps[static_cast<size_t>(k - 1)].push_back(3.0 * static_cast<double>(bytes) / (median(ms) * 1e6));
      }
    out.push_back(median(gbps[0]));
    for (size_t k = 1; k < gbps.size(); ++k) {
      std::vector<double> slowdown;
      for (size_t r = 0; r < gbps[k].size(); ++r) slowdown.push_back(gbps[0][r] / gbps[k][r]);
      out.push_back(out[0] / median(slowdown));
    }
    return out;
  }
  int threads() const override { return device_.is_cpu() ? threads_ : 0; }
  std::map<std::string, std::string> versions() const override {
    std::map<std::string, std::string> v = {{"libtorch", torch_version()}};
    if (device_.is_cuda()) v["cuda"] = cuda_versions();
    return v;
  }
  std::string detected_device_type() const override { return device_.is_cpu() ? "cpu" : detected_; }

  void expand(ModelSpec& m) override {
    if (m.family != "torchscript") return;
    if (m.input_shape.empty())
      throw InputError(m.torchscript_path + ": a TorchScript model needs one sample's input shape (--input-shape, e.g. 16 or 3,32,32)");
    try {
      script_ = torch::jit::load(m.torchscript_path);
    } catch (const c10::Error& e) {
      throw InputError(m.torchscript_path + ": not a TorchScript module: " + first_line(e.what()));
    }
    script_.eval();
    script_layers_.clear();
    m.layers.clear();
    std::vector<int64_t> shape = {1};
    for (int d : m.input_shape) shape.push_back(d);
    Tensor x = torch::randn(shape);
    input_shapes_.clear();
    for (const auto& child : script_.named_children()) {
      auto layer = std::make_shared<ScriptedLayer>(child.value);
      input_shapes_.push_back(x.sizes().vec());
      std::ostringstream key;
      key << child.value.type()->name()->name() << ":in" << x.sizes();
      double params = 0;
      for (const Tensor& p : layer->params()) {
        params += p.numel();
        key << ":p" << p.sizes();
      }
      torch::NoGradGuard ng;
      try {
        x = layer->forward(x);
      } catch (const std::exception& e) {
        throw InputError(m.torchscript_path + ": child '" + child.name + "' fails on input " +
                         shape_text(input_shapes_.back()) + ": " + first_line(e.what()));
      }
      LayerSpec l;
      l.name = child.name;
      l.kind = "torchscript";
      l.shape_key = key.str();
      l.params = params;
      l.activation_bytes_per_sample = x.numel() * 4.0;
      l.saved_bytes_per_sample = torch::numel(torch::empty(input_shapes_.back())) * 4.0;
      m.layers.push_back(l);
      script_layers_.push_back(layer);
    }
    if (m.layers.empty())
      throw InputError(m.torchscript_path + ": the module has no top-level children (expected a sequence of layers)");
  }

  LayerSamples time_layer(const ModelSpec& m, size_t index, int tp, int mb, int warmup,
                          int reps) override {
    std::shared_ptr<Layer> layer;
    std::function<Tensor()> input;
    build(m, index, tp, mb, layer, input);
    auto* scripted = dynamic_cast<ScriptedLayer*>(layer.get());
    if (scripted) {
      scripted->module.to(device_);
      scripted->module.train();
    } else {
      layer->to(device_);
      layer->train();
    }
    std::vector<Tensor> params = scripted ? scripted->params() : layer->parameters();
    // The head is followed by the loss in training: time them together.
    const bool head = m.layers[index].kind == "head" || m.layers[index].kind == "dense_head";
    auto run_forward = [&](const Tensor& x) { return head ? training_loss(layer->forward(x)) : layer->forward(x); };
    LayerSamples out;
    Tensor grad;
    uint64_t next_id = 1;
    std::vector<std::pair<uint64_t, uint64_t>> ids;  // (fwd, bwd) region per timed rep
    for (int r = 0; r < warmup + reps; ++r) {
      Tensor x = input();
      for (auto& p : params) p.mutable_grad() = Tensor();
      if (timer_) {
        const uint64_t f = next_id++, b = next_id++;
        flush_cache();
        timer_->start(f);
        Tensor y = run_forward(x);
        timer_->stop(f);
        if (!grad.defined()) grad = head ? torch::ones_like(y) : torch::randn_like(y);
        flush_cache();
        timer_->start(b);
        y.backward(grad);
        timer_->stop(b);
        if (r >= warmup) ids.emplace_back(f, b);
        continue;
      }
      flush_cache();
      const auto t0 = std::chrono::steady_clock::now();
      Tensor y = run_forward(x);
      const auto t1 = std::chrono::steady_clock::now();
      if (!grad.defined()) grad = head ? torch::ones_like(y) : torch::randn_like(y);
      flush_cache();
      const auto t2 = std::chrono::steady_clock::now();
      y.backward(grad);
      const auto t3 = std::chrono::steady_clock::now();
      if (r < warmup) continue;
      out.fwd_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      out.bwd_ms.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
    }
    if (timer_) {
      const auto ms = timer_->collect_ms();
      for (const auto& [f, b] : ids) {
        const auto fi = ms.find(f), bi = ms.find(b);
        out.fwd_ms.push_back(fi == ms.end() ? 0.0 : fi->second);
        out.bwd_ms.push_back(bi == ms.end() ? 0.0 : bi->second);
      }
    }
    return out;
  }

 private:
  // Evicts the caches before each timed region (as nvbench flushes the L2):
  // in training, the layers before this one have evicted its weights and
  // saved activations, so a profile from warm caches would be too fast.
  // A read-modify-write pass (plain stores; memset may bypass the cache).
  void flush_cache() {
    if (flush_bytes_ <= 0) return;
    torch::NoGradGuard g;
    if (!flush_.defined()) flush_ = torch::zeros({flush_bytes_ / 4}, torch::TensorOptions().device(device_));
    flush_.add_(1);
  }

  static std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
  static std::string shape_text(const std::vector<int64_t>& v) {
    std::ostringstream o;
    o << c10::IntArrayRef(v);
    return o.str();
  }

  void build(const ModelSpec& m, size_t index, int tp, int mb, std::shared_ptr<Layer>& layer,
             std::function<Tensor()>& input) {
    const LayerSpec& l = m.layers[index];
    const auto fopt = torch::TensorOptions().device(device_);
    auto floats = [fopt](std::vector<int64_t> shape) {
      return [fopt, shape] { return torch::randn(shape, fopt).requires_grad_(true); };
    };
    if (l.kind == "decoder" || l.kind == "moe_decoder") {
      const bool moe = l.kind == "moe_decoder";
      layer = std::make_shared<DecoderShard>(m.hidden, m.heads / tp, m.hidden / m.heads, m.seq,
                                             4 * m.hidden / tp, moe ? m.experts : 0, m.top_k);
      input = floats({mb, m.seq, m.hidden});
    } else if (l.kind == "embedding") {
      const int vs = shard_of(m.vocab, tp);
      layer = std::make_shared<EmbeddingShard>(vs, m.hidden, m.seq);
      const int64_t seq = m.seq;
      auto dev = device_;
      input = [vs, mb, seq, dev] { return torch::randint(vs, {mb, seq}, torch::TensorOptions().dtype(torch::kLong).device(dev)); };
    } else if (l.kind == "head" && m.family != "wrn") {
      layer = std::make_shared<LmHeadShard>(m.hidden, shard_of(m.vocab, tp));
      input = floats({mb, m.seq, m.hidden});
    } else if (l.kind == "head") {
      layer = std::make_shared<WrnHead>(l.in_channels, l.out_channels);
      input = floats({mb, l.in_channels, l.spatial, l.spatial});
    } else if (l.kind == "conv") {
      layer = std::make_shared<WrnStem>(l.out_channels, m.image >= 128);
      input = floats({mb, 3, m.image, m.image});
    } else if (l.kind == "residual_block") {
      layer = std::make_shared<ResidualBlock>(l.in_channels, l.mid_channels, l.out_channels, l.stride);
      input = floats({mb, l.in_channels, l.spatial, l.spatial});
    } else if (l.kind == "lstm") {
      layer = std::make_shared<LstmLayer>(m.hidden);
      input = floats({mb, m.seq, m.hidden});
    } else if (l.kind == "dense" || l.kind == "dense_head") {
      layer = std::make_shared<DenseLayer>(l.in_channels, l.out_channels, l.kind == "dense_head");
      input = floats({mb, l.in_channels});
    } else if (l.kind.rfind("gan_", 0) == 0) {
      layer = std::make_shared<GanLayer>(l);
      input = floats({int64_t{mb} * std::max(1, l.passes), l.in_channels, l.spatial, l.spatial});
    } else if (l.kind == "torchscript") {
      if (index >= script_layers_.size()) throw std::logic_error("torchscript model not expanded");
      layer = script_layers_[index];
      auto shape = input_shapes_[index];
      shape[0] = mb;
      input = floats(shape);
    } else {
      throw InputError(m.name + ": layer '" + l.name + "' has kind '" + l.kind + "', which LibTorch cannot build");
    }
  }

  torch::Device device_;
  int64_t cache_bytes_ = 0, flush_bytes_ = 0;
  Tensor flush_;
  std::unique_ptr<DeviceTimer> timer_;
  std::string detected_;
  int threads_ = 0;
  torch::jit::Module script_;
  std::vector<std::shared_ptr<ScriptedLayer>> script_layers_;
  std::vector<std::vector<int64_t>> input_shapes_;
};

}  // namespace

std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

std::unique_ptr<ComputeBackend> make_torch_backend(const std::string& device, int threads,
                                                   int64_t cache_bytes, std::unique_ptr<DeviceTimer> timer,
                                                   const std::string& detected_type) {
  if (device != "cpu" && !torch::cuda::is_available())
    throw InputError(device + ": this LibTorch has no CUDA (Debian's is CPU-only); build against "
                     "PyTorch's LibTorch: cmake -DCMAKE_PREFIX_PATH=\"$(python3 -c 'import torch; "
                     "print(torch.utils.cmake_prefix_path)')\"");
  return std::make_unique<TorchBackend>(device, threads, cache_bytes, std::move(timer), detected_type);
}

}  // namespace cellsched::profiler::detail

// ---- whole-layer modules for training (profiler/torch_layers.h) ----------
#include "profiler/torch_layers.h"

namespace cellsched::profiler {

TorchLayer build_torch_layer(const ModelSpec& m, size_t index) {
  using namespace detail;
  const LayerSpec& l = m.layers.at(index);
  std::shared_ptr<detail::Layer> layer;
  TorchLayer out;
  auto floats = [](std::vector<int64_t> shape) {
    return [shape](int mb) {
      auto s = shape;
      s[0] = mb;
      return torch::randn(s).requires_grad_(true);
    };
  };
  if (l.kind == "decoder" || l.kind == "moe_decoder") {
    const bool moe = l.kind == "moe_decoder";
    layer = std::make_shared<DecoderShard>(m.hidden, m.heads, m.hidden / m.heads, m.seq, 4 * m.hidden,
                                           moe ? m.experts : 0, m.top_k);
    out.input = floats({1, m.seq, m.hidden});
  } else if (l.kind == "embedding") {
    layer = std::make_shared<EmbeddingShard>(m.vocab, m.hidden, m.seq);
    const int64_t seq = m.seq, vocab = m.vocab;
    out.input = [seq, vocab](int mb) { return torch::randint(vocab, {mb, seq}, torch::kLong); };
  } else if (l.kind == "head" && m.family != "wrn") {
    layer = std::make_shared<LmHeadShard>(m.hidden, m.vocab);
    out.input = floats({1, m.seq, m.hidden});
  } else if (l.kind == "head") {
    layer = std::make_shared<WrnHead>(l.in_channels, l.out_channels);
    out.input = floats({1, l.in_channels, l.spatial, l.spatial});
  } else if (l.kind == "conv") {
    layer = std::make_shared<WrnStem>(l.out_channels, m.image >= 128);
    out.input = floats({1, 3, m.image, m.image});
  } else if (l.kind == "residual_block") {
    layer = std::make_shared<ResidualBlock>(l.in_channels, l.mid_channels, l.out_channels, l.stride);
    out.input = floats({1, l.in_channels, l.spatial, l.spatial});
  } else if (l.kind == "lstm") {
    layer = std::make_shared<LstmLayer>(m.hidden);
    out.input = floats({1, m.seq, m.hidden});
  } else if (l.kind == "dense" || l.kind == "dense_head") {
    layer = std::make_shared<DenseLayer>(l.in_channels, l.out_channels, l.kind == "dense_head");
    out.input = floats({1, l.in_channels});
  } else if (m.family == "cyclegan") {
    throw InputError(m.name + ": CycleGAN's generators and discriminators are not one chain of layers, so it "
                     "cannot be trained layer by layer here (profile and estimate it instead)");
  } else {
    throw InputError(m.name + ": layer '" + l.name + "' has kind '" + l.kind + "', which cannot be trained here");
  }
  layer->train();
  out.module = layer;
  out.forward = [layer](torch::Tensor x) { return layer->forward(x); };
  return out;
}

}  // namespace cellsched::profiler

namespace cellsched::profiler {

torch::Tensor training_loss(const torch::Tensor& output) {
  const int64_t classes = output.size(-1);
  torch::Tensor logits = output.reshape({-1, classes});
  const auto labels = torch::randint(classes, {logits.size(0)}, torch::TensorOptions().dtype(torch::kLong).device(output.device()));
  return torch::nn::functional::cross_entropy(logits, labels);
}

void keep_freed_memory() {
  // glibc serves large blocks with mmap and returns them on free, so every
  // iteration page-faults its activations in again (PyTorch's CPU tuning
  // guide recommends an allocator that keeps them, such as jemalloc). Keep
  // them in the heap: no mmap below 1 GiB, no trimming.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void set_cpu_threads(int threads) {
  if (threads <= 0) return;
  torch::set_num_threads(threads);
  const std::string n = std::to_string(threads);
  setenv("OPENBLAS_NUM_THREADS", n.c_str(), 1);
  setenv("OMP_NUM_THREADS", n.c_str(), 1);
  // OpenBLAS read its variable when it was loaded; tell it directly when it
  // is the BLAS in use (no-op for other BLAS libraries).
  using SetThreads = void (*)(int);
  if (auto f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(threads);
}

}  // namespace cellsched::profiler
