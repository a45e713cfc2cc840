// Keeps one CPU busy from construction to destruction: a thread that spins.
// The CPU collectives time pipeline hand-offs with it (profiler/gloo_comm.cc):
// in training each rank's CPU is computing while its send goes out, and on a
// host with no spare CPU the transfer waits for the scheduler to run it.
#pragma once

#include <atomic>
#include <thread>

namespace cellsched::profiler {

class BusyCpu {
 public:
  BusyCpu() : thread_([this] {
    while (!stop_.load(std::memory_order_relaxed)) spins_.fetch_add(1, std::memory_order_relaxed);
  }) {}
  ~BusyCpu() { stop(); }
  BusyCpu(const BusyCpu&) = delete;
  BusyCpu& operator=(const BusyCpu&) = delete;

  // Ends the spinning and joins the thread; safe to call twice.
  void stop() {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
  }
  long long spins() const { return spins_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<long long> spins_{0};
  std::thread thread_;
};

}  // namespace cellsched::profiler
