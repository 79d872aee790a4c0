// The synthetic time-series generator (issue 26): determinism, class balance by construction,
// and that every attribute a sample claims can be read back from its curve.
#include "data/temporal/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"
#include "data/temporal/qa_templates.h"
#include "data/temporal/series_text.h"
#include "data/temporal/temporal_jsonl.h"

namespace lmtrain::data::temporal {
namespace {

GeneratorOptions mixed_options(uint64_t seed = 7) {
  GeneratorOptions o;
  o.seed = seed;
  o.lengths = {32, 100, 256};
  o.channels = 2;
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The curve of channel c as doubles.
std::vector<double> channel_values(const TemporalSample& s, int64_t c) {
  const SeriesValues& v = s.series.at(0);
  return std::vector<double>(v.values.begin() + c * v.length,
                             v.values.begin() + (c + 1) * v.length);
}

// Least-squares slope of y against t = 0..n-1.
double ls_slope(const std::vector<double>& y) {
  const double n = static_cast<double>(y.size()), mt = (n - 1) / 2;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double num = 0, den = 0;
  for (size_t t = 0; t < y.size(); ++t) {
    num += (static_cast<double>(t) - mt) * (y[t] - my);
    den += (static_cast<double>(t) - mt) * (static_cast<double>(t) - mt);
  }
  return num / den;
}

// Autocorrelation of y at `lag`: the Pearson correlation of y[0, L - lag) with y[lag, L).
double autocorrelation(const std::vector<double>& y, size_t lag) {
  const size_t n = y.size() - lag;
  double ma = 0, mb = 0;
  for (size_t t = 0; t < n; ++t) {
    ma += y[t];
    mb += y[t + lag];
  }
  ma /= static_cast<double>(n);
  mb /= static_cast<double>(n);
  double ab = 0, aa = 0, bb = 0;
  for (size_t t = 0; t < n; ++t) {
    ab += (y[t] - ma) * (y[t + lag] - mb);
    aa += (y[t] - ma) * (y[t] - ma);
    bb += (y[t + lag] - mb) * (y[t + lag] - mb);
  }
  return ab / std::sqrt(aa * bb);
}

// The curve of channel c minus the clean terms named in `remove` (computed here from the
// attributes' numbers, independently of the generator's clean_value).
struct Terms {
  bool trend = false, season = false, shift = false, spikes = false;
};
std::vector<double> without_terms(const GeneratedCurve& g, int64_t c, Terms remove) {
  const CurveAttributes& a = g.attributes;
  const ChannelShape& s = a.curves[static_cast<size_t>(c)];
  std::vector<double> y = channel_values(g.sample, c);
  for (int64_t t = 0; t < a.length; ++t) {
    const double td = static_cast<double>(t);
    double r = 0;
    if (remove.trend) r += s.offset + s.slope * (td - static_cast<double>(a.length - 1) / 2);
    if (remove.season && a.periodic) {
      const double w = 2 * M_PI / static_cast<double>(a.period);
      r += s.amplitude * std::sin(w * td + s.phase) +
           s.harmonic * std::sin(2 * w * td + s.harmonic_phase);
    }
    if (remove.shift && a.level_shift && t >= a.shift_position) r += s.shift;
    if (remove.spikes) {
      for (size_t k = 0; k < a.spike_positions.size(); ++k) {
        if (a.spike_positions[k] == t) r += s.spike_heights[k];
      }
    }
    y[static_cast<size_t>(t)] -= r;
  }
  return y;
}

double stddev(const std::vector<double>& y) {
  const double m = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(y.size());
  double v = 0;
  for (double x : y) v += (x - m) * (x - m);
  return std::sqrt(v / static_cast<double>(y.size()));
}

TEST(TemporalGenerator, SameSeedGivesTheSameSamplesAnotherSeedOthers) {
  const GeneratorOptions a = mixed_options(7), b = mixed_options(8);
  for (int64_t i : {0, 1, 5, 77, 1000, 123456}) {
    const TemporalSample x = generate_sample(a, i), y = generate_sample(a, i),
                         z = generate_sample(b, i);
    EXPECT_EQ(x.input, y.input);
    EXPECT_EQ(x.output, y.output);
    EXPECT_EQ(x.attributes_json, y.attributes_json);
    EXPECT_TRUE(same_bits(x.series[0].values, y.series[0].values)) << i;
    EXPECT_EQ(sample_to_jsonl(x), sample_to_jsonl(y));
    EXPECT_FALSE(same_bits(x.series[0].values, z.series[0].values)) << i;
    EXPECT_EQ(x.task, z.task);  // the task and class follow the index, not the seed
    if (!x.choices.empty()) {
      EXPECT_EQ(x.answer, z.answer);
    }
  }
  // Neighbouring indices differ too.
  EXPECT_FALSE(
      same_bits(generate_sample(a, 10).series[0].values, generate_sample(a, 18).series[0].values));
}

TEST(TemporalGenerator, TheTaskAndClassFollowTheIndexSoEveryBlockIsBalanced) {
  const GeneratorOptions o = mixed_options();
  const auto tasks = temporal_tasks();
  ASSERT_EQ(tasks,
            (std::vector<std::string>{"trend", "seasonality", "noise", "spikes", "level_shift",
                                      "period", "spike_position", "caption"}));
  const int64_t block = static_cast<int64_t>(tasks.size()) * 6;
  for (int64_t start : {0, 13, 4801}) {  // any contiguous block, e.g. a held-out tail
    std::map<std::string, std::map<std::string, int>> counts;
    for (int64_t i = start; i < start + 5 * block; ++i) {
      const TemporalSample s = generate_sample(o, i);
      EXPECT_EQ(s.task, tasks[static_cast<size_t>(i % 8)]);
      if (!s.choices.empty()) {
        EXPECT_EQ(s.answer,
                  s.choices[static_cast<size_t>((i / 8) % static_cast<int64_t>(s.choices.size()))]);
        ++counts[s.task][s.answer];
      }
    }
    ASSERT_EQ(counts.size(), 5u);
    for (const auto& [task, per_class] : counts) {
      EXPECT_EQ(per_class.size(), task_spec(task).choices.size()) << task;
      for (const auto& [cls, n] : per_class)
        EXPECT_EQ(n, 30 / static_cast<int>(per_class.size())) << task << " " << cls;
    }
  }
  // A subset of tasks cycles through that subset.
  GeneratorOptions sub = o;
  sub.tasks = {"spikes", "trend"};
  EXPECT_EQ(generate_sample(sub, 0).task, "spikes");
  EXPECT_EQ(generate_sample(sub, 3).task, "trend");
  EXPECT_EQ(generate_sample(sub, 3).answer, "decreasing");  // class (3 / 2) % 3 = 1
}

TEST(TemporalGenerator, PromptsAskOneQuestionWithOptionsAndAnswersAreCanonical) {
  const GeneratorOptions o = mixed_options();
  for (int64_t i = 0; i < 64; ++i) {
    const TemporalSample s = generate_sample(o, i);
    ASSERT_EQ(s.series.size(), 1u);
    EXPECT_EQ(count_placeholders(s.input), 1);
    EXPECT_EQ(s.input.rfind(std::string(kSeriesPlaceholder) + "\n", 0), 0u) << s.input;
    EXPECT_EQ(s.input.substr(s.input.size() - 8), "\nAnswer:");
    EXPECT_EQ(s.output, " " + s.answer);
    EXPECT_EQ(s.series[0].channels, 2);
    const auto attrs = nlohmann::json::parse(s.attributes_json);
    EXPECT_EQ(attrs["index"], i);
    EXPECT_EQ(attrs["seed"], 7);
    EXPECT_EQ(attrs["task"], s.task);
    EXPECT_EQ(attrs["length"], s.series[0].length);
    if (!s.choices.empty()) {
      EXPECT_NE(std::find(s.choices.begin(), s.choices.end(), s.answer), s.choices.end());
      EXPECT_NE(s.input.find("Options: "), std::string::npos);
      EXPECT_TRUE(std::isnan(s.numeric_answer));
    } else if (s.task == "caption") {
      EXPECT_EQ(s.answer.rfind("The series is ", 0), 0u);
      EXPECT_TRUE(std::isnan(s.numeric_answer));
    } else {
      EXPECT_EQ(format_number(s.numeric_answer), s.answer);
    }
  }
  const TemporalSample trend = generate_sample(o, 0);
  EXPECT_EQ(trend.input,
            "<ts><ts/>\nWhat is the trend of this series? Options: increasing, decreasing, "
            "flat.\nAnswer:");
  EXPECT_EQ(trend.output, " increasing");
}

TEST(TemporalGenerator, NumericAnswersAndTheCaptionAgreeWithTheAttributes) {
  const GeneratorOptions o = mixed_options();
  for (int64_t i = 0; i < 400; ++i) {
    const GeneratedCurve g = generate_curve(o, i);
    const CurveAttributes& a = g.attributes;
    const TemporalSample& s = g.sample;
    EXPECT_EQ(nlohmann::json::parse(s.attributes_json)["spike_positions"],
              nlohmann::json(a.spike_positions));
    if (s.task == "period") {
      ASSERT_TRUE(a.periodic);
      EXPECT_EQ(s.numeric_answer, static_cast<double>(a.period));
    }
    if (s.task == "spike_position") {
      ASSERT_EQ(a.spike_positions.size(), 1u);
      EXPECT_EQ(s.numeric_answer, static_cast<double>(a.spike_positions[0]));
    }
    const std::string c = caption(a);
    EXPECT_NE(c.find(std::string("is ") + trend_name(a.trend)), std::string::npos) << c;
    EXPECT_NE(c.find(a.high_noise ? "high noise" : "low noise"), std::string::npos) << c;
    EXPECT_EQ(c.find("period " + std::to_string(a.period)) != std::string::npos, a.periodic) << c;
    EXPECT_EQ(c.find("no level shift") == std::string::npos, a.level_shift) << c;
    for (int64_t p : a.spike_positions)
      EXPECT_NE(c.find(std::to_string(p)), std::string::npos) << c;
  }
  EXPECT_EQ(caption(generate_curve(o, 7).attributes), generate_sample(o, 7).answer);
}

// The LM's warm-up text (temporal-data --lm_text) holds, where the series goes, its statistics
// and its attributes in words: the answer of every asked task, so the text alone answers the
// question, and an LM trained on it learns to read the description where soft tokens will
// stand.
TEST(TemporalGenerator, TheWarmUpTextDescribesTheCurveWhereItsSoftTokensWillStand) {
  GeneratorOptions o = mixed_options(9);
  o.tasks = {"trend", "seasonality", "spikes", "period", "spike_position", "caption"};
  int with_period = 0, with_position = 0;
  for (int64_t i = 0; i < 120; ++i) {
    const GeneratedCurve g = generate_curve(o, i);
    const CurveAttributes& a = g.attributes;
    const std::string words = attribute_words(a, o.tasks);
    std::string expected = std::string(trend_name(a.trend)) + " " +
                           (a.periodic ? "periodic" : "not periodic") + " " +
                           spike_count_name(a.spikes);
    if (a.periodic) {
      expected += " " + std::to_string(a.period);
      ++with_period;
    }
    if (!a.spike_positions.empty()) {
      expected += " " + std::to_string(a.spike_positions[0]);
      ++with_position;
    }
    EXPECT_EQ(words, expected) << "sample " << i;

    const std::string text = warmup_text(g.sample, words);
    const std::string head = series_stats_text(g.sample.series[0]) + " " + words + "\n";
    EXPECT_EQ(text.substr(0, head.size()), head) << text;
    EXPECT_EQ(text.find("<ts>"), std::string::npos) << text;
    ASSERT_GE(text.size(), g.sample.output.size());
    EXPECT_EQ(text.substr(text.size() - g.sample.output.size()), g.sample.output) << text;
    if (g.sample.task != "caption" && !g.sample.choices.empty()) {
      // The answer is one of the description's words.
      EXPECT_NE((" " + words + " ").find(" " + g.sample.answer + " "), std::string::npos) << text;
    }
  }
  EXPECT_GT(with_period, 0);
  EXPECT_GT(with_position, 0);
  // Tasks that are not asked are not described; no description leaves the statistics alone.
  EXPECT_EQ(attribute_words(generate_curve(o, 0).attributes, {"trend"}),
            trend_name(generate_curve(o, 0).attributes.trend));
  const GeneratedCurve g = generate_curve(o, 1);
  EXPECT_EQ(warmup_text(g.sample, "").substr(0, series_stats_text(g.sample.series[0]).size() + 2),
            series_stats_text(g.sample.series[0]) + " \n");
}

// The trend label is the least-squares slope's: rising or falling by well over the noise's
// reach, or flat within it. Checked on the curve minus its other terms, and on the raw curve of
// curves that have no other terms.
TEST(TemporalCurves, TheTrendIsTheLeastSquaresSlope) {
  const GeneratorOptions o = mixed_options(11);
  int raw_checked = 0;
  for (int64_t i = 0; i < 600; ++i) {
    const GeneratedCurve g = generate_curve(o, i);
    const CurveAttributes& a = g.attributes;
    for (int64_t c = 0; c < 2; ++c) {
      const ChannelShape& s = a.curves[static_cast<size_t>(c)];
      const double n = static_cast<double>(a.length);
      // The change over the series, in shape units, and how far noise can move it (6 sigma).
      const double change =
          ls_slope(without_terms(g, c, {false, true, true, true})) * (n - 1) / s.scale;
      const double reach = 6 * (s.noise_std / s.scale) * std::sqrt(12 / n);
      if (a.trend == Trend::kIncreasing) {
        EXPECT_GT(change, 2.5 - reach) << i;
      }
      if (a.trend == Trend::kDecreasing) {
        EXPECT_LT(change, -2.5 + reach) << i;
      }
      if (a.trend == Trend::kFlat) {
        EXPECT_LT(std::fabs(change), 0.1 + reach) << i;
      }
      if (a.trend != Trend::kFlat && !a.periodic && !a.level_shift && a.spike_positions.empty()) {
        const double raw = ls_slope(channel_values(g.sample, c));
        EXPECT_EQ(raw > 0, a.trend == Trend::kIncreasing) << i;
        ++raw_checked;
      }
    }
  }
  EXPECT_GT(raw_checked, 10);
}

// A periodic curve's autocorrelation peaks at its period (near lag P it beats every other lag
// in [P/2, 3P/2], within 5% of P); an aperiodic curve has no such peak.
TEST(TemporalCurves, APeriodicCurvesAutocorrelationPeaksAtThePeriod) {
  GeneratorOptions o = mixed_options(12);
  o.lengths = {128, 256};
  int periodic = 0, aperiodic = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const GeneratedCurve g = generate_curve(o, i);
    const CurveAttributes& a = g.attributes;
    for (int64_t c = 0; c < 2; ++c) {
      const auto y = without_terms(g, c, {true, false, true, true});
      if (a.periodic) {
        const size_t p = static_cast<size_t>(a.period);
        size_t best = p / 2;
        for (size_t lag = p / 2; lag <= std::min(3 * p / 2, y.size() / 2); ++lag) {
          if (autocorrelation(y, lag) > autocorrelation(y, best)) best = lag;
        }
        // A long period's peak is flat (cos(2 pi d / P) at d = 2, P = 57: 0.976): within 5%.
        EXPECT_LE(std::labs(static_cast<long>(best) - static_cast<long>(p)),
                  std::max<long>(1, static_cast<long>(p) / 20))
            << i << " period " << p;
        EXPECT_GT(autocorrelation(y, p), 0.4) << i;
        ++periodic;
      } else {
        double peak = -1;
        for (size_t lag = 8; lag <= y.size() / 4; ++lag)
          peak = std::max(peak, autocorrelation(y, lag));
        EXPECT_LT(peak, 0.4) << i;
        ++aperiodic;
      }
    }
  }
  EXPECT_GT(periodic, 100);
  EXPECT_GT(aperiodic, 100);
}

// The spikes are where the attributes say and nowhere else: beyond 6 noise deviations from
// the rest of the curve; on low-noise aperiodic curves without a level shift also by a plain
// local-median detector.
TEST(TemporalCurves, TheSpikeCountMatchesTheCurve) {
  const GeneratorOptions o = mixed_options(13);
  int detected_locally = 0;
  std::map<SpikeCount, int> seen;
  for (int64_t i = 0; i < 600; ++i) {
    const GeneratedCurve g = generate_curve(o, i);
    const CurveAttributes& a = g.attributes;
    ++seen[a.spikes];
    const size_t n = a.spike_positions.size();
    EXPECT_EQ(n == 0, a.spikes == SpikeCount::kNone);
    EXPECT_EQ(n == 1, a.spikes == SpikeCount::kOne);
    EXPECT_EQ(n >= 2 && n <= 4, a.spikes == SpikeCount::kSeveral);
    for (int64_t c = 0; c < 2; ++c) {
      const ChannelShape& s = a.curves[static_cast<size_t>(c)];
      const auto r = without_terms(g, c, {true, true, true, false});
      std::vector<int64_t> found;
      for (size_t t = 0; t < r.size(); ++t) {
        if (std::fabs(r[t]) > 6 * s.noise_std) found.push_back(static_cast<int64_t>(t));
      }
      EXPECT_EQ(found, a.spike_positions) << i;
      for (double h : s.spike_heights)
        EXPECT_GE(std::fabs(h), std::max(4.0 * s.scale, 12 * s.noise_std));
      if (!a.periodic && !a.high_noise && !a.level_shift) {
        const auto x = channel_values(g.sample, c);
        std::vector<int64_t> local;
        for (size_t t = 2; t + 2 < x.size(); ++t) {
          std::vector<double> nb = {x[t - 2], x[t - 1], x[t + 1], x[t + 2]};
          std::sort(nb.begin(), nb.end());
          if (std::fabs(x[t] - (nb[1] + nb[2]) / 2) > 2.5 * s.scale)
            local.push_back(static_cast<int64_t>(t));
        }
        EXPECT_EQ(local, a.spike_positions) << i;
        ++detected_locally;
      }
    }
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_GT(detected_locally, 50);
}

// The noise class is the residual's size: low noise at most 0.06 of the scale, high at least
// 0.3; the residual's standard deviation is the stated noise_std.
TEST(TemporalCurves, TheNoiseLevelIsTheResidualsSize) {
  GeneratorOptions o = mixed_options(14);
  o.lengths = {100, 256};
  int high = 0, low = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const GeneratedCurve g = generate_curve(o, i);
    const CurveAttributes& a = g.attributes;
    // Never pure noise: its level could not be told after normalisation.
    EXPECT_TRUE(a.trend != Trend::kFlat || a.periodic || a.level_shift) << i;
    for (int64_t c = 0; c < 2; ++c) {
      const ChannelShape& s = a.curves[static_cast<size_t>(c)];
      const double sd = stddev(without_terms(g, c, {true, true, true, true}));
      EXPECT_NEAR(sd / s.noise_std, 1.0, 0.3) << i;
      const double rel = sd / s.scale;
      if (a.high_noise) {
        EXPECT_GT(rel, 0.2) << i;
        ++high;
      } else {
        EXPECT_LT(rel, 0.09) << i;
        ++low;
      }
    }
  }
  EXPECT_GT(high, 200);
  EXPECT_GT(low, 200);
}

// A level shift moves the curve (minus trend, season, spikes) by 1.5 to 2.5 scales at its
// position; without one, the two sides agree (within what the noise allows).
TEST(TemporalCurves, ALevelShiftIsAStepAtItsPosition) {
  const GeneratorOptions o = mixed_options(15);
  int shifts = 0;
  for (int64_t i = 0; i < 300; ++i) {
    const GeneratedCurve g = generate_curve(o, i);
    const CurveAttributes& a = g.attributes;
    const int64_t at = a.level_shift ? a.shift_position : a.length / 2;
    for (int64_t c = 0; c < 2; ++c) {
      const ChannelShape& s = a.curves[static_cast<size_t>(c)];
      const auto y = without_terms(g, c, {true, true, false, true});
      std::vector<double> before(y.begin(), y.begin() + at), after(y.begin() + at, y.end());
      const auto median = [](std::vector<double> v) {
        std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
        return v[v.size() / 2];
      };
      const double step = (median(after) - median(before)) / s.scale;
      // How far noise can move the difference of the two medians (4 sigma; a median's standard
      // error is 1.25 sigma / sqrt(n)).
      const double reach = 0.1 + 4 * 1.25 * (s.noise_std / s.scale) *
                                     std::sqrt(1.0 / static_cast<double>(before.size()) +
                                               1.0 / static_cast<double>(after.size()));
      if (a.level_shift) {
        EXPECT_GT(std::fabs(step), 1.5 - reach) << i;
        EXPECT_NEAR(step, s.shift / s.scale, reach) << i;
        ++shifts;
      } else {
        EXPECT_LT(std::fabs(step), reach) << i;
      }
    }
  }
  EXPECT_GT(shifts, 100);
}

TEST(TemporalGenerator, ParseAnswerRoundTripsEveryChoice) {
  const GeneratorOptions o = mixed_options();
  for (int64_t i = 0; i < 8 * 6; ++i) {
    TemporalSample s = generate_sample(o, i);
    if (s.choices.empty()) continue;
    for (const std::string& c : s.choices) {
      EXPECT_EQ(parse_answer(s, " " + c), c);
      EXPECT_EQ(parse_answer(s, " " + c + ".\nThe series"), c);
      EXPECT_EQ(parse_answer(s, "\n" + c + "<|endoftext|>"), c);
      std::string upper = c;
      upper[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[0])));
      EXPECT_EQ(parse_answer(s, " " + upper + ", because"), c);
      EXPECT_EQ(parse_answer(s, " " + c + "ly"), "") << c;  // a longer word is not the choice
    }
    EXPECT_EQ(parse_answer(s, " maybe"), "");
    EXPECT_EQ(parse_answer(s, ""), "");
    EXPECT_EQ(parse_answer(s, s.output), s.answer);
  }
  TemporalSample season = generate_sample(o, 1);
  ASSERT_EQ(season.task, "seasonality");
  EXPECT_EQ(parse_answer(season, " not periodic"), "not periodic");
  EXPECT_EQ(parse_answer(season, " periodic"), "periodic");
  EXPECT_EQ(parse_answer(season, " not"), "");

  TemporalSample period = generate_sample(o, 5);
  ASSERT_EQ(period.task, "period");
  EXPECT_EQ(parse_answer(period, period.output), period.answer);
  EXPECT_EQ(parse_answer(period, " 24 steps"), "24");
  EXPECT_EQ(parse_answer(period, " 24.0"), "24");
  EXPECT_EQ(parse_answer(period, " about 24"), "");
  EXPECT_EQ(parse_answer(generate_sample(o, 7), " The series is flat"), "");  // a caption
}

TEST(TemporalGenerator, ParseNumberReadsTheLeadingNumberOnly) {
  EXPECT_EQ(parse_number(" 137"), 137.0);
  EXPECT_EQ(parse_number("\n-3.5e2x"), -350.0);
  EXPECT_EQ(parse_number("+7 steps"), 7.0);
  EXPECT_EQ(parse_number(".5"), 0.5);
  EXPECT_EQ(parse_number("12."), 12.0);
  EXPECT_EQ(parse_number("3e"), 3.0);
  EXPECT_FALSE(parse_number("abc 12"));
  EXPECT_FALSE(parse_number("inf"));
  EXPECT_FALSE(parse_number("nan"));
  EXPECT_FALSE(parse_number("-"));
  EXPECT_FALSE(parse_number("."));
  EXPECT_FALSE(parse_number("1e999"));
  EXPECT_FALSE(parse_number(""));
  EXPECT_EQ(format_number(24.0), "24");
  EXPECT_EQ(format_number(-2.5), "-2.5");
}

TEST(TemporalGenerator, BadOptionsAreUsageErrorsNamingTheFlag) {
  GeneratorOptions o;
  o.lengths = {16};
  try {
    check_generator_options(o);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--length 16"), std::string::npos) << e.what();
  }
  o.lengths = {};
  EXPECT_THROW(check_generator_options(o), UsageError);
  o.lengths = {64};
  o.channels = 0;
  EXPECT_THROW(check_generator_options(o), UsageError);
  o.channels = 1;
  o.tasks = {"trend", "colour"};
  try {
    check_generator_options(o);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'colour'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("spike_position"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lmtrain::data::temporal
