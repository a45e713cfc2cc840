// Reading YAML input files (internal to core/): the parsed document, or an
// InputError naming file:line; and the 1-based line of a node (0: unknown).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "core/error.h"
#include "core/parse_util.h"

namespace cellsched::detail {

inline long yaml_line(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? 0 : m.line + 1;
}

// The line where a second YAML document starts (content after a '---' line
// that follows content), 0 if none. A '---' always starts a document at
// column 0 (a block scalar's lines are indented).
inline long second_document_line(std::string_view text) {
  bool content = false, after_marker = false;
  long line = 0;
  for (std::string_view l : split_lines(text)) {
    ++line;
    const std::string_view t = trim(l);
    if (t.empty() || t.front() == '#') continue;
    const bool marker = l.substr(0, 3) == "---" && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    const bool end = l.substr(0, 3) == "..." && trim(l.substr(3)).empty();
    if (end) continue;
    if (marker) {
      const std::string_view rest = trim(l.substr(3));
      if (content) after_marker = true;
      if (rest.empty() || rest.front() == '#') continue;
    }
    if (after_marker) return line;
    content = true;
  }
  return 0;
}

// One document: a second (after `---`) is an error at its line, where
// YAML::Load read the first alone and dropped the rest without a word.
// (YAML::LoadAll is not used: it loops forever on some inputs, a NUL byte
// among them, which the fuzzer found.)
inline YAML::Node load_yaml_file(const std::string& path) {
  const std::string text = read_file(path);
  if (const long second = second_document_line(text))
    fail_input(path, second, "a second YAML document: put everything in one (no '---' between parts)");
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail_input(path, e.mark.is_null() ? 0 : e.mark.line + 1, e.msg);
  }
}

}  // namespace cellsched::detail
