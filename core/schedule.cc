#include "core/schedule.h"

#include <fstream>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

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
  }
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
    for (const auto& e : j.at("entries")) {
      ScheduleEntry x;
      x.job_id = e.at("job_id").get<int64_t>();
      x.copy = e.at("copy").get<int>();
      x.node = e.at("node").get<std::string>();
      x.gpu_type = e.at("gpu_type").get<std::string>();
      x.gpu_indices = e.at("gpu_indices").get<std::vector<int>>();
      x.start_s = e.at("start_s").get<double>();
      x.end_s = e.at("end_s").get<double>();
      x.plan = e.value("plan", "");
      if (x.gpu_indices.empty() || x.end_s < x.start_s || x.copy < 0)
        fail_input(file, 0, "entry of job " + std::to_string(x.job_id) + " is inconsistent");
      s.entries.push_back(std::move(x));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    fail_input(file, 0, std::string("bad schedule: ") + e.what());
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
  out << "job_id,copy,node,gpu_type,gpu_indices,start_s,end_s,plan\n";
  out.precision(12);
  for (const ScheduleEntry& e : s.entries) {
    out << e.job_id << "," << e.copy << "," << e.node << "," << e.gpu_type << ",";
    for (size_t i = 0; i < e.gpu_indices.size(); ++i) out << (i ? ";" : "") << e.gpu_indices[i];
    out << "," << e.start_s << "," << e.end_s << ",\"" << e.plan << "\"\n";
  }
}

}  // namespace cellsched
