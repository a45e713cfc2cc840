// The online runner's read-side verbs: status (jobs, copies, nodes, rounds)
// and cancel. Both read the runner's state database and create none.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/report.h"
#include "core/cluster.h"
#include "core/error.h"
#include "db/online.h"
#include "runner/lock.h"
#include "runner/runner.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace cellsched::cli {
namespace {

// Refuses to create a database for the read-only verbs.
void require_db(const std::string& path) {
  if (!fs::exists(path)) throw InputError(path + ": no such database (start `cellsched run --db " + path + "`)");
}

// What `status` shows, read from the store once.
struct StatusView {
  std::vector<db::OnlineJob> jobs;
  std::vector<db::OnlineLaunch> live;
  std::map<int64_t, std::vector<const db::OnlineLaunch*>> by_job;  // into `live`
  Cluster cluster;
  std::map<std::string, int> used;  // GPUs busy per node
  int64_t last_round = 0;
  std::optional<db::OnlineRound> round;
  std::optional<runner::LockHolder> holder;
  std::string pid, policy, executor;

  StatusView() = default;
  StatusView(const StatusView&) = delete;  // by_job points into live
  StatusView& operator=(const StatusView&) = delete;

  const std::vector<const db::OnlineLaunch*>& launches_of(int64_t job) const {
    static const std::vector<const db::OnlineLaunch*> none;
    const auto it = by_job.find(job);
    return it == by_job.end() ? none : it->second;
  }
  ForkModel fork;  // how the runner counts copies (its stored meta)
  // Iterations done, counting what live gangs have trained since launch (the
  // runner saves it every few seconds) at what they are worth together, as
  // the runner counts them (core/fork.h).
  double done_of(const db::OnlineJob& j) const {
    std::vector<const db::OnlineLaunch*> started;
    for (const auto* l : launches_of(j.id))
      if (l->state != "planned") started.push_back(l);
    return std::min(j.iterations, j.iterations_done + runner::launches_worth(fork, started));
  }
};

// The node list the runner stored, or an empty cluster when it cannot be read.
Cluster stored_nodes(const db::OnlineStore& store) {
  Cluster cluster;
  if (const auto y = store.meta("nodes")) {
    const fs::path tmp = fs::temp_directory_path() / ("cellsched-nodes-" + std::to_string(getpid()) + ".yaml");
    { std::ofstream(tmp) << *y; }
    try {
      cluster = load_cluster_yaml(tmp.string());
    } catch (const std::exception&) {
    }
    fs::remove(tmp);
  }
  return cluster;
}

void read_status(StatusView& v, const std::string& db_path) {
  db::OnlineStore store = db::OnlineStore::open(db_path);
  v.jobs = store.jobs(false);
  v.live = store.live_launches();
  for (const auto& l : v.live) v.by_job[l.job_id].push_back(&l);
  v.cluster = stored_nodes(store);
  for (const auto& l : v.live)
    if (l.state == "running" || l.state == "stopping")
      for (const auto& p : l.procs) v.used[p.node_name] += p.gpus;
  v.last_round = store.last_round();
  v.round = v.last_round ? store.round(v.last_round) : std::nullopt;
  // The runner's lock says truthfully whether one is alive (the kernel drops
  // it when the runner dies); the pid in the store is only the last one's.
  // A runner on another host shows through its lease (heartbeat still fresh).
  v.holder = runner::runner_lock_holder(db_path);
  if (!v.holder) v.holder = runner::foreign_lease(store);
  v.pid = v.holder ? std::to_string(v.holder->pid) : store.meta("runner_pid").value_or("0");
  v.policy = store.meta("policy").value_or("");
  if (const auto f = store.meta("fork_model")) {  // "0.5 noise"
    std::istringstream in(*f);
    std::string scaling;
    if (in >> v.fork.efficiency >> scaling) {
      try {
        v.fork.scaling = parse_fork_scaling(scaling);
      } catch (const InputError&) {
      }
    }
  }
  v.executor = store.meta("executor").value_or("");
}

json status_json(const StatusView& v) {
  json out;
  out["runner"] = {{"pid", std::atoll(v.pid.c_str())},
                   {"alive", v.holder.has_value()},
                   {"host", v.holder ? v.holder->host : ""},
                   {"started_at", v.holder ? v.holder->started_at : 0.0},
                   {"policy", v.policy},
                   {"executor", v.executor}};
  out["rounds"] = v.last_round;
  if (v.round) out["last_round"] = {{"round", v.round->round}, {"started_at", v.round->started_at},
                                    {"decision_ms", v.round->decision_ms},
                                    {"allocations", json::parse(v.round->allocations, nullptr, false)}};
  out["jobs"] = json::array();
  // Iteration counts print as integers (5, not 5.0) when whole, as they are
  // from the trainers' progress lines.
  const auto count = json_count;
  for (const auto& j : v.jobs) {
    json copies = json::array();
    for (const auto* l : v.launches_of(j.id)) {
      json procs = json::array();
      for (const auto& p : l->procs)
        procs.push_back({{"node", p.node_name}, {"gpus", p.gpus}, {"gpu_ids", p.gpu_ids}, {"pid", p.pid}});
      copies.push_back({{"launch", l->id}, {"copy", l->copy}, {"state", l->state},
                        {"iterations", count(l->iterations)}, {"procs", procs}});
    }
    out["jobs"].push_back({{"id", j.id}, {"name", j.name}, {"state", j.state}, {"job_type", j.job_type},
                           {"gpus", j.gpus}, {"iterations", count(j.iterations)},
                           {"iterations_done", count(j.iterations_done)}, {"progress", count(v.done_of(j))},
                           {"checkpoint", j.checkpoint}, {"epoch", j.epoch}, {"failures", j.failures},
                           {"last_error", j.last_error}, {"cancel_requested", j.cancel_requested},
                           {"command", j.command}, {"copies", copies}});
  }
  out["nodes"] = json::array();
  for (const Node& n : v.cluster.nodes) {
    const auto it = v.used.find(n.name);
    out["nodes"].push_back({{"name", n.name}, {"address", n.address}, {"gpu_type", n.gpu_type},
                            {"gpus", n.gpus}, {"used", it == v.used.end() ? 0 : it->second}});
  }
  return out;
}

void print_status(const StatusView& v) {
  std::cout << "runner: " << (v.holder ? "running (" + v.holder->text() + ")" : std::string("not running"))
            << ", policy " << (v.policy.empty() ? "-" : v.policy) << ", executor "
            << (v.executor.empty() ? "-" : v.executor) << ", rounds " << v.last_round << "\n\n";
  Table t({"job", "name", "state", "gpus", "done", "total", "copies", "placement", "failures"});
  for (const auto& j : v.jobs) {
    std::string where;
    int copies = 0;
    for (const auto* l : v.launches_of(j.id)) {
      if (l->state != "running" && l->state != "stopping") continue;
      // node:GPU indices, as the run log writes them; gangs (copies) apart by " | "
      if (copies++ > 0) where += " |";
      for (const auto& p : l->procs) where += (where.empty() ? "" : " ") + printable(p.node_name) + ":" + p.gpu_ids;
    }
    t.add({std::to_string(j.id), printable(j.name), j.state, std::to_string(j.gpus), num(std::floor(v.done_of(j))),
           num(j.iterations), std::to_string(copies), where.empty() ? "-" : where, std::to_string(j.failures)});
  }
  t.print(std::cout);
  // Why jobs failed, and what a runner has yet to act on.
  for (const auto& j : v.jobs) {
    if (j.state == "failed" && !j.last_error.empty())
      std::cout << "job " << j.id << " failed: " << printable(j.last_error) << "\n";
    else if (j.cancel_requested && (j.state == "queued" || j.state == "running"))
      std::cout << "job " << j.id << ": cancel requested\n";
  }
  if (!v.cluster.nodes.empty()) {
    std::cout << "\n";
    Table n({"node", "gpu type", "gpus", "used"});
    for (const Node& node : v.cluster.nodes) {
      const auto it = v.used.find(node.name);
      n.add({printable(node.name), node.gpu_type, std::to_string(node.gpus),
             std::to_string(it == v.used.end() ? 0 : it->second)});
    }
    n.print(std::cout);
  }
}

}  // namespace

int cmd_status(const std::vector<std::string>& args) {
  std::string db_path;
  bool as_json = false;
  po::options_description opts("options");
  opts.add_options()
      ("db", po::value(&db_path)->default_value(default_db_path()), "state database (SQLite)")
      ("json", po::bool_switch(&as_json), "machine-readable output");
  po::variables_map vm;
  if (!parse("cellsched status [--db PATH] [--json]", args, opts, {}, vm)) return 0;
  require_db(db_path);
  StatusView v;
  read_status(v, db_path);
  if (as_json) std::cout << status_json(v).dump(2) << "\n";
  else print_status(v);
  return 0;
}

int cmd_cancel(const std::vector<std::string>& args) {
  std::string db_path;
  int64_t id = 0;
  po::options_description opts("options");
  opts.add_options()
      ("job", po::value(&id)->required(), "job id")
      ("db", po::value(&db_path)->default_value(default_db_path()), "state database (SQLite)")
      ("json", "print {\"id\", \"state\", \"cancel_requested\"} instead of a sentence");
  po::positional_options_description pos;
  pos.add("job", 1);
  po::variables_map vm;
  if (!parse("cellsched cancel JOB [--db PATH] [--json]", args, opts, pos, vm)) return 0;
  require_db(db_path);
  db::OnlineStore store = db::OnlineStore::open(db_path);
  const auto state = store.request_cancel(id);
  if (!state) throw InputError("no job " + std::to_string(id) + " in " + db_path);
  const bool requested = *state == "queued" || *state == "running" || *state == "cancelled";
  if (vm.count("json")) {
    std::cout << json{{"id", id}, {"state", *state}, {"cancel_requested", requested}}.dump() << "\n";
    return 0;
  }
  if (*state == "cancelled") {
    std::cout << "job " << id << " cancelled\n";
  } else if (*state == "queued" || *state == "running") {
    const bool runner_alive = runner::runner_lock_holder(db_path) || runner::foreign_lease(store);
    std::cout << "job " << id << ": cancel requested ("
              << (runner_alive ? "the runner stops it" : "no runner is running: it stops when `cellsched run` starts")
              << ")\n";
  } else {
    std::cout << "job " << id << " already " << *state << "\n";
  }
  return 0;
}

}  // namespace cellsched::cli
