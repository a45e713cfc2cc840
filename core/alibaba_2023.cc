// Alibaba cluster-trace-gpu-v2023 (FGD, ATC'23): the node list as a cluster
// and the pod list as jobs (docs/formats.md).
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/cluster.h"
#include "core/gpu.h"
#include "core/trace_read.h"

namespace cellsched {

namespace {

using detail::Ctx;
using detail::trim;

const char* const kNodeColumns = "sn,cpu_milli,memory_mib,gpu,model";
const char* const kPodColumns =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time";

// The trace's GPU model names onto the catalogue. G2 and G3 are Alibaba's
// own names for GPUs it does not disclose, so they have no default.
std::string alibaba_gpu(const Ctx& c, const std::string& name,
                        const std::map<std::string, std::string>& user) {
  if (auto it = user.find(name); it != user.end()) {
    if (!find_gpu(it->second))
      c.fail("--gpu-map maps '" + name + "' onto '" + it->second +
             "', which is not in the GPU catalogue (cellsched gpus)");
    return canonical_gpu_name(it->second);
  }
  static const std::map<std::string, std::string> defaults = {
      {"T4", "t4"}, {"P100", "p100"}, {"V100M16", "v100"}, {"V100M32", "v100-32"}, {"A10", "a10"}};
  if (auto it = defaults.find(name); it != defaults.end()) return canonical_gpu_name(it->second);
  if (name == "G2" || name == "G3")
    c.fail("GPU model '" + name + "' is one Alibaba does not disclose: map it onto a catalogue type with --gpu-map " +
           name + "=TYPE");
  c.fail("unknown GPU model '" + name + "' (known: A10, P100, T4, V100M16, V100M32, and G2 and G3 with --gpu-map; " +
         "map others with --gpu-map " + name + "=TYPE)");
}

}  // namespace

bool is_alibaba_node_header(std::string_view first_line) {
  return detail::header_is(first_line, kNodeColumns);
}

Cluster load_alibaba_nodes(const std::string& path,
                           const std::map<std::string, std::string>& gpu_map) {
  std::string text = detail::read_file(path);
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  Cluster cluster;
  cluster.name = std::filesystem::path(path).filename().string();
  detail::FirstSeen names("node");
  const auto lines = detail::split_lines(text);
  detail::for_each_row(path, lines, "Alibaba 2023 node list", kNodeColumns,
                       [&](const Ctx& c, const std::vector<std::string>& f) {
    const std::string sn(trim(f[0]));
    if (sn.empty()) c.fail("empty sn");
    c.non_negative(f[1], "cpu_milli");
    c.non_negative(f[2], "memory_mib");
    const int gpus = c.non_negative_int(f[3], "gpu");
    if (gpus > 1000000) c.fail("gpu must be at most 1000000");
    names.add(path, c.line, sn);
    const std::string model(trim(f[4]));
    if (gpus == 0) return;  // a CPU node
    if (model.empty()) c.fail("node with " + std::to_string(gpus) + " GPUs has no model");
    if (std::find(cluster.gpu_models.begin(), cluster.gpu_models.end(), model) == cluster.gpu_models.end())
      cluster.gpu_models.push_back(model);
    cluster.nodes.push_back(Node{sn, sn, alibaba_gpu(c, model, gpu_map), gpus});
  });
  if (cluster.nodes.empty()) fail_input(path, 0, "no GPU nodes");
  return cluster;
}

namespace detail {

// Pods as jobs: GPU pods only; arrival = creation_time (from the earliest),
// duration = deletion_time - scheduled_time, the job type drawn with the seed
// among the table's types measured at the pod's GPUs on the reference type
// (as for Philly), iterations = duration x its steps/s there.
void read_alibaba_pods(const std::string& path, const std::vector<std::string_view>& lines,
                       const TraceReadOptions& options, Trace& t) {
  TypeDraw draw(path, options);
  const size_t first = t.jobs.size();
  FirstSeen names("name");
  for_each_row(path, lines, "Alibaba 2023 pod list", kPodColumns,
               [&](const Ctx& c, const std::vector<std::string>& f) {
    Job j;
    j.name = std::string(trim(f[0]));
    if (j.name.empty()) c.fail("empty name");
    names.add(path, c.line, j.name);
    c.non_negative(f[1], "cpu_milli");
    c.non_negative(f[2], "memory_mib");
    const int num_gpu = c.non_negative_int(f[3], "num_gpu");
    const int milli = c.non_negative_int(f[4], "gpu_milli");
    if (milli > 1000) c.fail("gpu_milli must be at most 1000, got '" + f[4] + "'");
    for (std::string_view g : split(f[5], '|'))
      if (!trim(g).empty()) j.gpu_types.push_back(alibaba_gpu(c, std::string(trim(g)), options.gpu_map));
    const double created = c.non_negative(f[8], "creation_time");
    const bool ended = !trim(f[9]).empty() && !trim(f[10]).empty();
    const double deleted = ended ? c.non_negative(f[9], "deletion_time") : 0;
    const double scheduled = ended ? c.non_negative(f[10], "scheduled_time") : 0;
    if (ended && deleted < scheduled)
      c.fail("deletion_time " + f[9] + " is before scheduled_time " + f[10]);
    if (ended && scheduled < created)
      c.fail("scheduled_time " + f[10] + " is before creation_time " + f[8]);
    if (num_gpu == 0) return count_note(t, "skipped: CPU-only pod");
    if (!ended) return count_note(t, "skipped: never scheduled or never deleted (no duration)");
    if (deleted == scheduled) return count_note(t, "skipped: zero duration");
    if (milli > 0 && milli < 1000) count_note(t, "fractional GPU (gpu_milli < 1000) rounded up to 1");
    count_note(t, "pod_phase " + std::string(trim(f[7])));
    draw.assign(c, num_gpu, deleted - scheduled, j, t);
    j.arrival_s = created;
    c.add(std::move(j), t);
  });
  rebase_arrivals(t, first);
}

}  // namespace detail

}  // namespace cellsched
