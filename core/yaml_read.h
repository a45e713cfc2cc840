// Reading YAML input files (internal to core/): the parsed document, or an
// InputError naming file:line; and the 1-based line of a node (0: unknown).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "core/error.h"
#include "core/parse_util.h"

namespace cellsched::detail {

inline long yaml_line(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? 0 : m.line + 1;
}

inline YAML::Node load_yaml_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail_input(path, e.mark.is_null() ? 0 : e.mark.line + 1, e.msg);
  }
}

}  // namespace cellsched::detail
