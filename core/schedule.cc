#include "core/schedule.h"

#include "core/parse_util.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/cluster.h"
#include "core/error.h"

namespace cellsched {

std::string schedule_to_json(const Schedule& s) {
  nlohmann::json entries = nlohmann::json::array();
  for (const ScheduleEntry& e : s.entries) {
    entries.push_back({{"job_id", e.job_id}, {"copy", e.copy}, {"node", e.node},
                       {"gpu_type", e.gpu_type}, {"gpu_indices", e.gpu_indices},
                       {"start_s", e.start_s}, {"end_s", e.end_s}, {"plan", e.plan}});
  }
  const nlohmann::json j = {{"format", "cellsched-schedule-1"},
                            {"policy", s.policy},
                            {"trace", s.trace},
                            {"cluster", s.cluster},
                            {"round_s", s.round_s},
                            {"restart_s", s.restart_s},
                            {"rounds", s.rounds},
                            {"entries", entries}};
  return j.dump(1);
}

Schedule schedule_from_json(const std::string& text, const std::string& file) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    long line = 1;
    for (size_t i = 0; i < e.byte && i < text.size(); ++i) line += text[i] == '\n';
    fail_input(file, line, std::string("not JSON: ") + e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double (found by fuzz_schedule)
    fail_input(file, 0, std::string("not JSON: ") + e.what());
  }
  // The line each entry starts on: entries are the only objects with a
  // "job_id" key, in file order (nlohmann's DOM keeps no positions).
  std::vector<long> entry_lines;
  {
    long line = 1;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') ++line;
      else if (text.compare(i, 8, "\"job_id\"") == 0) entry_lines.push_back(line);
    }
  }
  long at = 0;  // the entry being read, for errors the JSON library raises
  // A count or index read as a JSON number: whole and in range (a get<int>
  // of 1e82 is undefined behaviour: found by fuzz_schedule under UBSan).
  auto whole = [&](const nlohmann::json& v, const std::string& name, double most) -> long long {
    const double d = v.is_number() ? v.get<double>() : -1;
    if (!v.is_number() || !(d >= 0 && d <= most) || d != std::floor(d))
      fail_input(file, at, name + " must be a whole number in [0, " + std::to_string(static_cast<long long>(most)) +
                               "], got " + v.dump());
    return static_cast<long long>(d);
  };
  try {
    if (j.value("format", "") != "cellsched-schedule-1")
      fail_input(file, 0, "not a cellsched schedule (format must be cellsched-schedule-1)");
    Schedule s;
    s.policy = j.at("policy").get<std::string>();
    s.trace = j.at("trace").get<std::string>();
    s.cluster = j.at("cluster").get<std::string>();
    s.round_s = j.at("round_s").get<double>();
    s.restart_s = j.at("restart_s").get<double>();
    s.rounds = j.at("rounds").get<std::vector<double>>();
    s.source = file;
    for (const auto& e : j.at("entries")) {
      ScheduleEntry x;
      x.line = s.entries.size() < entry_lines.size() ? entry_lines[s.entries.size()] : 0;
      at = x.line;
      x.job_id = whole(e.at("job_id"), "job_id", 9007199254740992.0);
      x.copy = static_cast<int>(whole(e.at("copy"), "copy", 1e6));
      x.node = e.at("node").get<std::string>();
      x.gpu_type = e.at("gpu_type").get<std::string>();
      for (const auto& g : e.at("gpu_indices")) x.gpu_indices.push_back(static_cast<int>(whole(g, "gpu_indices", 1e6)));
      x.start_s = e.at("start_s").get<double>();
      x.end_s = e.at("end_s").get<double>();
      x.plan = e.value("plan", "");
      if (x.job_id < 0) fail_input(file, x.line, "job_id must not be negative, got " + std::to_string(x.job_id));
      if (!std::isfinite(x.start_s) || !std::isfinite(x.end_s) || x.start_s < 0)
        fail_input(file, x.line, "entry of job " + std::to_string(x.job_id) + ": start_s and end_s must be finite, start_s >= 0");
      if (x.gpu_indices.empty() || x.end_s < x.start_s || x.copy < 0)
        fail_input(file, x.line, "entry of job " + std::to_string(x.job_id) +
                                     " is inconsistent (no GPU indices, end before start, or a negative copy)");
      s.entries.push_back(std::move(x));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    fail_input(file, at, std::string("bad schedule: ") + e.what());
  }
}

void check_schedule(const Schedule& s, const Cluster& cluster) {
  std::map<std::string, const Node*> nodes;
  for (const Node& n : cluster.nodes) nodes[n.name] = &n;
  // Per node and GPU index, the entries that hold it.
  std::map<std::pair<std::string, int>, std::vector<const ScheduleEntry*>> holders;
  for (const ScheduleEntry& e : s.entries) {
    const std::string what = "entry of job " + std::to_string(e.job_id);
    const auto it = nodes.find(e.node);
    if (it == nodes.end())
      fail_input(s.source, e.line, what + ": node '" + e.node + "' is not in cluster '" + cluster.name + "'");
    const Node& n = *it->second;
    if (!e.gpu_type.empty() && e.gpu_type != n.gpu_type)
      fail_input(s.source, e.line, what + ": gpu_type '" + e.gpu_type + "' but node " + n.name + " has " + n.gpu_type);
    std::set<int> seen;
    for (int g : e.gpu_indices) {
      if (g < 0 || g >= n.gpus)
        fail_input(s.source, e.line, what + ": GPU index " + std::to_string(g) + " is not on node " + n.name +
                                         " (0.." + std::to_string(n.gpus - 1) + ")");
      if (!seen.insert(g).second)
        fail_input(s.source, e.line, what + ": GPU index " + std::to_string(g) + " twice");
      holders[{n.name, g}].push_back(&e);
    }
  }
  for (auto& [gpu, list] : holders) {
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->start_s < b->start_s; });
    for (size_t i = 1; i < list.size(); ++i) {
      const ScheduleEntry &prev = *list[i - 1], &cur = *list[i];
      if (cur.start_s < prev.end_s)
        fail_input(s.source, cur.line,
                   "entry of job " + std::to_string(cur.job_id) + " holds GPU " + std::to_string(gpu.second) +
                       " of node " + gpu.first + " from " + std::to_string(cur.start_s) +
                       " s while job " + std::to_string(prev.job_id) + "'s entry (line " +
                       std::to_string(prev.line) + ") holds it until " + std::to_string(prev.end_s) + " s");
    }
  }
}

Schedule load_schedule(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail_input(path, 0, "cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return schedule_from_json(ss.str(), path);
}

void write_schedule_csv(const Schedule& s, std::ostream& out) {
  // Names quoted as RFC 4180 asks (a node "n,1" gave 9 fields under 8), times
  // to every digit (12 significant lost up to 4e-7 s against the JSON).
  out << "job_id,copy,node,gpu_type,gpu_indices,start_s,end_s,plan\n";
  for (const ScheduleEntry& e : s.entries) {
    out << e.job_id << "," << e.copy << "," << detail::csv_field(e.node) << "," << detail::csv_field(e.gpu_type) << ",";
    for (size_t i = 0; i < e.gpu_indices.size(); ++i) out << (i ? ";" : "") << e.gpu_indices[i];
    out << "," << detail::format_double(e.start_s) << "," << detail::format_double(e.end_s) << ","
        << detail::csv_field(e.plan) << "\n";
  }
}

}  // namespace cellsched
