// Replays a recorded schedule (core/schedule.h) as a policy: round k gives
// every job the GPUs its entries hold at the schedule's k-th round start.
#pragma once

#include <cstdint>
#include <memory>

#include "core/cluster.h"
#include "core/schedule.h"
#include "scheduler/policy.h"

namespace cellsched {

// A job seen with id J plays the schedule's job J - id_offset (the online
// runner numbers submitted jobs from 1, traces from 0). Node names must exist
// in the cluster the policy runs on (InputError otherwise, naming the node).
// Jobs the schedule does not place in a round wait; rounds past the
// schedule's last repeat its last round.
std::unique_ptr<Policy> make_replay(Schedule schedule, const Cluster& cluster,
                                    int64_t id_offset = 0);

}  // namespace cellsched
