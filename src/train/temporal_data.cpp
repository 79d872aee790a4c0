#include "train/temporal_data.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "data/temporal/series_checks.h"
#include "data/temporal/series_text.h"
#include "data/window_stream.h"
#include "model/gpt.h"
#include "model/temporal/patching.h"

namespace lmtrain::train {
namespace {

namespace dt = data::temporal;

// The readers' checks (data/temporal/series_checks.h) against the encoder's shape, and that the
// buffers hold channels * length values.
void check_series(const dt::SeriesValues& s, const model::temporal::TemporalEncoderOptions& o,
                  const std::string& where) {
  dt::check_series(s, where, {o.max_length, o.channels});
  const size_t n = static_cast<size_t>(s.channels * s.length);
  if (s.values.size() != n || s.valid.size() != n) {
    throw Error(where + ": a series whose value or mask count is not channels * length");
  }
}

at::Tensor valid_mask(const dt::SeriesValues& s) {
  return torch::from_blob(const_cast<uint8_t*>(s.valid.data()), {s.channels, s.length},
                          torch::kUInt8)
      .to(torch::kBool);
}

}  // namespace

TemporalRow temporal_prompt(const dt::TemporalSample& sample, const data::BpeTokenizer& tokenizer,
                            const model::temporal::TemporalEncoderOptions& encoder,
                            const std::string& sample_name) {
  const std::string placeholder = dt::kSeriesPlaceholder;
  std::vector<std::string> pieces;
  size_t from = 0;
  for (size_t at = sample.input.find(placeholder); at != std::string::npos;
       at = sample.input.find(placeholder, from)) {
    pieces.push_back(sample.input.substr(from, at - from));
    from = at + placeholder.size();
  }
  pieces.push_back(sample.input.substr(from));
  const size_t placeholders = pieces.size() - 1;
  if (placeholders != sample.series.size()) {
    throw UsageError(log::format("%s: its prompt has %zu %s placeholder(s) but %zu series",
                                 sample_name.c_str(), placeholders, dt::kSeriesPlaceholder,
                                 sample.series.size()));
  }
  TemporalRow row;
  const auto slot_id = static_cast<int64_t>(tokenizer.eot_id());
  auto append_text = [&](const std::string& text) {
    if (text.empty()) return;
    for (uint32_t id : tokenizer.encode(text)) {
      row.tokens.push_back(id);
      row.soft_slot.push_back(0);
    }
  };
  for (size_t k = 0; k < placeholders; ++k) {
    append_text(pieces[k]);
    const auto& s = sample.series[k];
    check_series(s, encoder, sample_name + ", series " + std::to_string(k));
    append_text(dt::series_stats_text(s) + " ");
    const int64_t n = model::temporal::soft_token_count(valid_mask(s), encoder);
    for (int64_t i = 0; i < n; ++i) {
      row.tokens.push_back(slot_id);
      row.soft_slot.push_back(1);
    }
  }
  append_text(pieces.back());
  row.answer_begin = static_cast<int64_t>(row.tokens.size());
  row.series = sample.series;
  return row;
}

Batch temporal_batch(const std::vector<TemporalRow>& rows, const std::vector<std::string>& names,
                     const TemporalBatchShape& shape, int64_t pad_id, const c10::Device& device) {
  const int64_t B = static_cast<int64_t>(rows.size()), T = shape.seq_len, K = shape.max_series;
  const int64_t C = shape.encoder.channels, L = shape.encoder.max_length;
  auto inputs = torch::full({B, T}, pad_id, torch::kLong);
  auto targets = torch::full({B, T}, model::kIgnoreIndex, torch::kLong);
  auto slots = torch::zeros({B, T}, torch::kBool);
  auto series = torch::zeros({B, K, C, L}, torch::kFloat);
  auto valid = torch::zeros({B, K, C, L}, torch::kBool);
  auto used = torch::zeros({B, K}, torch::kBool);
  auto in = inputs.accessor<int64_t, 2>();
  auto tg = targets.accessor<int64_t, 2>();
  auto sl = slots.accessor<bool, 2>();
  auto sv = series.accessor<float, 4>();
  auto vv = valid.accessor<bool, 4>();
  auto us = used.accessor<bool, 2>();
  int64_t valid_tokens = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& r = rows[b];
    const auto n = static_cast<int64_t>(r.tokens.size());
    if (n > T + 1) {
      throw UsageError(log::format(
          "%s needs %lld tokens (prompt, soft tokens and answer), more than data.seq_len + 1 = "
          "%lld: raise data.seq_len, or shorten its series (fewer patches: "
          "model.temporal.patch_len / stride, or model.temporal.num_tokens)",
          names[b].c_str(), (long long)n, (long long)(T + 1)));
    }
    if (static_cast<int64_t>(r.series.size()) > K) {
      throw UsageError(log::format("%s has %zu series, more than the %lld this run was set up for",
                                   names[b].c_str(), r.series.size(), (long long)K));
    }
    for (int64_t t = 0; t < std::min(n, T); ++t) {
      in[b][t] = r.tokens[t];
      sl[b][t] = r.soft_slot[t] != 0;
    }
    // Target at t is token t + 1: trained only where that token is the answer's.
    for (int64_t t = std::max<int64_t>(r.answer_begin - 1, 0); t + 1 < n; ++t) {
      tg[b][t] = r.tokens[t + 1];
      ++valid_tokens;
    }
    for (size_t k = 0; k < r.series.size(); ++k) {
      const auto& s = r.series[k];
      us[b][k] = true;
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t t = 0; t < s.length; ++t) {
          const size_t i = static_cast<size_t>(c * s.length + t);
          if (!s.valid[i]) continue;
          sv[b][k][c][t] = s.values[i];
          vv[b][k][c][t] = true;
        }
      }
    }
  }
  auto move = [&](at::Tensor t) {
    return device.is_cpu() ? t : t.pin_memory().to(device, /*non_blocking=*/true);
  };
  Batch batch;
  batch.tensors.emplace("inputs", move(inputs));
  batch.tensors.emplace("targets", move(targets));
  batch.tensors.emplace("soft_slots", move(slots));
  batch.tensors.emplace("series", move(series));
  batch.tensors.emplace("series_valid", move(valid));
  batch.tensors.emplace("series_used", move(used));
  batch.valid_tokens = valid_tokens;
  batch.masked = true;
  return batch;
}

TemporalData::TemporalData(TemporalSampleSource source, data::BpeTokenizer tokenizer,
                           TemporalBatchShape shape, double val_fraction, uint64_t seed,
                           bool shuffle, std::string origin)
    : source_(std::move(source)),
      tokenizer_(std::move(tokenizer)),
      shape_(shape),
      seed_(seed),
      shuffle_(shuffle),
      origin_(std::move(origin)) {
  // At least one validation sample for any share above zero; zero holds out none (the run is
  // then not evaluated: run_setup says so).
  const int64_t val =
      val_fraction > 0 ? std::max<int64_t>(1, std::llround(source_.size * val_fraction)) : 0;
  train_ = source_.size - val;
  if (train_ < 1) {
    throw UsageError(
        log::format("%s holds %lld sample(s): too few for a training and a "
                    "validation split (data.temporal.val_fraction = %g)",
                    origin_.c_str(), (long long)source_.size, val_fraction));
  }
}

TemporalRow temporal_row(const dt::TemporalSample& sample, const data::BpeTokenizer& tokenizer,
                         const model::temporal::TemporalEncoderOptions& encoder,
                         const std::string& sample_name) {
  TemporalRow r = temporal_prompt(sample, tokenizer, encoder, sample_name);
  for (uint32_t id : tokenizer.encode(sample.output)) {
    r.tokens.push_back(id);
    r.soft_slot.push_back(0);
  }
  r.tokens.push_back(tokenizer.eot_id());
  r.soft_slot.push_back(0);
  return r;
}

TemporalRow TemporalData::row(int64_t index) const {
  return temporal_row(source_.get(index), tokenizer_, shape_.encoder,
                      log::format("sample %lld of %s", (long long)index, origin_.c_str()));
}

Batch TemporalData::batch_of(const std::vector<int64_t>& sample_indices,
                             const c10::Device& device) const {
  std::vector<TemporalRow> rows;
  std::vector<std::string> names;
  for (int64_t i : sample_indices) {
    rows.push_back(row(i));
    names.push_back(log::format("sample %lld of %s", (long long)i, origin_.c_str()));
  }
  return temporal_batch(rows, names, shape_, tokenizer_.eot_id(), device);
}

Batch TemporalData::train_batch(int64_t epoch, const std::vector<int64_t>& positions,
                                const c10::Device& device) {
  if (epoch != order_epoch_) {
    order_.resize(train_);
    if (shuffle_) {
      order_ = data::seeded_permutation(train_, seed_, static_cast<uint64_t>(epoch));
    } else {
      for (int64_t i = 0; i < train_; ++i) order_[i] = i;
    }
    order_epoch_ = epoch;
  }
  std::vector<int64_t> ids;
  for (int64_t p : positions) ids.push_back(order_.at(p));
  return batch_of(ids, device);
}

Batch TemporalData::val_batch(const std::vector<int64_t>& indices, const c10::Device& device) {
  std::vector<int64_t> ids;
  for (int64_t i : indices) ids.push_back(train_ + i);
  return batch_of(ids, device);
}

data::temporal::TemporalSample TemporalData::val_sample(int64_t index) const {
  return source_.get(train_ + index);
}

}  // namespace lmtrain::train
