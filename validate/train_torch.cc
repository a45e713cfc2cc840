// LibTorch side of `cellsched validate`: trains a zoo model for a few
// iterations in one of three layouts and records the iteration times. The
// only translation unit of validate/ that includes LibTorch.
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model.h"
#include "profiler/torch_layers.h"
#include "validate/train.h"

namespace cellsched::validate {

namespace {

using torch::Tensor;

struct Stage {
  std::vector<profiler::TorchLayer> layers;
  std::vector<Tensor> params;
  Tensor forward(Tensor x) {
    for (auto& l : layers) x = l.forward(x);
    return x;
  }
};

Stage build_stage(const ModelSpec& m, int first, int last) {
  Stage s;
  for (int i = first; i < last; ++i) {
    s.layers.push_back(profiler::build_torch_layer(m, static_cast<size_t>(i)));
    for (auto& p : s.layers.back().module->parameters()) s.params.push_back(p);
  }
  return s;
}

// Plain SGD, as the estimator's "sgd" optimizer prices it. Gradients that
// live in a shared buffer are zeroed there; others are released. The
// all-reduce sums the replicas' gradients; `lr` carries the 1/world that
// makes it their mean.
void sgd_step(std::vector<Tensor>& params, Tensor& grad_buffer, double lr) {
  torch::NoGradGuard g;
  for (auto& p : params)
    if (p.grad().defined()) {
      p.add_(p.grad(), -lr);
      if (!grad_buffer.defined()) p.mutable_grad() = Tensor();
    }
  if (grad_buffer.defined()) grad_buffer.zero_();
}

// Every parameter's gradient becomes a view into one flat buffer (as DDP's
// gradient_as_bucket_view): backward accumulates into it, and the all-reduce
// works on it in place, with no packing copies.
Tensor flat_gradients(Stage& st) {
  int64_t total = 0;
  for (auto& p : st.params) total += p.numel();
  Tensor buffer = torch::zeros({total});
  int64_t off = 0;
  for (auto& p : st.params) {
    p.mutable_grad() = buffer.narrow(0, off, p.numel()).view_as(p);
    off += p.numel();
  }
  return buffer;
}

// Pipeline stage 0: forward every micro-batch, then the backwards. Sends
// complete only when stage 1 takes them, and stage 1 sends a gradient back
// after each micro-batch: the sends are posted without waiting, so neither
// side blocks the other.
void pipeline_first_stage(Stage& st, ::c10d::ProcessGroupGloo& pg, int mb, int micro_batches, const Tensor& probe) {
  std::vector<Tensor> outs;
  std::vector<std::vector<Tensor>> sent;
  std::vector<c10::intrusive_ptr<::c10d::Work>> pending;
  sent.reserve(static_cast<size_t>(micro_batches));
  for (int b = 0; b < micro_batches; ++b) {
    Tensor y = st.forward(st.layers.front().input(mb));
    sent.push_back({y.detach().contiguous()});
    pending.push_back(pg.send(sent.back(), 1, b));
    outs.push_back(y);
  }
  for (int b = 0; b < micro_batches; ++b) {
    std::vector<Tensor> g{torch::empty_like(probe)};
    pg.recv(g, 1, 1000 + b)->wait();
    outs[static_cast<size_t>(b)].backward(g[0]);
  }
  for (auto& w : pending) w->wait();
}

// Pipeline stage 1: receive, forward, backward, send the input's gradient back.
void pipeline_last_stage(Stage& st, ::c10d::ProcessGroupGloo& pg, int micro_batches, const Tensor& probe) {
  std::vector<std::vector<Tensor>> sent;
  std::vector<c10::intrusive_ptr<::c10d::Work>> pending;
  sent.reserve(static_cast<size_t>(micro_batches));
  for (int b = 0; b < micro_batches; ++b) {
    std::vector<Tensor> x{torch::empty_like(probe)};
    pg.recv(x, 0, b)->wait();
    Tensor in = x[0].requires_grad_(true);
    Tensor y = st.forward(in);
    profiler::training_loss(y).backward();
    sent.push_back({in.grad().contiguous()});
    pending.push_back(pg.send(sent.back(), 0, 1000 + b));
  }
  for (auto& w : pending) w->wait();
}

}  // namespace

bool available() { return true; }

int run_worker(const WorkerArgs& a) {
  profiler::set_cpu_threads(std::max(1, a.threads));
  profiler::keep_freed_memory();
  // Data-parallel replicas start from the same weights (DDP broadcasts rank
  // 0's); pipeline stages hold different layers.
  torch::manual_seed(a.mode == "dp" ? 1 : 1 + a.rank);
  const ModelSpec m = load_model(a.model);
  const int L = static_cast<int>(m.layers.size());
  c10::intrusive_ptr<::c10d::ProcessGroupGloo> pg;
  if (a.world > 1) {
    auto store = c10::make_intrusive<::c10d::FileStore>(a.store_dir + "/store", a.world);
    auto opts = ::c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(300000));
    opts->devices.push_back(::c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    pg = c10::make_intrusive<::c10d::ProcessGroupGloo>(store, a.rank, a.world, opts);
  }
  const bool pp = a.mode == "pp";
  const int first = pp && a.rank == 1 ? a.split : 0;
  const int last = pp && a.rank == 0 ? a.split : L;
  Stage st = build_stage(m, first, last);
  const int mb = a.mode == "dp" ? a.micro_batch_size / a.world : a.micro_batch_size;
  // Shapes of the activation between the stages (pp).
  Tensor probe;
  if (pp) {
    torch::NoGradGuard g;
    Stage s0 = a.rank == 0 ? Stage{} : build_stage(m, 0, a.split);
    probe = (a.rank == 0 ? st : s0).forward(profiler::build_torch_layer(m, 0).input(mb));
  }
  // dp: every parameter's gradient is a view into one flat buffer.
  Tensor grad_buffer = a.mode == "dp" ? flat_gradients(st) : Tensor();
  std::vector<double> times, compute, sync, step;
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  for (int it = 0; it < a.warmup + a.iterations; ++it) {
    if (pg) pg->barrier()->wait();
    const auto t0 = Clock::now();
    double sync_ms = 0;
    if (a.mode == "single" || a.mode == "dp") {
      for (int b = 0; b < a.micro_batches; ++b) {
        Tensor y = st.forward(st.layers.front().input(mb));
        profiler::training_loss(y).backward();
      }
      if (a.mode == "dp") {
        // The gradients are views into one flat buffer (as DDP's
        // gradient_as_bucket_view): backward accumulated into it, the
        // all-reduce works on it in place, no packing copies.
        const auto ts = Clock::now();
        std::vector<Tensor> flat{grad_buffer};
        pg->allreduce(flat)->wait();
        sync_ms = ms_since(ts);
      }
    } else if (a.rank == 0) {
      pipeline_first_stage(st, *pg, mb, a.micro_batches, probe);
    } else {
      pipeline_last_stage(st, *pg, a.micro_batches, probe);
    }
    const double before_step = ms_since(t0);
    const auto ts = Clock::now();
    sgd_step(st.params, grad_buffer, 1e-4 / (a.mode == "dp" ? a.world : 1));
    const double step_ms = ms_since(ts);
    if (pg) pg->barrier()->wait();
    const double ms = ms_since(t0);
    if (it >= a.warmup) {
      times.push_back(ms);
      compute.push_back(before_step - sync_ms);
      sync.push_back(sync_ms);
      step.push_back(step_ms);
    }
  }
  // A fingerprint of the trained weights: data-parallel replicas must agree.
  double checksum = 0;
  {
    torch::NoGradGuard g;
    for (auto& p : st.params) checksum += p.to(torch::kDouble).abs().sum().item<double>();
  }
  std::ofstream out(a.out_path);
  out << nlohmann::json{{"param_checksum", checksum},  // NaN (diverged) is written as null
                        {"iteration_ms", times},
                        {"compute_ms", compute},
                        {"sync_ms", sync},
                        {"step_ms", step}}
             .dump()
      << "\n";
  return out ? 0 : 1;
}

}  // namespace cellsched::validate
