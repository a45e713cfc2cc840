// The running executable, for starting helpers and workers beside it.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace cellsched {

// The path /proc/self/exe points at; "" where it cannot be read.
inline std::string self_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

}  // namespace cellsched
