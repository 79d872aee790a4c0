#include "data/temporal/qa_templates.h"

#include "core/error.h"

namespace lmtrain::data::temporal {

const std::vector<TaskSpec>& all_task_specs() {
  static const std::vector<TaskSpec> specs = {
      {"trend", "What is the trend of this series?", {"increasing", "decreasing", "flat"}, false},
      {"seasonality", "Is this series periodic?", {"periodic", "not periodic"}, false},
      {"noise", "How noisy is this series?", {"low", "high"}, false},
      {"spikes", "How many spikes does this series have?", {"none", "one", "several"}, false},
      {"level_shift", "Does this series have a level shift?", {"yes", "no"}, false},
      {"period", "What is the period of this series, in time steps?", {}, true},
      {"spike_position",
       "At which time step (counting from 0) is the spike in this series?",
       {},
       true},
      {"caption", "Describe this series.", {}, false},
  };
  return specs;
}

const TaskSpec& task_spec(const std::string& name) {
  std::string known;
  for (const TaskSpec& s : all_task_specs()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw UsageError("unknown temporal task '" + name + "' (known: " + known + ")");
}

ClassConstraints constraints_for(const TaskSpec& task, int64_t cls) {
  ClassConstraints c;
  const int k = static_cast<int>(cls);
  if (task.name == "trend") c.trend = k;  // choices in Trend's order
  if (task.name == "seasonality") c.periodic = k == 0 ? 1 : 0;
  if (task.name == "noise") c.high_noise = k;
  if (task.name == "spikes") c.spikes = k;  // choices in SpikeCount's order
  if (task.name == "level_shift") c.level_shift = k == 0 ? 1 : 0;
  if (task.name == "period") c.periodic = 1;
  if (task.name == "spike_position") c.spikes = static_cast<int>(SpikeCount::kOne);
  return c;
}

std::string task_prompt(const TaskSpec& task) {
  std::string q = std::string(kSeriesPlaceholder) + "\n" + task.question;
  if (!task.choices.empty()) {
    q += " Options: ";
    for (size_t i = 0; i < task.choices.size(); ++i) q += (i ? ", " : "") + task.choices[i];
    q += ".";
  }
  return q + "\nAnswer:";
}

std::string task_answer(const TaskSpec& task, const CurveAttributes& a) {
  if (task.name == "trend") return trend_name(a.trend);
  if (task.name == "seasonality") return a.periodic ? "periodic" : "not periodic";
  if (task.name == "noise") return a.high_noise ? "high" : "low";
  if (task.name == "spikes") return spike_count_name(a.spikes);
  if (task.name == "level_shift") return a.level_shift ? "yes" : "no";
  if (task.name == "period") return std::to_string(a.period);
  if (task.name == "spike_position") return std::to_string(a.spike_positions.at(0));
  return caption(a);
}

std::string caption(const CurveAttributes& a) {
  std::string s = std::string("The series is ") + trend_name(a.trend) + " and ";
  s += a.periodic ? "periodic with period " + std::to_string(a.period) : "not periodic";
  s += std::string(", with ") + (a.high_noise ? "high" : "low") + " noise, ";
  const auto& p = a.spike_positions;
  if (p.empty()) {
    s += "no spikes";
  } else if (p.size() == 1) {
    s += "one spike at " + std::to_string(p[0]);
  } else {
    s += std::to_string(p.size()) + " spikes at ";
    for (size_t i = 0; i < p.size(); ++i) {
      s += (i == 0 ? "" : i + 1 == p.size() ? " and " : ", ") + std::to_string(p[i]);
    }
    s += ",";  // "2 spikes at 40 and 90, and no level shift."
  }
  s += a.level_shift ? " and a level shift at " + std::to_string(a.shift_position)
                     : " and no level shift";
  return s + ".";
}

}  // namespace lmtrain::data::temporal
