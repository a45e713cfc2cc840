#include "core/cluster.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/gpu.h"
#include "core/parse_util.h"
#include "core/yaml_read.h"

namespace cellsched {

namespace {

using detail::trim;

constexpr int kShorthandNodeGpus = 4;

std::string file_name_of(const std::string& path) {
  std::string f = std::filesystem::path(path).filename().string();
  return f.empty() ? path : f;
}

using detail::yaml_line;

std::string known_gpu_names() {
  std::string known;
  for (const auto& g : gpu_catalogue()) {
    if (!known.empty()) known += ", ";
    known += g.name;
  }
  return known;
}

std::string scalar_text(const std::string& path, const YAML::Node& v, const std::string& field) {
  if (!v.IsScalar()) fail_input(path, yaml_line(v), "'" + field + "' must be a scalar");
  std::string s = std::string(trim(v.Scalar()));
  if (s.empty()) fail_input(path, yaml_line(v), "'" + field + "' is empty");
  return s;
}

// One node of the list: name, gpu_type and gpus required, address defaulting
// to the name; a field given twice fails with both lines.
Node read_node(const std::string& path, const YAML::Node& item) {
  const long line = yaml_line(item);
  if (!item.IsMap()) fail_input(path, line, "a node must be a map with name, gpu_type, gpus");
  Node node;
  bool has_name = false, has_type = false, has_gpus = false;
  detail::FirstSeen fields("field");
  for (const auto& kv : item) {
    const std::string key = kv.first.Scalar();
    fields.add(path, yaml_line(kv.first), key);
    const YAML::Node& v = kv.second;
    if (key == "name") {
      node.name = scalar_text(path, v, key);
      has_name = true;
    } else if (key == "address") {
      node.address = scalar_text(path, v, key);
    } else if (key == "gpu_type") {
      const std::string t = scalar_text(path, v, key);
      const GpuSpec* g = find_gpu(t);
      if (!g)
        fail_input(path, yaml_line(v),
                   "unknown GPU type '" + t + "' (known: " + known_gpu_names() + ")");
      node.gpu_type = g->name;
      has_type = true;
    } else if (key == "gpus") {
      const std::string t = v.IsScalar() ? v.Scalar() : std::string();
      const auto n = detail::to_int(t);
      if (!n || *n <= 0 || *n > 1000000)
        fail_input(path, yaml_line(v), "'gpus' must be an integer in [1, 1000000], got '" + t + "'");
      node.gpus = static_cast<int>(*n);
      has_gpus = true;
    } else {
      fail_input(path, yaml_line(kv.first),
                 "unknown field '" + key + "' (expected name, address, gpu_type, gpus)");
    }
  }
  if (!has_name) fail_input(path, line, "node is missing field 'name'");
  if (!has_type) fail_input(path, line, "node '" + node.name + "' is missing field 'gpu_type'");
  if (!has_gpus) fail_input(path, line, "node '" + node.name + "' is missing field 'gpus'");
  if (node.address.empty()) node.address = node.name;
  return node;
}

}  // namespace

int Cluster::total_gpus() const {
  int n = 0;
  for (const auto& node : nodes) n += node.gpus;
  return n;
}

int Cluster::gpus_of_type(const std::string& gpu_type) const {
  int n = 0;
  for (const auto& node : nodes)
    if (node.gpu_type == gpu_type) n += node.gpus;
  return n;
}

std::vector<std::string> Cluster::gpu_types() const {
  std::vector<std::string> types;
  for (const auto& node : nodes)
    if (std::find(types.begin(), types.end(), node.gpu_type) == types.end())
      types.push_back(node.gpu_type);
  return types;
}

Cluster parse_cluster_shorthand(const std::string& spec) {
  Cluster c;
  c.name = std::string(trim(spec));
  const std::string where = "cluster spec '" + c.name + "'";
  if (c.name.empty()) throw InputError("empty cluster spec");
  std::set<std::string> seen;
  for (std::string_view part : detail::split(c.name, ',')) {
    part = trim(part);
    const size_t colon = part.find(':');
    if (part.empty() || colon == std::string_view::npos)
      throw InputError(where + ": expected TYPE:COUNT entries separated by commas, got '" +
                       std::string(part) + "'");
    const std::string type_text(trim(part.substr(0, colon)));
    const auto count = detail::to_int(part.substr(colon + 1));
    if (!count || *count <= 0 || *count > 1000000)
      throw InputError(where + ": GPU count of '" + std::string(part) +
                       "' must be an integer in [1, 1000000]");
    std::string type;
    try {
      type = canonical_gpu_name(type_text);
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
    if (!seen.insert(type).second)
      throw InputError(where + ": GPU type '" + type + "' appears twice");
    long long left = *count;
    for (int i = 0; left > 0; ++i) {
      const int g = static_cast<int>(std::min<long long>(left, kShorthandNodeGpus));
      c.nodes.push_back(Node{type + "-" + std::to_string(i), "localhost", type, g});
      left -= g;
    }
  }
  return c;
}

Cluster load_cluster_yaml(const std::string& path) {
  const YAML::Node root = detail::load_yaml_file(path);

  Cluster c;
  c.name = file_name_of(path);
  const YAML::Node& croot = root;
  long nodes_key_line = 0;
  if (croot.IsMap()) {
    detail::FirstSeen keys("field");
    for (const auto& kv : croot) {
      const std::string key = kv.first.Scalar();
      keys.add(path, yaml_line(kv.first), key);
      if (key == "name") {
        if (kv.second.IsScalar() && !trim(kv.second.Scalar()).empty())
          c.name = std::string(trim(kv.second.Scalar()));
        else if (!kv.second.IsNull() && !kv.second.IsScalar())
          fail_input(path, yaml_line(kv.second), "'name' must be a scalar");
      } else if (key == "nodes") {
        nodes_key_line = yaml_line(kv.first);
      } else if (key == "network_gbps") {
        const std::string t = kv.second.IsScalar() ? kv.second.Scalar() : std::string();
        const auto v = detail::to_double(t);
        if (!v || *v <= 0 || *v > 10000)
          fail_input(path, yaml_line(kv.second),
                     "'network_gbps' must be a bandwidth in GB/s per GPU, > 0 and <= 10000, got '" + t + "'");
        c.network_gbps = *v;
      } else {
        fail_input(path, yaml_line(kv.first),
                   "unknown field '" + key + "' (expected name, network_gbps and nodes)");
      }
    }
    if (!croot["nodes"]) fail_input(path, yaml_line(croot), "missing field 'nodes'");
  } else if (!croot.IsSequence()) {
    fail_input(path, croot.IsNull() ? 0 : yaml_line(croot),
               croot.IsNull() ? "empty file: expected a map with a 'nodes' list"
                              : "expected a map with a 'nodes' list");
  }
  const YAML::Node list = croot.IsSequence() ? croot : croot["nodes"];
  if (!list.IsSequence()) {
    if (list.IsNull()) fail_input(path, nodes_key_line, "empty node list");
    fail_input(path, yaml_line(list), "'nodes' must be a list");
  }
  if (list.size() == 0) fail_input(path, yaml_line(list), "empty node list");

  detail::FirstSeen names("node name");
  for (const auto& item : list) {
    Node node = read_node(path, item);
    names.add(path, yaml_line(item), node.name);
    c.nodes.push_back(std::move(node));
  }
  return c;
}

Cluster load_pai_machines(const std::string& path, const std::string& misc_type) {
  std::string misc;
  if (!misc_type.empty() && !find_gpu(misc_type))
    fail_input(path, 0, "--gpu-map maps 'MISC' onto '" + misc_type +
                            "', which is not in the GPU catalogue (cellsched gpus)");
  if (!misc_type.empty()) misc = canonical_gpu_name(misc_type);
  const std::string text = detail::read_file(path);
  Cluster c;
  c.name = file_name_of(path);
  detail::FirstSeen names("machine");
  long skipped_machines = 0, skipped_gpus = 0;
  long line_no = 0;
  for (std::string_view line : detail::split_lines(text)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const auto f = detail::split(line, ',');
    // A first line that is no PAI row is a header of some other file (an
    // Alibaba 2023 list with a column more, Tiresias' cluster_spec.csv):
    // say so, where the PAI reader's complaint about cap_cpu misled.
    const auto wordy = [](std::string_view v) {  // a column name, not a number (nor nan/inf)
      const std::string l = detail::lower(trim(v));
      return l != "nan" && l.find("inf") == std::string::npos &&
             std::any_of(l.begin(), l.end(), [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)) && ch != 'e'; });
    };
    if (line_no == 1 && f.size() >= 3 && wordy(f[2]) && trim(f[0]) != "machine")
      fail_input(path, line_no,
                 "unrecognised header '" + std::string(trim(line)) +
                     "': a cluster CSV is an Alibaba 2023 node list (header sn,cpu_milli,memory_mib,gpu,model) "
                     "or a PAI 2020 machine list (machine,gpu_type,cap_cpu,cap_mem,cap_gpu, no header)");
    if (f.size() != 5)
      fail_input(path, line_no,
                 "expected 5 fields (machine,gpu_type,cap_cpu,cap_mem,cap_gpu), got " +
                     std::to_string(f.size()));
    const std::string machine(trim(f[0]));
    const std::string type(trim(f[1]));
    if (line_no == 1 && machine == "machine") continue;  // tolerate a header line
    if (machine.empty()) fail_input(path, line_no, "empty machine name");
    for (int i : {2, 3}) {
      const auto v = detail::to_double(f[i]);
      if (!v || *v < 0)
        fail_input(path, line_no,
                   std::string(i == 2 ? "cap_cpu" : "cap_mem") + " must be a non-negative number, got '" +
                       std::string(trim(f[i])) + "'");
    }
    const auto gpus = detail::to_int(f[4]);
    if (!gpus || *gpus < 0 || *gpus > 1000000)
      fail_input(path, line_no,
                 "cap_gpu must be a non-negative integer, got '" + std::string(trim(f[4])) + "'");
    names.add(path, line_no, machine);
    std::string canonical;
    if (type == "CPU") continue;
    if (*gpus > 0 && std::find(c.gpu_models.begin(), c.gpu_models.end(), type) == c.gpu_models.end())
      c.gpu_models.push_back(type);
    if (type == "MISC") {
      if (misc.empty()) {
        skipped_machines += *gpus > 0;
        skipped_gpus += *gpus;
        continue;
      }
      canonical = misc;
    } else if (type == "P100" || type == "T4" || type == "V100" || type == "V100M32") {
      canonical = canonical_gpu_name(type);
    } else {
      fail_input(path, line_no,
                 "unknown PAI gpu_type '" + type + "' (expected P100, T4, V100, V100M32, MISC, CPU)");
    }
    if (*gpus == 0) continue;
    c.nodes.push_back(Node{machine, machine, canonical, static_cast<int>(*gpus)});
  }
  if (c.nodes.empty()) fail_input(path, 0, "no GPU machines");
  if (skipped_machines > 0)  // a third of PAI's list left out without a word
    c.notes.push_back(std::to_string(skipped_machines) + " MISC machines (" + std::to_string(skipped_gpus) +
                      " GPUs of undisclosed types) left out: map them with --gpu-map MISC=TYPE");
  return c;
}

Cluster load_cluster(const std::string& spec_or_path,
                     const std::map<std::string, std::string>& gpu_map) {
  const std::string& s = spec_or_path;
  if (detail::ends_with_ci(s, ".yaml") || detail::ends_with_ci(s, ".yml"))
    return load_cluster_yaml(s);
  if (detail::ends_with_ci(s, ".csv")) {
    std::ifstream in(s, std::ios::binary);
    std::string first;
    std::getline(in, first);
    if (is_alibaba_node_header(first)) return load_alibaba_nodes(s, gpu_map);
    // PAI's unnamed MISC machines, as --gpu-map MISC=TYPE says (skipped without it).
    const auto misc = gpu_map.find("MISC");
    return load_pai_machines(s, misc == gpu_map.end() ? std::string() : misc->second);
  }
  std::error_code ec;
  if (s.find(':') != std::string::npos && s.find('/') == std::string::npos &&
      !std::filesystem::exists(s, ec))
    return parse_cluster_shorthand(s);
  if (!std::filesystem::exists(s, ec)) {
    // A bare catalogue name ("v100") is a shorthand with its count forgotten.
    if (s.find('/') == std::string::npos && s.find(':') == std::string::npos && find_gpu(s))
      fail_input(s, 0, "no such file; as a shorthand, give the count too: --cluster " + s + ":8 (TYPE:COUNT[,TYPE:COUNT...])");
    fail_input(s, 0, "cannot open (give a node-list YAML, a PAI or Alibaba machine CSV, or a shorthand TYPE:COUNT[,...])");
  }
  return load_cluster_yaml(s);  // any other existing file: a node list
}

std::string cluster_to_yaml(const Cluster& cluster) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << cluster.name;
  if (cluster.network_gbps > 0) out << YAML::Key << "network_gbps" << YAML::Value << cluster.network_gbps;
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const auto& n : cluster.nodes) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << n.name;
    out << YAML::Key << "address" << YAML::Value << n.address;
    out << YAML::Key << "gpu_type" << YAML::Value << n.gpu_type;
    out << YAML::Key << "gpus" << YAML::Value << n.gpus;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace cellsched
