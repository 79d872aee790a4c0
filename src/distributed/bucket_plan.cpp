#include "distributed/bucket_plan.h"

#include <algorithm>

#include "core/error.h"

namespace lmtrain::dist {

std::vector<GradBucket> plan_buckets(const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                     int64_t total, int64_t element_size, int64_t bucket_bytes,
                                     int64_t tail_bytes) {
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].first + ranges[i - 1].second) {
      throw Error("plan_buckets: parameter ranges overlap or are unordered");
    }
  }
  // From the back of the buffer (the gradients backward completes last): the last bucket holds
  // at least tail_bytes, each one before it at least twice the one after, up to bucket_bytes.
  // The transfer left after backward is then about the last bucket's, not a full bucket's.
  std::vector<GradBucket> buckets;
  int64_t target = std::max<int64_t>(1, std::min(tail_bytes, bucket_bytes));
  int64_t end = total;  // the current bucket's end (elements); padding goes with the parameter
  GradBucket cur;
  for (size_t i = ranges.size(); i-- > 0;) {
    cur.params.insert(cur.params.begin(), i);
    cur.begin = ranges[i].first;
    if ((end - cur.begin) * element_size >= target) {
      cur.end = end;
      end = cur.begin;
      buckets.push_back(std::move(cur));
      cur = GradBucket{};
      target = std::min(bucket_bytes, 2 * target);
    }
  }
  if (!cur.params.empty()) {
    cur.end = end;
    buckets.push_back(std::move(cur));
  }
  std::reverse(buckets.begin(), buckets.end());
  if (!buckets.empty()) buckets.front().begin = 0;  // leading padding, if any, goes along
  return buckets;
}

void isolate_param(std::vector<GradBucket>& buckets,
                   const std::vector<std::pair<int64_t, int64_t>>& ranges, size_t param) {
  for (size_t b = 0; b < buckets.size(); ++b) {
    const GradBucket whole = buckets[b];
    const auto at = std::find(whole.params.begin(), whole.params.end(), param);
    if (at == whole.params.end()) continue;
    GradBucket before, alone, after;
    before.params.assign(whole.params.begin(), at);
    after.params.assign(at + 1, whole.params.end());
    alone.params = {param};
    alone.begin = before.params.empty() ? whole.begin : ranges[param].first;
    alone.end = after.params.empty() ? whole.end : ranges[after.params.front()].first;
    before.begin = whole.begin;
    before.end = alone.begin;
    after.begin = alone.end;
    after.end = whole.end;
    std::vector<GradBucket> parts;
    if (!before.params.empty()) parts.push_back(before);
    parts.push_back(alone);
    if (!after.params.empty()) parts.push_back(after);
    buckets.erase(buckets.begin() + static_cast<std::ptrdiff_t>(b));
    buckets.insert(buckets.begin() + static_cast<std::ptrdiff_t>(b), parts.begin(), parts.end());
    return;
  }
  throw Error("isolate_param: parameter " + std::to_string(param) + " is in no bucket");
}

}  // namespace lmtrain::dist
