#include "data/distributed_sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <numeric>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  if (dataset_size < 0) {
    throw UsageError(
        log::format("DistributedSampler: dataset size %lld is negative", (long long)dataset_size));
  }
  if (num_replicas < 1) {
    throw UsageError(log::format("DistributedSampler: num_replicas %lld must be at least 1",
                                 (long long)num_replicas));
  }
  if (rank < 0 || rank >= num_replicas) {
    throw UsageError(log::format("DistributedSampler: invalid rank %lld, must be in [0, %lld]",
                                 (long long)rank, (long long)(num_replicas - 1)));
  }
  if (drop_last && dataset_size % num_replicas != 0) {
    // PyTorch's ceil((size - W) / W). In floating point that is 0 when size < W (ceil of a
    // value in (-1, 0)), and otherwise ceil(size / W) - 1 == floor(size / W) since size is not
    // a multiple of W; both cases are the integer quotient.
    num_samples_ = dataset_size / num_replicas;
  } else {
    num_samples_ = (dataset_size + num_replicas - 1) / num_replicas;
  }
  total_size_ = num_samples_ * num_replicas;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order(dataset_size_);
  if (shuffle_ && dataset_size_ > 0) {
    // Same kernel and same mt19937 seeding as Python's torch.Generator().manual_seed(seed +
    // epoch) followed by torch.randperm(n, generator=g), so the orders match PyTorch bit for
    // bit. The unsigned sum wraps mod 2^64 exactly as manual_seed wraps negative seeds.
    const uint64_t epoch_seed = seed_ + static_cast<uint64_t>(epoch_);
    at::Tensor perm =
        at::randperm(dataset_size_, at::make_generator<at::CPUGeneratorImpl>(epoch_seed), at::kLong)
            .contiguous();
    const int64_t* p = perm.data_ptr<int64_t>();
    std::copy(p, p + dataset_size_, order.begin());
  } else {
    std::iota(order.begin(), order.end(), 0);
  }

  // The global list is order padded (or truncated) to total_size; position i >= size holds
  // order[(i - size) % size]. That is both of PyTorch's padding branches at once:
  // `indices += indices[:padding]` and, when padding > size,
  // `indices += (indices * ceil(padding / size))[:padding]`. Truncation (drop_last) needs no
  // code because positions >= total_size are never taken. Only this rank's stride is built.
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (int64_t i = rank_; i < total_size_; i += num_replicas_) {
    mine.push_back(i < dataset_size_ ? order[i] : order[(i - dataset_size_) % dataset_size_]);
  }
  return mine;
}

}  // namespace lmtrain::data
