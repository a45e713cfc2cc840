// Errors shared by every module.
#pragma once

#include <stdexcept>
#include <string>

namespace cellsched {

// Bad input from a user: a malformed file, an unknown name, an impossible
// request. The message already names the place (`file:line: what`); the CLI
// prints it and exits with status 2. Nothing is written when one is thrown.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds `file:line: what` (line 0 means the file as a whole: `file: what`).
std::string at(const std::string& file, long line, const std::string& what);

// Throws InputError(at(file, line, what)).
[[noreturn]] void fail_input(const std::string& file, long line, const std::string& what);

}  // namespace cellsched
