// Shared by the libFuzzer harnesses: each reader takes a path, so the input
// is written to a file of this process first (tmpfs when there is one).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace cellsched::fuzz {

// Writes `data` to a per-process file ending in `ext`; returns its path.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& ext) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/cellsched-fuzz-" + std::to_string(getpid()) + ext;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

}  // namespace cellsched::fuzz
