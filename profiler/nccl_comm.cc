// Collectives on GPUs with NCCL: one process per GPU, or one process driving
// several (grouped init and launches). The unique id travels through a file
// in the rendezvous directory (written to a temporary name, then renamed), so
// no MPI is needed. Times come from CUDA events around each collective.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "profiler/backends.h"

namespace cellsched::profiler::detail {
namespace {

namespace fs = std::filesystem;

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void nccl_ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}

ncclUniqueId exchange_id(const CommWorkerArgs& a) {
  ncclUniqueId id{};
  const fs::path path = fs::path(a.store_dir) / "nccl_id";
  if (a.rank == 0) {
    nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const fs::path tmp = path.string() + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary);
      f.write(id.internal, sizeof id.internal);
      if (!f) throw std::runtime_error("cannot write " + tmp.string());
    }
    fs::rename(tmp, path);
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("no NCCL unique id from rank 0 in 120 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream f(path, std::ios::binary);
  f.read(id.internal, sizeof id.internal);
  if (!f) throw std::runtime_error("cannot read " + path.string());
  return id;
}

struct LocalRank {
  int rank = 0, device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
};

class NcclCommunicator : public Communicator {
 public:
  explicit NcclCommunicator(const CommWorkerArgs& a) : world_(a.world) {
    int devices = 0;
    cuda_ok(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    if (devices < a.local_ranks) throw std::runtime_error("this process drives " + std::to_string(a.local_ranks) + " GPUs but sees " + std::to_string(devices));
    const ncclUniqueId id = exchange_id(a);
    locals_.resize(a.local_ranks);
    nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (int i = 0; i < a.local_ranks; ++i) {
      LocalRank& l = locals_[i];
      l.rank = a.rank + i;
      l.device = (a.rank + i) % devices;
      cuda_ok(cudaSetDevice(l.device), "cudaSetDevice");
      nccl_ok(ncclCommInitRank(&l.comm, a.world, id, l.rank), "ncclCommInitRank");
    }
    nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
    for (LocalRank& l : locals_) {
      cuda_ok(cudaSetDevice(l.device), "cudaSetDevice");
      cuda_ok(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      cuda_ok(cudaEventCreate(&l.start), "cudaEventCreate");
      cuda_ok(cudaEventCreate(&l.end), "cudaEventCreate");
      cuda_ok(cudaMalloc(&l.send, 4), "cudaMalloc");  // barrier buffer until prepare()
      cuda_ok(cudaMalloc(&l.recv, 4), "cudaMalloc");
    }
    device_type_ = cuda_device_type(locals_[0].device);
  }
  ~NcclCommunicator() override {
    for (LocalRank& l : locals_) {
      cudaSetDevice(l.device);
      cudaFree(l.send);
      cudaFree(l.recv);
      cudaEventDestroy(l.start);
      cudaEventDestroy(l.end);
      cudaStreamDestroy(l.stream);
      if (l.comm) ncclCommDestroy(l.comm);
    }
  }

  std::string device_type() const override { return device_type_.empty() ? "unknown" : device_type_; }
  std::string timer() const override { return "cuda_events"; }
  std::map<std::string, std::string> versions() const override {
    return {{"nccl", nccl_version()}, {"cuda", cuda_versions()}};
  }

  int64_t prepare(const std::string& collective, int64_t bytes) override {
    coll_ = collective;
    const int64_t n = world_;
    count_ = std::max<int64_t>(bytes / 4, 1);
    if (collective == "all_gather" || collective == "reduce_scatter" || collective == "all_to_all")
      count_ = std::max<int64_t>(count_ / n, 1) * n;
    for (LocalRank& l : locals_) {
      cuda_ok(cudaSetDevice(l.device), "cudaSetDevice");
      cudaFree(l.send);
      cudaFree(l.recv);
      cuda_ok(cudaMalloc(&l.send, count_ * 4), "cudaMalloc");
      cuda_ok(cudaMalloc(&l.recv, count_ * 4), "cudaMalloc");
      cuda_ok(cudaMemset(l.send, 0, count_ * 4), "cudaMemset");
    }
    return count_ * 4;
  }

  double run_us() override {
    const size_t n = world_, chunk = count_ / n;
    for (LocalRank& l : locals_) {
      cuda_ok(cudaSetDevice(l.device), "cudaSetDevice");
      cuda_ok(cudaEventRecord(l.start, l.stream), "cudaEventRecord");
    }
    nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (LocalRank& l : locals_) {
      if (coll_ == "all_reduce") {
        nccl_ok(ncclAllReduce(l.send, l.recv, count_, ncclFloat, ncclSum, l.comm, l.stream), "ncclAllReduce");
      } else if (coll_ == "all_gather") {
        nccl_ok(ncclAllGather(l.send, l.recv, chunk, ncclFloat, l.comm, l.stream), "ncclAllGather");
      } else if (coll_ == "reduce_scatter") {
        nccl_ok(ncclReduceScatter(l.send, l.recv, chunk, ncclFloat, ncclSum, l.comm, l.stream), "ncclReduceScatter");
      } else if (coll_ == "all_to_all") {  // grouped point-to-point, as nccl-tests does
        for (size_t p = 0; p < n; ++p) {
          nccl_ok(ncclSend(l.send + p * chunk, chunk, ncclFloat, static_cast<int>(p), l.comm, l.stream), "ncclSend");
          nccl_ok(ncclRecv(l.recv + p * chunk, chunk, ncclFloat, static_cast<int>(p), l.comm, l.stream), "ncclRecv");
        }
      } else if (coll_ == "send_recv") {  // ring
        nccl_ok(ncclSend(l.send, count_, ncclFloat, (l.rank + 1) % world_, l.comm, l.stream), "ncclSend");
        nccl_ok(ncclRecv(l.recv, count_, ncclFloat, (l.rank + world_ - 1) % world_, l.comm, l.stream), "ncclRecv");
      }
    }
    nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
    double us = 0;
    for (LocalRank& l : locals_) {
      cuda_ok(cudaSetDevice(l.device), "cudaSetDevice");
      cuda_ok(cudaEventRecord(l.end, l.stream), "cudaEventRecord");
    }
    for (LocalRank& l : locals_) {
      cuda_ok(cudaEventSynchronize(l.end), "cudaEventSynchronize");
      float ms = 0;
      cuda_ok(cudaEventElapsedTime(&ms, l.start, l.end), "cudaEventElapsedTime");
      us = std::max(us, ms * 1000.0);
    }
    return us;
  }

  // NCCL has no barrier: a one-element all-reduce, waited for.
  void barrier() override {
    nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (LocalRank& l : locals_)
      nccl_ok(ncclAllReduce(l.send, l.recv, 1, ncclFloat, ncclSum, l.comm, l.stream), "ncclAllReduce");
    nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
    for (LocalRank& l : locals_) cuda_ok(cudaStreamSynchronize(l.stream), "cudaStreamSynchronize");
  }

 private:
  int world_;
  std::vector<LocalRank> locals_;
  std::string coll_, device_type_;
  int64_t count_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const CommWorkerArgs& args) {
  return std::make_unique<NcclCommunicator>(args);
}

std::string nccl_version() {
  int v = 0;
  ncclGetVersion(&v);
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace cellsched::profiler::detail
