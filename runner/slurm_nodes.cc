#include "runner/slurm_nodes.h"

#include <fstream>
#include <regex>

#include "core/error.h"
#include "core/gpu.h"

namespace cellsched::runner {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;  // "(S:0,1)" holds commas of its own
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (c == sep && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// "gpu:a100:4(S:0-1)" -> ("a100", 4); "gpu:4" -> ("", 4); anything else: false.
bool parse_gres(std::string g, std::string& type, int& count) {
  if (auto p = g.find('('); p != std::string::npos) g.resize(p);
  const std::vector<std::string> f = split(g, ':');
  if (f.empty() || f[0] != "gpu" || f.size() < 2 || f.size() > 3) return false;
  type = f.size() == 3 ? f[1] : "";
  try {
    size_t used = 0;
    const long n = std::stol(f.back(), &used);
    if (used != f.back().size() || n < 0 || n > 1000000) return false;
    count = static_cast<int>(n);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// The line of the node list that names `node` ("name: node1", quoted or not); 0 if none.
long line_of(const std::string& file, const std::string& node) {
  std::ifstream in(file);
  const std::regex name_re("(^|[\\s{,-])name:\\s*[\"']?([^\"',}\\s]+)");
  std::string line;
  for (long n = 1; std::getline(in, line); ++n) {
    std::smatch m;
    if (std::regex_search(line, m, name_re) && m[2] == node) return n;
  }
  return 0;
}

}  // namespace

std::vector<SlurmNodeGres> parse_sinfo_gres(const std::string& text) {
  std::vector<SlurmNodeGres> out;
  std::map<std::string, size_t> seen;
  for (const std::string& line : split(text, '\n')) {
    const std::vector<std::string> f = split(line, '|');
    if (f.size() < 3 || f[0].empty()) continue;
    if (seen.count(f[0])) continue;
    SlurmNodeGres n{f[0], f[2], {}};
    for (const std::string& g : split(f[1], ',')) {
      std::string type;
      int count = 0;
      if (parse_gres(g, type, count)) n.gpus[type] += count;
    }
    seen[n.name] = out.size();
    out.push_back(std::move(n));
  }
  return out;
}

std::map<std::string, std::string> match_slurm_nodes(const Cluster& cluster, const std::vector<SlurmNodeGres>& slurm,
                                                     const std::string& nodes_file, std::vector<std::string>* notes) {
  std::map<std::string, const SlurmNodeGres*> by_name;
  for (const SlurmNodeGres& n : slurm) by_name[n.name] = &n;
  std::map<std::string, std::string> gres;
  for (const Node& node : cluster.nodes) {
    const auto fail = [&](const std::string& what) { fail_input(nodes_file, line_of(nodes_file, node.name), what); };
    const auto it = by_name.find(node.name);
    if (it == by_name.end()) {
      std::string known;
      for (const SlurmNodeGres& n : slurm) known += (known.empty() ? "" : ", ") + n.name;
      fail("node '" + node.name + "' is not a node of this Slurm cluster (sinfo lists " +
           (known.empty() ? std::string("none") : known) + "); the node list's names must be Slurm's");
    }
    const SlurmNodeGres& s = *it->second;
    std::string offered, match;
    int have = 0;
    for (const auto& [type, count] : s.gpus) {
      offered += (offered.empty() ? "" : ", ") + std::string("gpu:") + (type.empty() ? "" : type + ":") +
                 std::to_string(count);
      const GpuSpec* spec = type.empty() ? nullptr : find_gpu(type);
      if (spec && spec->name == node.gpu_type && count > have) match = type, have = count;
    }
    if (match.empty())
      fail("node '" + node.name + "': Slurm offers " + (offered.empty() ? std::string("no GPU GRES") : offered) +
           ", no GPU of type " + node.gpu_type);
    if (have < node.gpus)
      fail("node '" + node.name + "' has " + std::to_string(node.gpus) + " GPUs in the node list, Slurm's GRES " +
           std::to_string(have) + " (gpu:" + match + ")");
    gres[node.name] = match;
    if (notes && (s.state.rfind("drain", 0) == 0 || s.state.rfind("down", 0) == 0 || s.state == "drng" ||
                  s.state == "fail" || s.state == "maint"))
      notes->push_back("node '" + node.name + "' is " + s.state + " in Slurm: launches placed there wait in its queue");
  }
  return gres;
}

}  // namespace cellsched::runner
