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

// Plain SGD, as the estimator's "sgd" optimizer prices it.
void sgd_step(std::vector<Tensor>& params) {
  torch::NoGradGuard g;
  for (auto& p : params)
    if (p.grad().defined()) {
      p.add_(p.grad(), -1e-4);
      p.mutable_grad() = Tensor();
    }
}

}  // namespace

bool available() { return true; }

int run_worker(const WorkerArgs& a) {
  profiler::set_cpu_threads(std::max(1, a.threads));
  torch::manual_seed(1 + a.rank);
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
  std::vector<double> times;
  for (int it = 0; it < a.warmup + a.iterations; ++it) {
    if (pg) pg->barrier()->wait();
    const auto t0 = std::chrono::steady_clock::now();
    if (a.mode == "single" || a.mode == "dp") {
      for (int b = 0; b < a.micro_batches; ++b) {
        Tensor y = st.forward(st.layers.front().input(mb));
        y.backward(torch::ones_like(y));
      }
      if (a.mode == "dp") {
        std::vector<Tensor> grads;
        for (auto& p : st.params) grads.push_back(p.grad().reshape(-1));
        std::vector<Tensor> flat{torch::cat(grads)};
        pg->allreduce(flat)->wait();
        int64_t off = 0;
        torch::NoGradGuard g;
        for (auto& p : st.params) {
          const int64_t n = p.numel();
          p.grad().copy_(flat[0].narrow(0, off, n).view_as(p.grad()));
          off += n;
        }
      }
    } else if (a.rank == 0) {  // stage 0: forward every micro-batch, then the backwards
      // Sends complete only when stage 1 takes them, and stage 1 sends a
      // gradient back after each micro-batch: post the sends without waiting,
      // so neither side blocks the other.
      std::vector<Tensor> outs;
      std::vector<std::vector<Tensor>> sent;
      std::vector<c10::intrusive_ptr<::c10d::Work>> pending;
      sent.reserve(static_cast<size_t>(a.micro_batches));
      for (int b = 0; b < a.micro_batches; ++b) {
        Tensor y = st.forward(st.layers.front().input(mb));
        sent.push_back({y.detach().contiguous()});
        pending.push_back(pg->send(sent.back(), 1, b));
        outs.push_back(y);
      }
      for (int b = 0; b < a.micro_batches; ++b) {
        std::vector<Tensor> g{torch::empty_like(probe)};
        pg->recv(g, 1, 1000 + b)->wait();
        outs[static_cast<size_t>(b)].backward(g[0]);
      }
      for (auto& w : pending) w->wait();
    } else {  // stage 1: receive, forward, backward, send the input's gradient back
      std::vector<std::vector<Tensor>> sent;
      std::vector<c10::intrusive_ptr<::c10d::Work>> pending;
      sent.reserve(static_cast<size_t>(a.micro_batches));
      for (int b = 0; b < a.micro_batches; ++b) {
        std::vector<Tensor> x{torch::empty_like(probe)};
        pg->recv(x, 0, b)->wait();
        Tensor in = x[0].requires_grad_(true);
        Tensor y = st.forward(in);
        y.backward(torch::ones_like(y));
        sent.push_back({in.grad().contiguous()});
        pending.push_back(pg->send(sent.back(), 0, 1000 + b));
      }
      for (auto& w : pending) w->wait();
    }
    sgd_step(st.params);
    if (pg) pg->barrier()->wait();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (it >= a.warmup) times.push_back(ms);
  }
  std::ofstream out(a.out_path);
  out << "{\"iteration_ms\": [";
  for (size_t i = 0; i < times.size(); ++i) out << (i ? ", " : "") << times[i];
  out << "]}\n";
  return out ? 0 : 1;
}

}  // namespace cellsched::validate
