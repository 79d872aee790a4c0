#include "data/temporal/generator.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/temporal/counter_rng.h"
#include "data/temporal/qa_templates.h"

namespace lmtrain::data::temporal {

std::vector<std::string> temporal_tasks() {
  std::vector<std::string> out;
  for (const TaskSpec& s : all_task_specs()) out.push_back(s.name);
  return out;
}

void check_generator_options(const GeneratorOptions& o) {
  if (o.lengths.empty()) throw UsageError("temporal generator: no series length given (--length)");
  for (int64_t l : o.lengths) {
    if (l < 32 || l > (int64_t{1} << 20)) {
      throw UsageError("temporal generator: --length " + std::to_string(l) +
                       " is outside [32, 1048576] (a series needs room for 4 periods and "
                       "separated spikes)");
    }
  }
  if (o.channels < 1 || o.channels > 64) {
    throw UsageError("temporal generator: --channels " + std::to_string(o.channels) +
                     " is outside [1, 64]");
  }
  for (const std::string& t : o.tasks) task_spec(t);
}

GeneratedCurve generate_curve(const GeneratorOptions& o, int64_t index) {
  const std::vector<std::string> all =
      o.tasks.empty() ? temporal_tasks() : std::vector<std::string>{};
  const std::vector<std::string>& tasks = o.tasks.empty() ? all : o.tasks;
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());
  const TaskSpec& spec = task_spec(tasks[static_cast<size_t>(index % n_tasks)]);
  const int64_t cls = (index / n_tasks) % spec.num_classes();

  CounterRng rng(o.seed, static_cast<uint64_t>(index), static_cast<uint64_t>(kGeneratorVersion));
  const int64_t length =
      o.lengths[static_cast<size_t>(rng.below(static_cast<int64_t>(o.lengths.size())))];
  GeneratedCurve g;
  g.attributes = draw_curve_attributes(rng, length, o.channels, constraints_for(spec, cls));
  TemporalSample& s = g.sample;
  s.series.push_back(render_curve(g.attributes, rng));
  s.task = spec.name;
  s.choices = spec.choices;
  s.answer = task_answer(spec, g.attributes);
  s.input = task_prompt(spec);
  s.output = " " + s.answer;
  if (spec.numeric) s.numeric_answer = static_cast<double>(std::stoll(s.answer));
  nlohmann::json attrs = attributes_to_json(g.attributes);
  attrs["version"] = kGeneratorVersion;
  attrs["seed"] = o.seed;
  attrs["index"] = index;
  attrs["task"] = spec.name;
  s.attributes_json = attrs.dump();
  return g;
}

namespace {

bool temporal_is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

size_t temporal_skip_space(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  return i;
}

}  // namespace

std::string parse_answer(const TemporalSample& s, const std::string& generated_text) {
  if (s.choices.empty()) {
    if (s.task == "caption" || std::isnan(s.numeric_answer)) return "";
    const auto v = parse_number(generated_text);
    return v ? format_number(*v) : "";
  }
  const size_t start = temporal_skip_space(generated_text);
  std::string best;
  for (const std::string& choice : s.choices) {
    if (generated_text.size() - start < choice.size() || choice.size() <= best.size()) continue;
    bool same = true;
    for (size_t i = 0; i < choice.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(generated_text[start + i])) ==
             std::tolower(static_cast<unsigned char>(choice[i]));
    }
    const size_t end = start + choice.size();
    if (same && (end == generated_text.size() || !temporal_is_word_char(generated_text[end]))) {
      best = choice;
    }
  }
  return best;
}

std::optional<double> parse_number(const std::string& text) {
  size_t i = temporal_skip_space(text);
  const size_t begin = i;
  const auto digits = [&] {
    const size_t from = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    return i - from;
  };
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  size_t n = digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    n += digits();
  }
  if (n == 0) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
    const size_t k = j;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j > k) i = j;  // "3e" is 3 followed by a letter
  }
  std::string number = text.substr(begin, i - begin);
  if (number[0] == '+') number.erase(0, 1);  // from_chars takes no '+'
  double v = 0;
  const auto r = std::from_chars(number.data(), number.data() + number.size(), v);
  if (r.ec != std::errc() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string format_number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<long long>(v));
  }
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

}  // namespace lmtrain::data::temporal
