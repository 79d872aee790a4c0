#include "distributed/comm_bytes.h"

#include <atomic>

#include "core/log.h"

namespace lmtrain::dist {
namespace {

// Relaxed: counters, read between steps; no ordering with other data is implied.
std::atomic<int64_t> g_all_reduce{0}, g_all_gather{0}, g_reduce_scatter{0}, g_broadcast{0},
    g_all_to_all{0};

// x * (world - 1) / world, rounded down; 0 for a world of one.
int64_t ring_share(int64_t bytes, int world) { return world > 1 ? bytes * (world - 1) / world : 0; }

}  // namespace

CommBytes CommBytes::operator-(const CommBytes& o) const {
  return {all_reduce - o.all_reduce, all_gather - o.all_gather, reduce_scatter - o.reduce_scatter,
          broadcast - o.broadcast, all_to_all - o.all_to_all};
}

CommBytes CommBytes::divided_by(int64_t n) const {
  n = n < 1 ? 1 : n;
  return {all_reduce / n, all_gather / n, reduce_scatter / n, broadcast / n, all_to_all / n};
}

std::string CommBytes::describe() const {
  std::string parts;
  auto add = [&](const char* name, int64_t b) {
    if (b == 0) return;
    parts += log::format("%s%s %.1f", parts.empty() ? "" : ", ", name, b / 1e6);
  };
  add("all-reduce", all_reduce);
  add("all-gather", all_gather);
  add("reduce-scatter", reduce_scatter);
  add("broadcast", broadcast);
  add("all-to-all", all_to_all);
  return log::format("%.1f MB", total() / 1e6) + (parts.empty() ? "" : " (" + parts + ")");
}

CommBytes comm_bytes_so_far() {
  return {
      g_all_reduce.load(std::memory_order_relaxed), g_all_gather.load(std::memory_order_relaxed),
      g_reduce_scatter.load(std::memory_order_relaxed), g_broadcast.load(std::memory_order_relaxed),
      g_all_to_all.load(std::memory_order_relaxed)};
}

void count_all_reduce(int64_t bytes, int world) {
  g_all_reduce.fetch_add(2 * ring_share(bytes, world), std::memory_order_relaxed);
}
void count_all_gather(int64_t input_bytes, int world) {
  g_all_gather.fetch_add(world > 1 ? input_bytes * (world - 1) : 0, std::memory_order_relaxed);
}
void count_reduce_scatter(int64_t input_bytes, int world) {
  g_reduce_scatter.fetch_add(ring_share(input_bytes, world), std::memory_order_relaxed);
}
void count_broadcast(int64_t bytes, int world) {
  g_broadcast.fetch_add(ring_share(bytes, world), std::memory_order_relaxed);
}
void count_all_to_all(int64_t sent_bytes) {
  g_all_to_all.fetch_add(sent_bytes, std::memory_order_relaxed);
}

}  // namespace lmtrain::dist
