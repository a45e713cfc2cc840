// Hand-made models and profiles for the estimator and tuner tests.
#pragma once

#include <string>

#include "core/model.h"
#include "core/profile.h"

namespace cellsched::testing {

// `n` identical tensor-parallel layers "dec": 1000 params, 100 activation
// bytes and 200 saved bytes per sample.
inline ModelSpec toy_model(int n = 4, double params = 1000) {
  ModelSpec m;
  m.name = "toy";
  m.family = "gpt";
  for (int i = 0; i < n; ++i) {
    LayerSpec l;
    l.name = "block." + std::to_string(i);
    l.kind = "decoder";
    l.shape_key = "dec";
    l.params = params;
    l.flops_per_sample = 1e6;
    l.activation_bytes_per_sample = 100;
    l.saved_bytes_per_sample = 200;
    l.tensor_parallel = true;
    m.layers.push_back(l);
  }
  return m;
}

// tp=1: fwd = mb ms, bwd = 2 mb ms at mb 1, 2, 4; tp=2 at mb 2: fwd 1.2, bwd 2.4.
inline ProfileRun toy_compute(const std::string& device_type = "cpu") {
  ProfileRun r;
  r.id = 7;
  r.kind = "compute";
  r.model = "toy";
  r.device = "cpu";
  r.device_type = device_type;
  for (int mb : {1, 2, 4}) {
    LayerProfile p;
    p.shape_key = "dec";
    p.layer_name = "block.0";
    p.micro_batch = mb;
    p.fwd_ms = mb;
    p.bwd_ms = 2.0 * mb;
    r.layers.push_back(p);
  }
  LayerProfile p;
  p.shape_key = "dec";
  p.tp_degree = 2;
  p.micro_batch = 2;
  p.fwd_ms = 1.2;
  p.bwd_ms = 2.4;
  r.layers.push_back(p);
  return r;
}

// all_reduce over 2 ranks: 10 us at 100 B, 100 us at 1000 B; send_recv: 5 and 50 us.
inline ProfileRun toy_comm(const std::string& device_type = "cpu") {
  ProfileRun r;
  r.id = 8;
  r.kind = "comm";
  r.device_type = device_type;
  auto add = [&r](const std::string& coll, int64_t bytes, double us) {
    CommProfile c;
    c.backend = "gloo";
    c.collective = coll;
    c.devices_per_host = 2;
    c.link = "same-host";
    c.bytes = bytes;
    c.time_us = us;
    r.comms.push_back(c);
  };
  add("all_reduce", 100, 10);
  add("all_reduce", 1000, 100);
  add("send_recv", 100, 5);
  add("send_recv", 1000, 50);
  return r;
}

}  // namespace cellsched::testing

namespace cellsched::testing {

// Roofline-shaped profiles of any model on `device_type`: per layer and tp
// degree, fwd = 0.05 ms + FLOPs / (peak x 40%), bwd = 2 fwd, at micro-batches 1..8;
// collectives as a ring with 10 us steps, 100 GB/s inside a host, 10 GB/s between.
inline ProfileRun roofline_compute(const ModelSpec& m, const std::string& device_type, double peak_tflops) {
  ProfileRun r;
  r.id = 11;
  r.kind = "compute";
  r.model = m.name;
  r.device_type = device_type;
  std::vector<std::string> seen;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    bool dup = false;
    for (const auto& s : seen) dup = dup || s == l.shape_key;
    if (dup) continue;
    seen.push_back(l.shape_key);
    for (int tp : {1, 2, 4, 8}) {
      if (tp > 1 && !l.tensor_parallel) break;
      for (int mb : {1, 2, 4, 8}) {
        LayerProfile p;
        p.layer_index = static_cast<int>(i);
        p.layer_name = l.name;
        p.shape_key = l.shape_key;
        p.tp_degree = tp;
        p.micro_batch = mb;
        p.flops = l.flops_per_sample * mb / tp;
        p.fwd_ms = 0.05 + p.flops / (peak_tflops * 1e12 * 0.4) * 1e3;
        p.bwd_ms = 2 * p.fwd_ms;
        r.layers.push_back(p);
      }
    }
  }
  return r;
}

inline ProfileRun ring_comm(const std::string& device_type) {
  ProfileRun r;
  r.id = 12;
  r.kind = "comm";
  r.device_type = device_type;
  for (const char* link : {"same-host", "network"}) {
    const double gbps = std::string(link) == "network" ? 10 : 100;
    for (int n : {2, 4, 8}) {
      for (const char* coll : {"all_reduce", "send_recv"}) {
        if (std::string(coll) == "send_recv" && n != 2) continue;
        for (double bytes = 1024; bytes <= 1 << 30; bytes *= 16) {
          CommProfile c;
          c.collective = coll;
          c.devices_per_host = n;
          c.link = link;
          c.bytes = static_cast<int64_t>(bytes);
          const double f = busbw_factor(coll, n);
          c.time_us = 10 * (std::string(coll) == "all_reduce" ? 2 * (n - 1) : 1) + f * bytes / (gbps * 1e3);
          r.comms.push_back(c);
        }
      }
    }
  }
  return r;
}

// A model with uneven layers: sizes cycle through 1, 3, 2 (x base params and FLOPs).
inline ModelSpec uneven_model(int n, double params = 1e6) {
  ModelSpec m;
  m.name = "uneven";
  m.family = "gpt";
  const double w[] = {1, 3, 2};
  for (int i = 0; i < n; ++i) {
    LayerSpec l;
    l.name = "block." + std::to_string(i);
    l.kind = "decoder";
    l.shape_key = "dec" + std::to_string(i % 3);
    l.params = params * w[i % 3];
    l.flops_per_sample = 2e9 * w[i % 3];
    l.activation_bytes_per_sample = 4e5;
    l.saved_bytes_per_sample = 4e6 * w[i % 3];
    l.tensor_parallel = i % 3 != 0;
    m.layers.push_back(l);
  }
  return m;
}

}  // namespace cellsched::testing
