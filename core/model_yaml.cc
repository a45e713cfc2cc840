// Model descriptions from YAML files: a family and its parameters, checked
// field by field (errors name file:line), then built as the zoo builds its
// entries (core/model.cc).
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "core/model.h"
#include "core/model_build.h"
#include "core/parse_util.h"
#include "core/yaml_read.h"

namespace cellsched {

using detail::yaml_line;

ModelSpec load_model_yaml(const std::string& path) {
  const YAML::Node root = detail::load_yaml_file(path);
  if (!root.IsMap()) fail_input(path, root.IsNull() ? 0 : yaml_line(root), "expected a map with 'family' and its parameters");
  ModelSpec m;
  m.name = std::filesystem::path(path).stem().string();
  std::set<std::string> seen;
  detail::FieldLines lines;
  lines.root = yaml_line(root);
  const std::map<std::string, int ModelSpec::*> ints = {
      {"hidden", &ModelSpec::hidden},       {"num_layers", &ModelSpec::num_layers},
      {"heads", &ModelSpec::heads},         {"seq", &ModelSpec::seq},
      {"vocab", &ModelSpec::vocab},         {"experts", &ModelSpec::experts},
      {"top_k", &ModelSpec::top_k},         {"depth", &ModelSpec::depth},
      {"width_factor", &ModelSpec::width_factor}, {"image", &ModelSpec::image},
      {"classes", &ModelSpec::classes},     {"bytes_per_value", &ModelSpec::bytes_per_value},
  };
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const long line = yaml_line(kv.first);
    if (!seen.insert(key).second) fail_input(path, line, "duplicate field '" + key + "'");
    lines.field[key] = line;
    const YAML::Node& v = kv.second;
    if (key == "input_shape") {
      if (!v.IsSequence() || v.size() == 0) fail_input(path, yaml_line(v), "'input_shape' must be a non-empty list of integers");
      for (const auto& d : v) {
        const auto n = d.IsScalar() ? detail::to_int(d.Scalar()) : std::nullopt;
        if (!n || *n <= 0 || *n > (1 << 24)) fail_input(path, yaml_line(d), "'input_shape' entries must be positive integers");
        m.input_shape.push_back(static_cast<int>(*n));
      }
      continue;
    }
    if (!v.IsScalar()) fail_input(path, yaml_line(v), "'" + key + "' must be a scalar");
    const std::string val(detail::trim(v.Scalar()));
    if (key == "name") {
      m.name = val;
    } else if (key == "precision") {
      try {
        m.precision = parse_precision(val);
      } catch (const InputError& e) {
        fail_input(path, yaml_line(v), e.what());
      }
    } else if (key == "attention") {
      const std::string a = detail::lower(val);
      if (a == "auto") m.attention = Attention::Auto;
      else if (a == "fused") m.attention = Attention::Fused;
      else if (a == "unfused") m.attention = Attention::Unfused;
      else fail_input(path, yaml_line(v), "attention must be auto, fused or unfused, got '" + val + "'");
    } else if (key == "family") {
      m.family = detail::lower(val);
    } else if (key == "path") {
      m.torchscript_path = val;
      if (!m.torchscript_path.empty() && m.torchscript_path[0] != '/')
        m.torchscript_path = (std::filesystem::path(path).parent_path() / val).string();
    } else if (auto it = ints.find(key); it != ints.end()) {
      const auto n = detail::to_int(val);
      if (!n || *n < 0) fail_input(path, yaml_line(v), "'" + key + "' must be a non-negative integer, got '" + val + "'");
      // Past the largest real models by a wide margin, and small enough that
      // the layer list, the profiler's tensors and the estimator stay bounded
      // (a num_layers of 388 million hung the reader: found by fuzz_model).
      static const std::map<std::string, long long> most = {
          {"hidden", 65536},  {"num_layers", 1024}, {"heads", 1024},   {"seq", 1 << 20},
          {"vocab", 10000000}, {"experts", 4096},   {"top_k", 64},     {"depth", 1000},
          {"width_factor", 64}, {"image", 4096},    {"classes", 1000000}, {"bytes_per_value", 8}};
      if (*n > most.at(key))
        fail_input(path, yaml_line(v), "'" + key + "' must be at most " + std::to_string(most.at(key)) + ", got " + val);
      m.*(it->second) = static_cast<int>(*n);
    } else {
      fail_input(path, line, "unknown field '" + key + "'");
    }
  }
  if (m.family.empty()) fail_input(path, yaml_line(root), "missing field 'family'");
  if (m.precision != Precision::Default && seen.count("bytes_per_value") &&
      m.bytes_per_value != bytes_per_value(m.precision))
    fail_input(path, lines.of({"bytes_per_value"}), "bytes_per_value contradicts precision " + std::string(precision_name(m.precision)));
  if (m.precision != Precision::Default) m.bytes_per_value = bytes_per_value(m.precision);
  if (m.precision == Precision::Default && m.bytes_per_value == 2) m.precision = Precision::FP16;
  detail::build_layers(m, path, lines);
  return m;
}

}  // namespace cellsched
