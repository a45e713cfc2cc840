// `cellsched validate`'s report: the JSON pieces that are not rows, the text
// table and the Markdown file (cli/validate.cc runs the trials).
#include "cli/validate_report.h"

#include <fstream>

#include "cli/common.h"
#include "core/error.h"

namespace cellsched::cli {

using nlohmann::json;

// The compute profile's layers with their own spread (IQR over repetitions).
json validate_profile_layers_json(const ProfileRun& p) {
  json out = json::array();
  for (const auto& l : p.layers)
    out.push_back({{"layer", l.layer_name}, {"micro_batch", l.micro_batch}, {"fwd_ms", l.fwd_ms},
                   {"fwd_iqr_ms", l.fwd_spread_ms}, {"bwd_ms", l.bwd_ms}, {"bwd_iqr_ms", l.bwd_spread_ms},
                   {"repetitions", l.repetitions}});
  return out;
}

json validate_host_json(const validate::HostObservation& h, const validate::HostVerdict& v) {
  return {{"cpus", h.cpus},
          {"load_average_at_start", h.load_at_start},
          {"others_cpu_share", v.others_cpu_share},
          {"calibration_s", h.calibration_s},
          {"calibration_ratio", v.calibration_ratio},
          {"memory_calibration_s", h.memory_calibration_s},
          {"memory_calibration_ratio", v.memory_calibration_ratio},
          {"busy", v.busy},
          {"reasons", v.reasons}};
}

void print_validate_text(std::ostream& out, const json& r) {
  out << "model " << r["model"].get<std::string>() << " on the CPU, " << r["threads"] << " thread(s) per process; "
      << r["trials"] << " interleaved trials per configuration";
  if (r.value("extra_trials", 0) > 0)
    out << " (and " << r["extra_trials"] << " extra where a configuration's or the probe's median trial was more "
        << "than 10 % above its fastest)";
  out << "; profiles " << r["compute_profile"] << " (compute) and " << r["comm_profile"] << " (comm)\n";
  Table pt({"profiled layer", "micro-batch", "fwd ms", "fwd IQR", "bwd ms", "bwd IQR"});
  for (const auto& l : r["profile_layers"])
    pt.add({l["layer"].get<std::string>(), std::to_string(l["micro_batch"].get<int>()), fixed(l["fwd_ms"], 3),
            fixed(l["fwd_iqr_ms"], 3), fixed(l["bwd_ms"], 3), fixed(l["bwd_iqr_ms"], 3)});
  pt.print(out);
  out << "\n";
  Table t({"config", "procs", "B", "micro-batch", "measured ms", "min-max ms", "estimated ms", "error %", "in spread"});
  for (const auto& row : r["rows"]) {
    const auto& sp = row["measured_spread_ms"];
    t.add({row["config"].get<std::string>(), std::to_string(row["processes"].get<int>()),
           std::to_string(row["micro_batches"].get<int>()), std::to_string(row["micro_batch_size"].get<int>()),
           fixed(row["measured_ms"], 2), fixed(sp["min"], 2) + "-" + fixed(sp["max"], 2), fixed(row["estimated_ms"], 2),
           fixed(row["error_pct"], 1), row["within_spread"].get<bool>() ? "yes" : "no"});
  }
  t.print(out);
  out << "median |error| " << fixed(r["median_abs_error_pct"], 1) << "%, worst " << fixed(r["worst_abs_error_pct"], 1)
      << "% over " << r["rows"].size() << " configurations (medians of trials); "
      << fixed(100 * r["within_spread_share"].get<double>(), 0) << "% of estimates lie within the measured min-max\n";
  const auto& co = r["colocation"];
  if (co["probe"].get<bool>())
    out << "co-location: two processes at once ran x" << fixed(co["factor"], 3)
        << " the time of one alone (median of " << co["alone_ms"].size()
        << " probe trials); the multi-process rows' compute estimates include it (without it: median |error| "
        << fixed(co["median_abs_error_pct_without"], 1) << "%, worst " << fixed(co["worst_abs_error_pct_without"], 1)
        << "%)\n";
  const auto& h = r["host"];
  out << "host: " << (h["busy"].get<bool>() ? "BUSY" : "idle") << " (others took "
      << fixed(100 * h["others_cpu_share"].get<double>(), 1) << "% of the CPU time, calibration spread x"
      << fixed(h["calibration_ratio"], 2) << ", memory pass spread x" << fixed(h["memory_calibration_ratio"], 2) << ", load average " << fixed(h["load_average_at_start"], 2)
      << " at start)\n";
  for (const auto& why : h["reasons"])
    out << "warning: the host was busy: " << why.get<std::string>() << "; the measured times carry its noise\n";
}

void write_validate_markdown(const std::string& path, const json& r) {
  std::ofstream f(path);
  if (!f) throw InputError(path + ": cannot write");
  f << "| config | processes | micro-batches | micro-batch size | measured ms (median of " << r["trials"]
    << (r.value("extra_trials", 0) > 0 ? "+" : "") << " trials) | min-max ms | estimated ms | error % |"
       " compute ms meas / est | gradient sync ms meas / est | waiting for the slower rank ms |"
       " optimizer ms meas / est |\n"
       "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  auto pair = [](const json& row, const char* part) {
    return fixed(row["measured_breakdown_ms"][part], 1) + " / " + fixed(row["estimated_breakdown_ms"][part], 1);
  };
  for (const auto& row : r["rows"])
    f << "| " << row["config"].get<std::string>() << " | " << row["processes"] << " | " << row["micro_batches"]
      << " | " << row["micro_batch_size"] << " | " << fixed(row["measured_ms"], 2) << " | "
      << fixed(row["measured_spread_ms"]["min"], 2) << "-" << fixed(row["measured_spread_ms"]["max"], 2) << " | "
      << fixed(row["estimated_ms"], 2) << " | " << fixed(row["error_pct"], 1) << " | " << pair(row, "compute")
      << " | " << pair(row, "gradient_sync") << " | "
      << fixed(row["measured_breakdown_ms"]["waiting_for_slower_rank"], 1) << " | " << pair(row, "optimizer") << " |\n";
  f << "\nmedian |error| " << fixed(r["median_abs_error_pct"], 1) << "%, worst " << fixed(r["worst_abs_error_pct"], 1)
    << "%";
  if (r["colocation"]["probe"].get<bool>())
    f << "; co-location factor " << fixed(r["colocation"]["factor"], 3) << " (without it: median "
      << fixed(r["colocation"]["median_abs_error_pct_without"], 1) << "%, worst "
      << fixed(r["colocation"]["worst_abs_error_pct_without"], 1) << "%)";
  f << "; host " << (r["host"]["busy"].get<bool>() ? "busy" : "idle") << "\n";
}

}  // namespace cellsched::cli
