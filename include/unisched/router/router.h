#pragma once
// The feature-aware router: from a job's workload (kind and features) and its
// resources it picks the queue and pool, applies the queue's defaults, and
// rejects at once what could never run there. Pure: reads a ClusterSpec.

#include <optional>
#include <string>

#include "unisched/common/status.h"
#include "unisched/model/cluster.h"
#include "unisched/model/job.h"

namespace unisched::router {

// What the submitter asked for, before routing. Resources may be partly
// unset (0) and are completed from the chosen queue.
struct RouteRequest {
  model::Workload workload;
  model::ResourceRequest resources;
  model::Labels constraints;
  std::optional<std::string> queue;  // explicit queue, if the submitter named one
};

struct RouteDecision {
  std::string queue;
  std::string pool;
  std::string reason;                // why, in words: "rule fp64-hpc: workload.precision=fp64"
  model::ResourceRequest resources;  // with the queue's defaults applied
};

// Errors (all ErrorKind::kUnprocessable unless noted):
//  - unknown explicit queue: code "unknown_queue", field "queue" (kNotFound is not used: the
//    request is what is wrong)
//  - explicit queue that does not serve the workload kind: "queue_mismatch", field "queue"
//  - walltime above the queue maximum: "walltime_exceeds_max", field "resources.walltime_seconds"
//  - no node of the pool could ever hold the job: "unsatisfiable", field naming the resource
//    ("resources.gpus", "resources.cpus", "resources.memory_mb", "resources.nodes", "constraints")
//  - no rule and no default queue for the kind: "no_route", field "workload.kind"
Result<RouteDecision> Route(const model::ClusterSpec& cluster, const RouteRequest& request);

}  // namespace unisched::router
