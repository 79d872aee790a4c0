// Iteration-level ("continuous") batching, as Orca, vLLM and TGI do it: the running batch
// changes between decode steps. GenerationQueue's thread drives it: admit() takes waiting jobs
// whenever the batch has room, and each step() runs one chunk of the admitted jobs' prefill (so
// a long prompt stalls the running rows for one chunk at a time, not its whole length), then
// one decode step of every running row. Rows leave at once when they stop (end token, their
// max_tokens, the context, or a client gone); the admitted join the batch when their prefill is
// done and their first token is drawn.
//
// Each job samples with its own generator, seeded by its request (or by the queue), through the
// same calls generate() makes for one prompt: a job's tokens do not depend on what else is in
// the batch (greedy: equal to generate() alone; see tests/serve/continuous_batch_test.cpp for
// the floating-point argument). Any mix of sampling settings shares one batch.
//
// The KV cache is infer::RaggedKvCache (left-padded rows, so the model's dense masked kernels
// serve ragged rows). Only the exact cache can take rows mid-flight: quantised storage groups
// tokens by slot, and streaming and h2o keep tokens by position in the row, so moving a row
// changes what they keep. For those (and models with model.smear, whose decode state is per
// call, not per row) continuous_batching_refusal() says why and the queue batches statically.
#pragma once
#include <ATen/core/Generator.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "infer/kv_cache_policy.h"
#include "infer/ragged_kv_cache.h"
#include "model/gpt.h"

namespace lmtrain::serve {

struct GenerationJob;

// Empty when `policy` and `model` can batch continuously; else why not (for the log).
std::string continuous_batching_refusal(const infer::KvPolicy& policy, const model::GptImpl& model);

class ContinuousBatch {
 public:
  // eot_id: the end token (< 0: none); prefill_chunk: the most prompt tokens one step
  // prefills.
  ContinuousBatch(model::GptImpl& model, int64_t eot_id, int64_t prefill_chunk);

  // Rows decoding now, and rows admitted (prefilling).
  int64_t running() const { return static_cast<int64_t>(rows_.size()); }
  int64_t admitted() const { return static_cast<int64_t>(admitted_.size()); }
  bool idle() const { return rows_.empty() && admitted_.empty(); }
  // Starts prefilling `jobs` together (only when admitted() is 0). seeds: one per job.
  void admit(std::vector<std::shared_ptr<GenerationJob>> jobs, const std::vector<uint64_t>& seeds);
  // One prefill chunk (when jobs are admitted), then one decode step of the running rows.
  void step();
  // Rows that left because their client had gone, so far.
  int64_t cancelled() const { return cancelled_; }
  // The most rows one decode step has run.
  int64_t largest() const { return largest_; }
  // Ends every running and admitted job with `error` (decoding failed, or shutdown).
  void fail(const std::string& error);

 private:
  struct Row {
    std::shared_ptr<GenerationJob> job;
    at::Generator gen;
    int64_t budget = 0;  // tokens it may generate: max_tokens, or less when the context ends
    uint32_t last = 0;   // its newest token: the next decode step's input
  };
  model::GptImpl& model_;
  int64_t eot_id_, prefill_chunk_;
  std::vector<Row> rows_;       // the running batch, in the cache's row order
  infer::RaggedKvCache cache_;  // rows_'s keys and values
  std::vector<Row> admitted_;   // prefilling together
  std::optional<infer::RaggedKvCache> prefill_cache_;
  std::vector<std::vector<uint32_t>> prefill_ids_;  // admitted_'s prompts, left-padded
  int64_t prefilled_ = 0;                           // columns of prefill_ids_ done
  int64_t cancelled_ = 0, largest_ = 0;

  // Hands `id` to row's job; returns true when the row stops with it.
  bool emit(Row& row, uint32_t id);
  // Draws each row's next token from logits (B, V) on the CPU; returns the rows that go on.
  std::vector<int64_t> draw(std::vector<Row>& rows, const at::Tensor& logits);
  void prefill_chunk();
  void drop_cancelled();
  // Keeps the running rows `keep` (ascending) in rows_ and the cache.
  void keep_rows(const std::vector<int64_t>& keep);
};

}  // namespace lmtrain::serve
