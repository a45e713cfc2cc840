// Reading YAML input files (internal to core/): the parsed document, or an
// InputError naming file:line; and the 1-based line of a node (0: unknown).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/parse_util.h"

namespace cellsched::detail {

inline long yaml_line(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? 0 : m.line + 1;
}

// One document: a second (after `---`) is an error at its line, where
// YAML::Load read the first alone and dropped the rest without a word.
inline YAML::Node load_yaml_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(text);
    for (size_t i = 1; i < docs.size(); ++i)  // an empty one (a trailing '---') holds nothing to drop
      if (!docs[i].IsNull())
        fail_input(path, yaml_line(docs[i]), "a second YAML document: put everything in one (no '---' between parts)");
    return docs.empty() ? YAML::Node() : docs.front();
  } catch (const YAML::Exception& e) {
    fail_input(path, e.mark.is_null() ? 0 : e.mark.line + 1, e.msg);
  }
}

}  // namespace cellsched::detail
