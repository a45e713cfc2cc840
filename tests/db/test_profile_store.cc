// ProfileStore: round trip, provenance, and bad input that changes nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "db/profile_store.h"

namespace cellsched::db {
namespace {

ProfileRun compute_run() {
  ProfileRun r;
  r.kind = "compute";
  r.model = "gpt-tiny";
  r.device = "cpu";
  r.device_type = "cpu";
  r.host = "h1";
  r.timer = "steady_clock";
  r.threads = 2;
  r.repetitions = 3;
  r.versions = {{"libtorch", "1.13.1"}};
  r.mem_gbps = 21.5;
  r.cache_flush_bytes = 128 << 20;
  r.mem_gbps_streams = {21.5, 14.25};
  for (int i = 0; i < 3; ++i) {
    LayerProfile l;
    l.layer_index = i;
    l.layer_name = "block." + std::to_string(i);
    l.shape_key = "decoder:" + std::to_string(i);
    l.tp_degree = 1 << i;
    l.micro_batch = 2;
    l.param_bytes = 1e6 / (i + 1);
    l.flops = 3.5e9;
    l.fwd_ms = 1.25 + i;
    l.bwd_ms = 2.5 + i;
    l.fwd_spread_ms = 0.1;
    l.repetitions = 3;
    r.layers.push_back(l);
  }
  return r;
}

TEST(ProfileStore, RoundTripsComputeAndComm) {
  ProfileStore s = ProfileStore::open(":memory:");
  ProfileRun a = compute_run();
  const int64_t id = s.save(a);
  EXPECT_GT(id, 0);
  EXPECT_FALSE(a.created_at.empty());
  ProfileRun c;
  c.kind = "comm";
  c.device = "cpu";
  c.device_type = "cpu";
  c.timer = "steady_clock";
  c.repetitions = 5;
  CommProfile p;
  p.backend = "gloo";
  p.collective = "all_reduce";
  p.devices_per_host = 2;
  p.link = "same-host";
  p.bytes = 4096;
  p.time_us = 55.5;
  p.algbw_gbps = 0.0738;
  p.busbw_gbps = 0.0738;
  p.repetitions = 5;
  c.comms = {p};
  s.save(c);

  const auto back = s.load(id);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->model, "gpt-tiny");
  EXPECT_EQ(back->versions.at("libtorch"), "1.13.1");
  EXPECT_DOUBLE_EQ(back->mem_gbps, 21.5);
  EXPECT_EQ(back->cache_flush_bytes, 128 << 20);
  EXPECT_EQ(back->mem_gbps_streams, (std::vector<double>{21.5, 14.25}));
  ASSERT_EQ(back->layers.size(), 3u);
  EXPECT_EQ(back->layers[2].tp_degree, 4);
  EXPECT_DOUBLE_EQ(back->layers[2].bwd_ms, 4.5);
  EXPECT_DOUBLE_EQ(back->layers[1].param_bytes, 5e5);
  const auto cb = s.load(c.id);
  ASSERT_EQ(cb->comms.size(), 1u);
  EXPECT_DOUBLE_EQ(cb->comms[0].time_us, 55.5);
  EXPECT_EQ(cb->comms[0].devices_per_host, 2);
  const auto list = s.list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, c.id);  // newest first
  EXPECT_EQ(list[1].records, 3);
  EXPECT_EQ(s.latest_compute("gpt-tiny", "cpu"), id);
  EXPECT_EQ(s.latest_compute("gpt-tiny", "h100"), 0);
  EXPECT_FALSE(s.load(999));
  // A newer run without layers at tp 1 (profile compute --tp 2) cannot price
  // an estimate: the default selection skips it (it hid the usable one).
  ProfileRun tp2 = compute_run();
  tp2.layers.erase(tp2.layers.begin());
  s.save(tp2);
  EXPECT_EQ(s.latest_compute("gpt-tiny", "cpu"), id);
}

TEST(ProfileStore, BadInputChangesNothing) {
  ProfileStore s = ProfileStore::open(":memory:");
  ProfileRun bad = compute_run();
  bad.layers[2].fwd_ms = -1;
  EXPECT_THROW(s.save(bad), InputError);
  bad = compute_run();
  bad.layers[1].bwd_ms = std::nan("");
  EXPECT_THROW(s.save(bad), InputError);
  bad = compute_run();
  bad.kind = "other";
  EXPECT_THROW(s.save(bad), InputError);
  bad = compute_run();
  bad.layers[0].tp_degree = 0;
  EXPECT_THROW(s.save(bad), InputError);
  for (double v : {0.0, -3.0, std::nan(""), static_cast<double>(INFINITY)}) {
    bad = compute_run();
    bad.mem_gbps_streams = {20, v};
    EXPECT_THROW(s.save(bad), InputError) << v;
  }
  EXPECT_TRUE(s.list().empty());
}

}  // namespace
}  // namespace cellsched::db
