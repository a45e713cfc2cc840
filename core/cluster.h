// Nodes and clusters, and the readers for the formats they come in.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cellsched {

struct Node {
  std::string name;      // unique within the cluster
  std::string address;   // host name or IP the runner reaches it at
  std::string gpu_type;  // canonical catalogue name (see gpu.h)
  int gpus = 0;          // GPUs on the node (> 0)
};

struct Cluster {
  std::string name;          // "v100:36,p100:36,k80:36", a file name, ...
  std::vector<Node> nodes;
  // Inter-host bandwidth per GPU, one direction, GB/s (the catalogue's
  // nic_gbps unit); 0 = each GPU type's catalogue default. Cell estimates of
  // jobs that span hosts use it.
  double network_gbps = 0;
  // Machine lists (PAI 2020, Alibaba 2023): the file's own GPU model names
  // (what --gpu-map keys can match), first seen first, and what reading it
  // left out ("280 MISC machines (2240 GPUs) skipped: ...").
  std::vector<std::string> gpu_models;
  std::vector<std::string> notes;

  int total_gpus() const;
  int gpus_of_type(const std::string& gpu_type) const;
  // Distinct GPU types in order of first appearance.
  std::vector<std::string> gpu_types() const;
};

// `v100:36,p100:36,k80:36` -> 4-GPU nodes per type (the remainder, if the
// count is not a multiple of 4, goes on one smaller node). Names are
// `<type>-<i>` and addresses `localhost`. Throws InputError on a bad spec.
Cluster parse_cluster_shorthand(const std::string& spec);

// A YAML node list:
//   name: optional cluster name
//   network_gbps: optional, GB/s per GPU between hosts (e.g. 25 for one
//                 200 Gb/s NIC per GPU)
//   nodes:
//     - {name: n1, address: 10.0.0.1, gpu_type: v100, gpus: 4}
// Throws InputError with `file:line:` on malformed input.
Cluster load_cluster_yaml(const std::string& path);

// Alibaba PAI 2020 machine list (`machine,gpu_type,cap_cpu,cap_mem,cap_gpu`, no
// header). CPU-only machines are skipped; types map to the catalogue
// (P100, T4, V100, V100M32); `misc_type` names the catalogue type used for
// the trace's unnamed "MISC" machines (empty: skip them).
Cluster load_pai_machines(const std::string& path, const std::string& misc_type = "");

// Alibaba cluster-trace-gpu-v2023 node list (`sn,cpu_milli,memory_mib,gpu,model`
// header). CPU nodes are skipped; T4, P100, V100M16, V100M32 and A10 map to the
// catalogue, other models (G2, G3) only through `gpu_map` ("G2" -> "t4"), else
// the error names them.
Cluster load_alibaba_nodes(const std::string& path,
                           const std::map<std::string, std::string>& gpu_map = {});
bool is_alibaba_node_header(std::string_view first_line);

// A file path (.yaml/.yml node list, .csv PAI 2020 machine list or Alibaba
// 2023 node list, told apart by the header) or a shorthand spec.
Cluster load_cluster(const std::string& spec_or_path,
                     const std::map<std::string, std::string>& gpu_map = {});

// Writes the cluster as a YAML node list that load_cluster_yaml reads back.
std::string cluster_to_yaml(const Cluster& cluster);

}  // namespace cellsched
