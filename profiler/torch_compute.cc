// The LibTorch compute backend: one LibTorch module per layer shape (or
// tensor-parallel shard of it; profiler/torch_modules.h) built from the
// analytic ModelSpec, and the top-level children of a TorchScript module;
// forward + backward timed with a steady clock on the CPU, or with a
// DeviceTimer (CUPTI / CUDA events) on CUDA.
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
#include "profiler/torch_modules.h"

namespace cellsched::profiler::detail {
namespace {

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
    mb *= std::max(1, l.passes);  // images (sequences) through the layer per micro-batch
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
      input = floats({mb, l.in_channels, l.spatial, l.spatial});
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
