#pragma once
// A batch script's options as the fields of a job body (POST /v1/jobs), for
// `unisched sbatch` and for the server reading a body's `script`, so that
// both put every option in the same place (docs/slurm-users.md).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unisched/model/batch_script.h"

namespace unisched::codec {

// The body fields `request` sets: name, queue, project, resources (nodes,
// cpus, memory_mb, gpus, gpu_model, tasks_per_node, walltime_seconds),
// constraints, output_file, error_file, workdir, env, max_retries,
// dependency (Slurm's syntax, as written) and array ({"indices",
// "max_running"}). What is unset is left out.
nlohmann::json BatchRequestToBody(const model::BatchRequest& request);

// [{"line": 7, "option": "--mail-type=END", "message": "..."}]: line 0 is
// the command line.
nlohmann::json BatchWarningsToJson(const std::vector<model::BatchWarning>& warnings);

// Puts into `body` each field of `fragment` that `body` lacks (null counts
// as absent): the fields of `resources` one by one, every other field whole
// (a body that gives `env` or `constraints` decides them, nothing is added
// key by key). Returns the paths it put ("resources.cpus", "env").
std::vector<std::string> MergeUnder(nlohmann::json& body, const nlohmann::json& fragment);

}  // namespace unisched::codec
