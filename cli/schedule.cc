// `cellsched schedule`: the offline schedule itself — which job (or forked
// copy) runs on which GPUs of which node, round by round — as JSON, CSV and a
// Gantt chart.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/inputs.h"
#include "cli/plot.h"
#include "cli/report.h"
#include "core/error.h"
#include "core/schedule.h"
#include "scheduler/recorder.h"

namespace cellsched::cli {

namespace {

// schedule.json, schedule.csv and (with `plots`) gantt.png in `out_dir`; a
// plot that fails is skipped with a word on stderr.
void write_schedule_files(const Schedule& schedule, const std::string& json_text, const ReplayInputs& in,
                          const std::string& out_dir, bool plots) {
  const std::filesystem::path d(out_dir);
  {
    std::ofstream f(d / "schedule.json");
    if (!f) throw InputError((d / "schedule.json").string() + ": cannot write");
    f << json_text << "\n";
    std::ofstream c(d / "schedule.csv");
    if (!c) throw InputError((d / "schedule.csv").string() + ": cannot write");
    write_schedule_csv(schedule, c);
  }  // closed before the plot
  if (!plots) return;
  try {
    std::map<int64_t, std::string> types;
    for (const Job& j : in.trace.jobs) types[j.id] = j.job_type;
    plot_gantt(schedule, in.cluster, out_dir, types);
  } catch (const std::runtime_error& e) {
    std::cerr << "cellsched schedule: gantt.png skipped: " << e.what() << "\n";
  }
}

}  // namespace

int cmd_schedule(const std::vector<std::string>& args) {
  po::options_description opt("schedule options");
  ReplayArgs ra;
  std::string policy_name, out_dir;
  add_replay_options(opt, ra);
  opt.add_options()
      ("policy", po::value(&policy_name)->default_value("hadare"), "one policy")
      ("out", po::value(&out_dir), "write schedule.json, schedule.csv and gantt.png here (default: ./schedule, or "
                                   "nothing with --json)")
      ("no-plots", "skip gantt.png")
      ("json", "print the schedule as JSON on stdout");
  po::variables_map vm;
  // `--jobs` is an older name of --trace; still accepted.
  std::vector<std::string> a = args;
  for (std::string& s : a)
    if (s == "--jobs") s = "--trace";
  if (!parse("cellsched schedule --trace F --cluster SPEC [--policy P] [--out DIR] [--json]", a, opt, {}, vm))
    return 0;
  check_policy_settings(ra.policy);
  auto policy = make_policy(policy_name, ra.policy);
  const ReplayInputs in = load_replay_inputs(ra);
  note_wide_jobs(in, std::cerr);
  // With --json and no --out the schedule goes to stdout only.
  const bool write_files = vm.count("out") || !vm.count("json");
  if (!vm.count("out")) out_dir = "schedule";
  if (write_files) check_out_dir("out", out_dir);  // before the run, not after it

  Schedule header;
  header.policy = policy->name();
  header.trace = in.trace.name;
  header.cluster = in.cluster.name;
  header.round_s = in.options.round_s;
  header.restart_s = in.options.restart_s;
  ScheduleRecorder recorder(in.cluster, *in.oracle, header);
  SimOptions so = in.options;
  so.on_round = [&](double t, const std::vector<JobState*>& jobs,
                    const std::vector<Allocation>& out) { recorder.record(t, jobs, out); };
  so.progress = sim_progress(policy->name());
  const RunRecord run = simulate(in.trace, in.cluster, *in.oracle, *policy, so);
  clear_progress();
  warn_unfinished(run, so.horizon_s, std::cerr);
  const Schedule schedule = recorder.finish(run);
  std::string json_text = schedule_to_json(schedule);
  if (ra.drop_unrunnable) {  // a key the schedule reader reads past
    nlohmann::json j = nlohmann::json::parse(json_text);
    j["dropped_unrunnable"] = in.dropped;
    json_text = j.dump(1);
  }

  const std::filesystem::path d(out_dir);
  if (write_files) write_schedule_files(schedule, json_text, in, out_dir, !vm.count("no-plots"));
  if (vm.count("json")) {
    std::cout << json_text << "\n";
    return 0;
  }
  std::set<int64_t> forked;
  for (const ScheduleEntry& e : schedule.entries)
    if (e.copy > 0) forked.insert(e.job_id);
  std::cout << "schedule of " << in.trace.name << " (" << count_of(static_cast<long>(in.trace.jobs.size()), "job")
            << (ra.drop_unrunnable ? ", " + std::to_string(in.dropped) + " unrunnable dropped" : "") << ") on "
            << in.cluster.name << " under " << policy->name() << ": " << schedule.rounds.size()
            << " rounds, " << schedule.entries.size() << " placements, " << forked.size()
            << " jobs forked\n\n";
  print_comparison({run}, std::cout);
  std::cout << "\nwrote " << (d / "schedule.json").string() << ", " << (d / "schedule.csv").string()
            << (vm.count("no-plots") ? "" : ", " + (d / "gantt.png").string()) << "\n";
  return 0;
}

}  // namespace cellsched::cli
