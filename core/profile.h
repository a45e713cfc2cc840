// Profiles: what the profiler measures and the estimator reads. Plain data.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cellsched {

// Forward and backward time of one layer (or one tensor-parallel shard of
// it) at one micro-batch size, on one device.
struct LayerProfile {
  int layer_index = 0;          // first layer of this shape in the model
  std::string layer_name;
  std::string shape_key;        // LayerSpec::shape_key
  int tp_degree = 1;            // 1 = whole layer; k = one of k shards
  int micro_batch = 1;          // samples
  double param_bytes = 0;       // of this shard
  double activation_bytes = 0;  // output activation of this micro-batch
  double flops = 0;             // forward FLOPs of this micro-batch (shard)
  double fwd_ms = 0, bwd_ms = 0;            // medians
  double fwd_spread_ms = 0, bwd_spread_ms = 0;  // interquartile range
  int repetitions = 0;
};

// One collective at one message size, reported as nccl-tests does.
struct CommProfile {
  std::string backend;          // "nccl", "gloo"
  std::string collective;       // "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"
  int hosts = 1;
  int devices_per_host = 1;     // ranks = hosts x devices_per_host
  std::string link;             // "same-host", "network"
  int64_t bytes = 0;            // nccl-tests' size: each rank's buffer (all-reduce, send/recv), the whole
                                //   gathered/scattered buffer (all-gather, reduce-scatter), the send buffer (all-to-all)
  double time_us = 0;           // median
  double algbw_gbps = 0;        // bytes / time
  double busbw_gbps = 0;        // algbw x the collective's factor
  int repetitions = 0;
};

// nccl-tests' bus-bandwidth factor of a collective over n ranks:
// all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; others 1.
double busbw_factor(const std::string& collective, int ranks);

// Provenance and contents of one profiling session.
struct ProfileRun {
  int64_t id = 0;
  std::string created_at;
  std::string kind;             // "compute" or "comm"
  std::string model;            // compute: ModelSpec::name
  std::string device;           // "cpu", "cuda:0"
  std::string device_type;      // catalogue name: "cpu", "h100", ...
  std::string host;
  std::string timer;            // "steady_clock", "cupti", "cuda_events", "gloo", "nccl"
  int threads = 0;              // CPU threads used (compute on CPU)
  int repetitions = 0;
  double mem_gbps = 0;          // compute: measured memory bandwidth (a += b x s); 0 = not measured
  int64_t cache_flush_bytes = 0;  // compute: bytes rewritten before each timed region; 0 = warm caches
  // compute on a CPU: one process's bandwidth (GB/s, as mem_gbps) while k
  // processes of the host stream at once, element k-1; empty = not measured.
  std::vector<double> mem_gbps_streams;
  std::map<std::string, std::string> versions;  // "libtorch", "cuda", "nccl", "gloo", ...
  std::vector<LayerProfile> layers;
  std::vector<CommProfile> comms;
};

}  // namespace cellsched
