// The runner's node list checked against the Slurm cluster it runs on
// (`--executor slurm`), before anything is launched: a node Slurm does not
// have, a GPU type its GRES does not offer or more GPUs than it has would
// otherwise fail every launch on it and use up the jobs' retries.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/cluster.h"

namespace cellsched::runner {

struct SlurmNodeGres {
  std::string name;
  std::string state;                 // sinfo's %t: idle, mix, alloc, drain, down, ...
  std::map<std::string, int> gpus;   // GRES type as Slurm names it -> count ("a100" -> 4)
};

// `sinfo -N -h -o %N|%G|%t`: one line per node and partition (a node listed
// twice counts once). GRES like "gpu:a100:4(S:0-1),gpu:k80:2" or "(null)";
// an untyped "gpu:4" is kept under "".
std::vector<SlurmNodeGres> parse_sinfo_gres(const std::string& text);

// For each node of `cluster`, the GRES type to ask srun for: Slurm's own name
// of a GPU type that the catalogue reads as the node's type ("a100" for a
// node list's a100-40). Throws InputError naming `nodes_file` and the node's
// line when Slurm lacks the node, offers no GPU of its type, or fewer GPUs.
// `notes` gets a line per node Slurm has drained or down (launches there
// wait in Slurm's queue).
std::map<std::string, std::string> match_slurm_nodes(const Cluster& cluster, const std::vector<SlurmNodeGres>& slurm,
                                                     const std::string& nodes_file, std::vector<std::string>* notes);

}  // namespace cellsched::runner
