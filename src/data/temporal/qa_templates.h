// The text of the synthetic samples (issue 26): the tasks, their questions and canonical answer
// phrases, and the caption. Answers are short (the aligned LM may be tiny) and start with a
// space, so they tokenize as a word after "Answer:"; no choice of a task is a prefix of
// another, so a generated answer parses unambiguously (generator.h: parse_answer).
#pragma once
#include <string>
#include <vector>

#include "data/temporal/curve_attributes.h"

namespace lmtrain::data::temporal {

struct TaskSpec {
  std::string name;                  // "trend", ..., "caption"
  std::string question;              // without the options
  std::vector<std::string> choices;  // a class task's canonical phrases, in class order
  bool numeric = false;              // the answer is an integer (period, spike position)
  // The task's classes (choices.size(), or 1 for numeric tasks and the caption).
  int64_t num_classes() const { return choices.empty() ? 1 : static_cast<int64_t>(choices.size()); }
};

// Every task, in the order the generator cycles through them: trend, seasonality, noise,
// spikes, level_shift, period, spike_position, caption.
const std::vector<TaskSpec>& all_task_specs();
// One of them; UsageError naming the known tasks for another name.
const TaskSpec& task_spec(const std::string& name);

// The classes a sample of `task` with class `cls` (in [0, num_classes)) must have.
ClassConstraints constraints_for(const TaskSpec& task, int64_t cls);

// The prompt: the placeholder, a newline, the question with its options, "\nAnswer:".
//   "<ts><ts/>\nWhat is the trend of this series? Options: increasing, decreasing, flat.\nAnswer:"
std::string task_prompt(const TaskSpec& task);
// The canonical answer phrase, without the leading space: a choice, a number or the caption.
std::string task_answer(const TaskSpec& task, const CurveAttributes& a);

// One sentence about every attribute, e.g. "The series is increasing and periodic with period
// 24, with low noise, one spike at 137 and no level shift."
std::string caption(const CurveAttributes& a);

}  // namespace lmtrain::data::temporal
