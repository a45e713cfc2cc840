// Collectives on CPUs: Gloo through LibTorch's c10d (ProcessGroupGloo over
// TCP on loopback, FileStore rendezvous). Gloo has no reduce-scatter, so it
// is emulated as all-reduce + taking this rank's slice; all-to-all uses
// alltoall_base; send/recv is a ring (send to rank+1, receive from rank-1),
// timed while a thread keeps each rank's CPU busy, as the stages' compute
// does when a pipeline hands activations on (docs/profiler.md).
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include <chrono>
#include <optional>

#include "profiler/backends.h"
#include "profiler/busy_cpu.h"

namespace cellsched::profiler::detail {
namespace {

class GlooCommunicator : public Communicator {
 public:
  explicit GlooCommunicator(const CommWorkerArgs& a) : rank_(a.rank), world_(a.world) {
    auto store = c10::make_intrusive<::c10d::FileStore>(a.store_dir + "/gloo", a.world);
    auto opts = ::c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(300000));
    opts->devices.push_back(::c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    opts->threads = 2;
    pg_ = c10::make_intrusive<::c10d::ProcessGroupGloo>(store, a.rank, a.world, opts);
  }

  std::string device_type() const override { return "cpu"; }
  std::string timer() const override { return "steady_clock"; }
  std::map<std::string, std::string> versions() const override {
    return {{"libtorch", torch_version()}, {"gloo", "c10d ProcessGroupGloo"}};
  }

  int64_t prepare(const std::string& collective, int64_t bytes) override {
    coll_ = collective;
    const int64_t n = world_;
    int64_t count = std::max<int64_t>(bytes / 4, 1);  // float32 elements
    if (collective == "all_gather" || collective == "reduce_scatter" || collective == "all_to_all")
      count = std::max<int64_t>(count / n, 1) * n;  // whole chunks per rank
    const auto f = torch::TensorOptions().dtype(torch::kFloat32);
    full_ = torch::ones({count}, f);
    if (collective == "all_gather") {
      in_ = {torch::ones({count / n}, f)};
      gathered_ = {std::vector<at::Tensor>()};
      for (int64_t r = 0; r < n; ++r) gathered_[0].push_back(torch::empty({count / n}, f));
    } else if (collective == "all_to_all" || collective == "send_recv") {
      out_ = torch::empty({count}, f);
    }
    return count * 4;
  }

  double run_us() override {
    std::optional<BusyCpu> busy;
    if (coll_ == "send_recv") busy.emplace();
    const auto t0 = std::chrono::steady_clock::now();
    if (coll_ == "all_reduce") {
      std::vector<at::Tensor> t = {full_};
      pg_->allreduce(t)->wait();
    } else if (coll_ == "reduce_scatter") {  // emulated: all-reduce, keep this rank's slice
      std::vector<at::Tensor> t = {full_};
      pg_->allreduce(t)->wait();
      const int64_t chunk = full_.numel() / world_;
      slice_ = full_.narrow(0, rank_ * chunk, chunk).clone();
    } else if (coll_ == "all_gather") {
      pg_->allgather(gathered_, in_)->wait();
    } else if (coll_ == "all_to_all") {
      std::vector<int64_t> splits;  // empty: equal splits
      pg_->alltoall_base(out_, full_, splits, splits)->wait();
    } else if (coll_ == "send_recv") {
      std::vector<at::Tensor> s = {full_}, r = {out_};
      if (world_ == 1) {
        out_.copy_(full_);
      } else {
        auto send = pg_->send(s, (rank_ + 1) % world_, 0);
        auto recv = pg_->recv(r, (rank_ + world_ - 1) % world_, 0);
        send->wait();
        recv->wait();
      }
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    busy.reset();
    return us;
  }

  void barrier() override { pg_->barrier()->wait(); }

 private:
  int rank_, world_;
  c10::intrusive_ptr<::c10d::ProcessGroupGloo> pg_;
  std::string coll_;
  at::Tensor full_, out_, slice_;
  std::vector<at::Tensor> in_;
  std::vector<std::vector<at::Tensor>> gathered_;
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const CommWorkerArgs& args) {
  return std::make_unique<GlooCommunicator>(args);
}

}  // namespace cellsched::profiler::detail
