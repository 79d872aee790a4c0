// Helpers for the multi-process tests: free ports, concurrent commands, and comparing the
// parameters of two checkpoints.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distributed/group.h"
#include "test_util.h"

namespace lmtrain::testing {

// A TCP port that was free a moment ago (bound to port 0 and released).
int free_port();

// Runs the commands concurrently (each through /bin/sh), returning their results in order.
std::vector<CommandResult> run_parallel(const std::vector<std::string>& commands);

// max over tensors of max|a - b| / max|b| between the model.safetensors (or another tensor
// file) of two checkpoint directories; fails the current test if the tensor names differ.
double max_param_rel_diff(const std::string& ckpt_a, const std::string& ckpt_b,
                          const std::string& file = "model.safetensors");

// The same with the tensors matched by name (a sharded checkpoint's file, an objective's say, is
// assembled from its shards in its layout's order); fails the current test if a name is
// missing on either side.
double max_rel_diff_by_name(const std::string& ckpt_a, const std::string& ckpt_b,
                            const std::string& file);

// `lmtrain <args>` on `ranks` local ranks: the binary itself for one rank, `lmtrain launch` on a
// free port for more (args: the command and its flags, e.g. "train --run.dir=...").
std::string lmtrain_on_ranks(int ranks, const std::string& args);

// `run` equals `base` (one process, say) within float tolerance: the logged loss within
// loss_rel relative at every step, the parameters of checkpoints/latest within param_rel.
void expect_run_matches(const std::string& run, const std::string& base, double loss_rel,
                        double param_rel);

// `lmtrain export hf` and `lmtrain eval` read checkpoint `ckpt` (sharded, say) as the same model
// as `whole` (a one-process checkpoint): every exported tensor within 1e-5 relative, the eval
// loss on `data_dir` within 2e-4 (printed to 4 decimals). Exports go under `scratch`.
void expect_commands_read_alike(const std::string& ckpt, const std::string& whole,
                                const std::string& data_dir, const std::string& scratch);

// `lmtrain train <train_args>` on 2 ranks (run.dir = `run_dir`, checkpoint.every=2) with rank 1
// killed while saving the checkpoint of step 4, after writing its own files: the run fails and
// the checkpoint of step 2 stays complete and latest.
void expect_killed_save_keeps_previous(const std::string& run_dir, const std::string& train_args);

// Every step record (a line with "loss") of RUN_DIR/metrics.jsonl, in order.
std::vector<nlohmann::json> step_records(const std::string& run_dir);

// The integer a run's log prints after `key` ("key: N" or "key N"), or -1 when it does not.
int64_t logged_count(const std::string& output, const std::string& key);
// The number a command prints after "key: " ("ms_per_step: 2152.14"), or -1 when it does not.
double logged_number(const std::string& output, const std::string& key);
// The loss of every step record in RUN_DIR/metrics.jsonl, and of the last one (-1: none).
std::vector<double> logged_losses(const std::string& run_dir);
double last_logged_loss(const std::string& run_dir);

// Runs body(rank, group) on `world` ranks, each a thread of this process with its own TCPStore
// client and Gloo group on loopback; returns each rank's error text ("" = none).
std::vector<std::string> run_ranks_in_process(
    int world, const std::function<void(int rank, dist::Group& group)>& body);

}  // namespace lmtrain::testing
