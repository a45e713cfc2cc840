// Helpers shared by the core tests.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"
#include "core/throughput.h"

#ifndef CELLSCHED_SHARED_DATA
// Fallback when the build does not define it: ../shared/data next to the repository.
#define CELLSCHED_SHARED_DATA_FALLBACK 1
#endif

namespace cellsched::testing {

// Absolute path of a file under the shared data folder (see shared/data/SOURCES.md).
inline std::string shared_data(const std::string& rel) {
#ifdef CELLSCHED_SHARED_DATA_FALLBACK
  const std::filesystem::path base =
      std::filesystem::path(__FILE__).parent_path() / ".." / ".." / ".." / "shared" / "data";
  return (base / rel).lexically_normal().string();
#else
  return std::string(CELLSCHED_SHARED_DATA) + "/" + rel;
#endif
}

// Gavel's simulation throughput table from the shared data, read once.
inline const ThroughputTable& gavel_table() {
  static const ThroughputTable t =
      load_gavel_throughputs(shared_data("gavel/simulation_throughputs.json"));
  return t;
}

// A fresh directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string tag = info ? std::string(info->test_suite_name()) + "_" + info->name() : "t";
    for (char& c : tag)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    path_ = std::filesystem::temp_directory_path() /
            ("cellsched_core_" + tag + "_" + std::to_string(::getpid()) + "_" +
             std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `content` to `name` inside the directory and returns its path.
  std::string write(const std::string& name, const std::string& content) const {
    const auto p = path_ / name;
    std::ofstream out(p, std::ios::binary);
    out << content;
    return p.string();
  }
  std::string path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs fn, expects an InputError and returns its message ("" plus a test
// failure when nothing or something else is thrown).
inline std::string input_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
  return "";
}

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace cellsched::testing

// EXPECT that `stmt` throws InputError whose message starts with `prefix`.
#define EXPECT_INPUT_ERROR_PREFIX(stmt, prefix)                                          \
  do {                                                                                   \
    const std::string msg_ = ::cellsched::testing::input_error([&] { (void)(stmt); });   \
    EXPECT_TRUE(::cellsched::testing::starts_with(msg_, prefix))                         \
        << "message: '" << msg_ << "'\nexpected prefix: '" << (prefix) << "'";           \
  } while (0)
