#include "core/error.h"

namespace cellsched {

std::string at(const std::string& file, long line, const std::string& what) {
  if (line > 0) return file + ":" + std::to_string(line) + ": " + what;
  return file + ": " + what;
}

void fail_input(const std::string& file, long line, const std::string& what) {
  throw InputError(at(file, line, what));
}

}  // namespace cellsched
