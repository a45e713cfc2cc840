// The profiler's logic without devices: planning (once per shape), statistics,
// nccl-tests bandwidths, and CUPTI record correlation from synthesized records
// fed through the same CuptiTimer the CUDA path uses.
#include <gtest/gtest.h>

#include <deque>
#include <thread>

#include "core/error.h"
#include "core/model.h"
#include "profiler/backends.h"
#include "profiler/busy_cpu.h"
#include "profiler/comm.h"
#include "profiler/compute.h"
#include "profiler/cupti_records.h"

namespace cellsched::profiler {
namespace {

// A backend that returns scripted times: fwd = flops-proportional, bwd = 2x.
class FakeBackend : public ComputeBackend {
 public:
  std::string timer() const override { return "fake"; }
  int threads() const override { return 1; }
  std::map<std::string, std::string> versions() const override { return {{"fake", "1"}}; }
  std::string detected_device_type() const override { return "cpu"; }
  int64_t cache_bytes() const override { return 4 << 20; }
  void set_cache_flush(int64_t bytes) override { flush = bytes; }
  int64_t flush = -1;
  double memory_gbps() override { return 12.5; }
  std::vector<double> memory_gbps_shared(int max_streams) override {
    std::vector<double> v;
    for (int k = 1; k <= max_streams; ++k) v.push_back(12.5 / (0.5 + 0.5 * k));
    return v;
  }
  void expand(ModelSpec&) override {}
  LayerSamples time_layer(const ModelSpec& m, size_t i, int tp, int mb, int, int reps) override {
    calls.push_back(m.layers[i].name);
    LayerSamples s;
    for (int r = 0; r < reps; ++r) {
      s.fwd_ms.push_back(m.layers[i].flops_per_sample * mb / tp / 1e9 + r);
      s.bwd_ms.push_back(2 * s.fwd_ms.back());
    }
    return s;
  }
  std::vector<std::string> calls;
};

TEST(Plan, CachesAreFlushedOnlyForModelsThatDoNotFitInThem) {
  const ModelSpec tiny = model_by_name("gpt-tiny"), big = model_by_name("gpt-125m");
  EXPECT_EQ(cache_flush_for(tiny, int64_t{32} << 20), 0);                 // training keeps it cached
  EXPECT_EQ(cache_flush_for(big, int64_t{32} << 20), int64_t{128} << 20);  // 4 x the cache
  EXPECT_EQ(cache_flush_for(big, int64_t{1} << 20), int64_t{64} << 20);    // at least 64 MiB
  EXPECT_EQ(cache_flush_for(big, 0), int64_t{128} << 20);                  // unknown: 32 MiB
  ComputeOptions o;
  o.micro_batches = {1};
  o.tp_degrees = {1};
  o.cache_flush_bytes = 0;  // asked for warm caches
  FakeBackend b;
  ModelSpec m = big;
  EXPECT_EQ(profile_compute(b, m, o).cache_flush_bytes, 0);
  EXPECT_EQ(b.flush, 0);
  m = tiny;
  o.cache_flush_bytes = -1;
  EXPECT_EQ(profile_compute(b, m, o).cache_flush_bytes, 0);  // 4 MiB cache, a 1.8 MB working set
}

// A 2-CPU virtual machine here reports its host socket's 480 MiB L3; its own
// share is far smaller, and with the reported size no model would be flushed.
TEST(Plan, AReportedCacheIsCappedAtItsSharingCpusShare) {
  using detail::cpus_in_list;
  using detail::effective_cache_bytes;
  EXPECT_EQ(cpus_in_list("0-1"), 2);
  EXPECT_EQ(cpus_in_list("0-3,8"), 5);
  EXPECT_EQ(cpus_in_list("7"), 1);
  EXPECT_EQ(cpus_in_list(""), 0);
  constexpr int64_t MiB = int64_t{1} << 20;
  EXPECT_EQ(effective_cache_bytes(480 * MiB, 2), 2 * detail::kCacheBytesPerCpu);
  EXPECT_EQ(effective_cache_bytes(32 * MiB, 16), 32 * MiB);  // a bare-metal socket: as reported
  EXPECT_EQ(effective_cache_bytes(32 * MiB, 0), 32 * MiB);   // sharing unknown: as reported
  EXPECT_EQ(effective_cache_bytes(0, 2), 0);
  const ModelSpec m = model_by_name("gpt-cpu");
  EXPECT_EQ(cache_flush_for(m, 480 * MiB), 0);
  EXPECT_EQ(cache_flush_for(m, effective_cache_bytes(480 * MiB, 2)), 64 * MiB);
}

// One micro-batch size, no tensor parallelism, 6 repetitions in 3 passes of 2.
ComputeOptions six_repetitions_in_three_passes() {
  ComputeOptions o;
  o.micro_batches = {1};
  o.tp_degrees = {1};
  o.repetitions = 6;
  o.passes = 3;
  return o;
}

// validate's trial rounds run between the profile's passes: the hook is
// called after every pass but the last, after that pass's measurements.
TEST(Plan, BetweenPassesRunsAfterEveryPassButTheLast) {
  ComputeOptions o = six_repetitions_in_three_passes();
  FakeBackend b;
  std::vector<std::pair<int, size_t>> hooks;  // (pass, layer timings so far)
  o.between_passes = [&](int pass) { hooks.emplace_back(pass, b.calls.size()); };
  ModelSpec m = model_by_name("gpt-tiny");
  const size_t per_pass = plan_compute(m, o).size();
  const ProfileRun run = profile_compute(b, m, o);
  ASSERT_EQ(hooks.size(), 2u);
  EXPECT_EQ(hooks[0], std::make_pair(0, per_pass));
  EXPECT_EQ(hooks[1], std::make_pair(1, 2 * per_pass));
  EXPECT_EQ(b.calls.size(), 3 * per_pass);
  for (const auto& l : run.layers) EXPECT_EQ(l.repetitions, 6);
}

TEST(Plan, EachDistinctShapeOncePerDegreeAndMicroBatch) {
  ModelSpec m = model_by_name("gpt-350m");
  ComputeOptions o;
  o.micro_batches = {1, 2};
  o.tp_degrees = {1, 2, 4, 8};
  const auto plan = plan_compute(m, o);
  EXPECT_EQ(plan.size(), 3u * 4 * 2);  // embedding, one block, head
  FakeBackend b;
  const ProfileRun run = profile_compute(b, m, o);
  EXPECT_EQ(run.layers.size(), plan.size());
  EXPECT_EQ(run.mem_gbps, 12.5);  // provenance from the backend
  // On a CPU, one process's bandwidth while up to 3 others stream (as the CPUs allow).
  const auto cpus = std::max(1U, std::thread::hardware_concurrency());
  ASSERT_EQ(run.mem_gbps_streams.size(), cpus > 1 ? std::min(4U, cpus) : 0U);
  if (cpus > 1) {
    EXPECT_DOUBLE_EQ(run.mem_gbps_streams[1], 12.5 / 1.5);
  }
  EXPECT_EQ(run.cache_flush_bytes, 64 << 20);  // gpt-350m does not fit in a 4 MiB cache
  EXPECT_EQ(b.flush, 64 << 20);
  EXPECT_EQ(std::count(b.calls.begin(), b.calls.end(), "block.0"), 8);
  EXPECT_EQ(std::count(b.calls.begin(), b.calls.end(), "block.1"), 0);
  for (const auto& l : run.layers) {
    EXPECT_EQ(l.repetitions, 3);
    EXPECT_DOUBLE_EQ(l.bwd_ms, 2 * l.fwd_ms);
  }
  // A shard holds 1/tp of the matrices.
  const auto& l1 = run.layers[8];
  const auto& l2 = run.layers[10];
  EXPECT_EQ(l1.layer_name, "block.0");
  EXPECT_EQ(l2.tp_degree, 2);
  EXPECT_DOUBLE_EQ(l2.param_bytes * 2, l1.param_bytes);
  EXPECT_DOUBLE_EQ(l2.flops * 2, l1.flops);
}

TEST(Plan, WideResNetBlocksAreNotSplit) {
  ModelSpec m = model_by_name("wrn-tiny");
  ComputeOptions o;
  o.tp_degrees = {1, 2};
  o.micro_batches = {1};
  for (const auto& p : plan_compute(m, o)) EXPECT_EQ(p.tp, 1);
}

TEST(Plan, BadOptionsAreInputErrors) {
  ModelSpec m = model_by_name("gpt-tiny");
  FakeBackend b;
  ComputeOptions o;
  o.tp_degrees = {3};
  EXPECT_THROW(profile_compute(b, m, o), InputError);
  o = ComputeOptions();
  o.micro_batches = {0};
  EXPECT_THROW(profile_compute(b, m, o), InputError);
  o = ComputeOptions();
  o.repetitions = 0;
  EXPECT_THROW(profile_compute(b, m, o), InputError);
  o = ComputeOptions();
  o.device = "tpu";
  EXPECT_THROW(make_compute_backend(o), InputError);
}

// Interleaved passes: every measurement gets its share of the repetitions in
// each pass, in plan order, so a slow phase of the host lands on all of them.
TEST(Plan, PassesInterleaveTheRepetitionsOfEveryMeasurement) {
  ModelSpec m = model_by_name("gpt-tiny");
  FakeBackend once, interleaved;
  ComputeOptions o;
  o.tp_degrees = {1};
  o.micro_batches = {1};
  o.repetitions = 7;
  const ProfileRun a = profile_compute(once, m, o);
  o.passes = 3;
  const ProfileRun b = profile_compute(interleaved, m, o);
  const size_t n = a.layers.size();
  ASSERT_EQ(once.calls.size(), n);
  ASSERT_EQ(interleaved.calls.size(), 3 * n);
  for (size_t pass = 0; pass < 3; ++pass)
    for (size_t k = 0; k < n; ++k) EXPECT_EQ(interleaved.calls[pass * n + k], once.calls[k]) << pass << " " << k;
  ASSERT_EQ(b.layers.size(), n);
  for (const auto& l : b.layers) EXPECT_EQ(l.repetitions, 7);  // 3 + 2 + 2
  o.passes = 8;  // more passes than repetitions
  EXPECT_THROW(profile_compute(interleaved, m, o), InputError);
}

// A host slowed during two of three passes: only the measurement whose
// passes disagree runs again, until its passes agree or the extra passes
// run out; its median then comes from the undisturbed passes.
TEST(Plan, ExtraPassesRetakeOnlyTheMeasurementsWhosePassesDisagree) {
  struct Slowed : FakeBackend {
    int seen = 0;  // calls for the slowed layer
    LayerSamples time_layer(const ModelSpec& m, size_t i, int tp, int mb, int w, int reps) override {
      LayerSamples s = FakeBackend::time_layer(m, i, tp, mb, w, 0);
      for (int r = 0; r < reps; ++r) {
        const bool slow = i == 1 && (seen == 1 || seen == 2);
        s.fwd_ms.push_back(slow ? 15.0 : 10.0);
        s.bwd_ms.push_back(slow ? 30.0 : 20.0);
      }
      if (i == 1) ++seen;
      return s;
    }
  };
  ModelSpec m = model_by_name("gpt-tiny");
  ComputeOptions o = six_repetitions_in_three_passes();
  Slowed none;
  const ProfileRun before = profile_compute(none, m, o);
  EXPECT_DOUBLE_EQ(before.layers[1].fwd_ms, 15);  // 4 of 6 repetitions slow
  o.extra_passes = 2;
  Slowed two;
  std::vector<std::pair<int, size_t>> hooks;  // (pass, layer timings so far)
  o.between_passes = [&](int pass) { hooks.emplace_back(pass, two.calls.size()); };
  const ProfileRun after = profile_compute(two, m, o);
  const size_t n = after.layers.size();
  ASSERT_EQ(two.calls.size(), 3 * n + 2);  // layer 1 twice more, nothing else
  // The hook runs before each extra pass too (validate's last trial round
  // then separates the extra pass from the slow phase), not only between
  // the planned passes.
  const std::vector<std::pair<int, size_t>> want = {{0, n}, {1, 2 * n}, {2, 3 * n}, {3, 3 * n + 1}};
  EXPECT_EQ(hooks, want);
  EXPECT_EQ(two.calls[3 * n], two.calls[1]);
  EXPECT_EQ(after.layers[1].repetitions, 10);
  EXPECT_DOUBLE_EQ(after.layers[1].fwd_ms, 10);  // 6 of 10 repetitions undisturbed
  EXPECT_DOUBLE_EQ(after.layers[1].bwd_ms, 20);
  for (size_t k = 0; k < n; ++k) {
    if (k != 1) {
      EXPECT_EQ(after.layers[k].repetitions, 6);
    }
  }
  o.extra_passes = -1;
  EXPECT_THROW(profile_compute(two, m, o), InputError);
}

TEST(Comm, BandwidthsAsNcclTestsReportThem) {
  // 1 MB all-reduce over 4 ranks, median of the slowest rank 100 us -> algbw 10 GB/s, busbw 15 GB/s.
  const CommProfile c = make_comm_profile("gloo", "all_reduce", 4, 1000000,
                                          {{90, 100, 110}, {100, 80, 100}, {50, 100, 120}, {100, 100, 100}});
  EXPECT_DOUBLE_EQ(c.time_us, 100);  // per repetition the slowest rank: 100, 100, 120
  EXPECT_NEAR(c.algbw_gbps, 10.0, 1e-9);
  EXPECT_NEAR(c.busbw_gbps, c.algbw_gbps * 1.5, 1e-9);
  const CommProfile g = make_comm_profile("nccl", "all_gather", 8, 8 << 20, {{1000}});
  EXPECT_NEAR(g.algbw_gbps, (8 << 20) / 1e3 / 1e3, 1e-9);  // 8.388608 GB/s
  EXPECT_NEAR(g.busbw_gbps, g.algbw_gbps * 7 / 8, 1e-9);
  EXPECT_EQ(g.devices_per_host, 8);
  EXPECT_EQ(g.link, "same-host");
}

TEST(Comm, WorkerArgvRoundTripsAndBadOptionsFail) {
  CommWorkerArgs a;
  a.backend = "gloo";
  a.rank = 1;
  a.world = 2;
  a.store_dir = "/tmp/x";
  a.sizes = {1024, 2048};
  a.collectives = {"all_reduce", "send_recv"};
  a.out_path = "/tmp/x/out";
  a.repetitions = 6;
  a.passes = 3;
  const CommWorkerArgs b = parse_worker_argv(to_argv(a));
  EXPECT_EQ(b.passes, 3);
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.sizes, a.sizes);
  EXPECT_EQ(b.collectives, a.collectives);
  EXPECT_THROW(parse_worker_argv({"--rank", "x"}), InputError);
  CommOptions o;
  o.worker_command = {"/bin/false"};
  o.collectives = {"broadcast_all"};
  EXPECT_THROW(profile_comm(o), InputError);
  o = CommOptions();
  o.worker_command = {"/bin/false"};
  o.backend = "mpi";
  EXPECT_THROW(profile_comm(o), InputError);
  o = CommOptions();
  o.worker_command = {"/bin/false"};
  o.passes = o.repetitions + 1;
  EXPECT_THROW(profile_comm(o), InputError);
  o = CommOptions();
  o.worker_command = {"/bin/false"};  // every worker fails: a failure, not a hang
  o.sizes = {1024};
  EXPECT_THROW(profile_comm(o), std::runtime_error);
  EXPECT_EQ(default_sizes("nccl").back(), int64_t{256} << 20);
  EXPECT_EQ(default_sizes("gloo").front(), 1024);
}

// ---- CUPTI records ----

KernelRecord kernel(uint64_t start, uint64_t end, uint32_t corr) {
  KernelRecord k;
  k.start_ns = start;
  k.end_ns = end;
  k.correlation_id = corr;
  k.name = "k" + std::to_string(corr);
  return k;
}

TEST(Comm, BusyCpuSpinsUntilStoppedAndOnlyThen) {
  // The CPU send_recv is timed while each rank's CPU is kept busy, as a
  // pipeline stage's compute keeps it (gloo_comm.cc).
  cellsched::profiler::BusyCpu busy;
  while (busy.spins() < 1000) std::this_thread::yield();
  busy.stop();
  const long long after = busy.spins();
  EXPECT_GE(after, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(busy.spins(), after);
  busy.stop();  // twice is fine
}

TEST(Cupti, KernelsAreSummedPerRegionWithoutDoubleCountingOverlap) {
  ActivityRecords r;
  r.kernels = {kernel(0, 1000000, 1), kernel(500000, 1500000, 2),  // overlap: busy 1.5 ms
               kernel(3000000, 3250000, 3),                        // region 7 too: +0.25
               kernel(10000000, 12000000, 4),                      // region 8
               kernel(20000000, 30000000, 99)};                    // no region: ignored
  r.correlations = {{1, 7}, {2, 7}, {3, 7}, {4, 8}};
  const auto ms = kernel_ms_by_external_id(r);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_DOUBLE_EQ(ms.at(7), 1.75);
  EXPECT_DOUBLE_EQ(ms.at(8), 2.0);
}

// Replays recorded records: what a run of two regions produced.
class FakeActivityApi : public ActivityApi {
 public:
  explicit FakeActivityApi(std::deque<ActivityRecords> flushes) : flushes_(std::move(flushes)) {}
  void push_external_id(uint64_t id) override { stack.push_back(id); pushed.push_back(id); }
  void pop_external_id() override { stack.pop_back(); }
  ActivityRecords flush() override {
    ActivityRecords r = std::move(flushes_.front());
    flushes_.pop_front();
    return r;
  }
  std::vector<uint64_t> stack, pushed;

 private:
  std::deque<ActivityRecords> flushes_;
};

TEST(Cupti, TimerCorrelatesRegionsThroughTheActivityApi) {
  ActivityRecords first;
  first.kernels = {kernel(100, 2100, 11), kernel(5000, 9000, 12)};
  first.correlations = {{11, 1}, {12, 2}};
  first.dropped = 3;
  auto api = std::make_unique<FakeActivityApi>(std::deque<ActivityRecords>{first});
  FakeActivityApi* raw = api.get();
  int syncs = 0;
  CuptiTimer timer(std::move(api), [&] { ++syncs; });
  timer.start(1);
  timer.stop(1);
  timer.start(2);
  timer.stop(2);
  EXPECT_TRUE(raw->stack.empty());
  EXPECT_EQ(raw->pushed, (std::vector<uint64_t>{1, 2}));
  const auto ms = timer.collect_ms();
  EXPECT_EQ(syncs, 1);
  EXPECT_DOUBLE_EQ(ms.at(1), 0.002);
  EXPECT_DOUBLE_EQ(ms.at(2), 0.004);
  EXPECT_EQ(timer.dropped(), 3u);
}

}  // namespace
}  // namespace cellsched::profiler
