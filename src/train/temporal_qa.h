// Scoring a temporal encoder on held-out time-series questions (`lmtrain eval --temporal_qa`,
// issue 26). Each validation sample of the synthetic generator asks about one attribute of its
// curve; the scorer answers it three ways and under three conditions:
//   answers:    greedy (the generated text, parsed for a canonical answer phrase or a number),
//               and by likelihood (the option whose answer text the model finds most likely)
//   conditions: the sample's own series; text only (the same prompt, soft tokens zeroed); and
//               shuffled (the question paired with the next sample's series, which belongs to
//               another attribute's draw): this one must fall to chance, which shows that the
//               answers come from the curve, not from the text.
// Class tasks report accuracy next to chance (1 / options: the generator balances the classes);
// numeric tasks (period, spike position) the median relative error and the share within 10%.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model/temporal/temporal_encoder.h"
#include "train/temporal_data.h"

namespace lmtrain::train {

struct TemporalQaOptions {
  int64_t max_samples = 0;     // score the first N validation samples (0: all)
  int64_t max_new_tokens = 8;  // greedy answers stop at <|endoftext|> or after this many
};

struct QaCondition {
  double likelihood_accuracy = 0;  // class tasks
  double greedy_accuracy = 0;      // class tasks: parsed answer == the true one
  double median_rel_error = 0;     // numeric tasks (unparsable answers count as error 1)
  double within_10pct = 0;         // numeric tasks
};

struct QaTaskScore {
  std::string task;
  int64_t samples = 0;
  int64_t options = 0;  // classes of a class task, 0 for a numeric task
  double chance = 0;    // 1 / options
  QaCondition curve, text_only, shuffled;
};

struct TemporalQaReport {
  std::vector<QaTaskScore> tasks;
  int64_t samples = 0;
};

// Scores the first options.max_samples validation samples of `data` (samples without a task,
// e.g. real data, and caption samples are skipped). lm and encoder are used in eval mode on
// their device.
TemporalQaReport score_temporal_qa(model::GptImpl& lm,
                                   model::temporal::TemporalEncoderImpl& encoder,
                                   const TemporalData& data, const TemporalQaOptions& options);

// The greedy continuation of a prompt row (temporal_prompt) as the QA eval decodes it, in a
// batch of `shape` (the run's TemporalData::shape()): its ids until eot_id (<|endoftext|>, left
// out) or max_new_tokens; the soft tokens zeroed with text_only (the text-only baseline).
std::vector<uint32_t> greedy_answer_ids(model::GptImpl& lm,
                                        model::temporal::TemporalEncoderImpl& encoder,
                                        const TemporalRow& prompt, const TemporalBatchShape& shape,
                                        int64_t eot_id, int64_t max_new_tokens,
                                        bool text_only = false);

// A table: task, n, chance, then per condition the accuracies (or errors).
std::string format_temporal_qa(const TemporalQaReport& report);
nlohmann::json temporal_qa_json(const TemporalQaReport& report);

}  // namespace lmtrain::train
