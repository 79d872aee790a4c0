// Bytes this process sent through collectives, by kind, counted where every collective starts
// (distributed/c10d_group.cpp). A count is what a rank sends under the ring algorithms Gloo and
// NCCL use, the ZeRO paper's accounting: for W ranks and S bytes,
//   all-reduce of S            2 (W-1)/W S
//   all-gather of S per rank   (W-1) S
//   reduce-scatter of S in all (W-1)/W S   (Gloo's, an all-to-all underneath, counted once here)
//   broadcast of S             (W-1)/W S   (the mean over ranks)
//   all-to-all of S            S less the part this rank keeps
// One world of one sends nothing. The counters are process-wide (sub-groups included) and only
// grow; a reader takes differences of snapshots, e.g. per logged interval.
#pragma once
#include <cstdint>
#include <string>

namespace lmtrain::dist {

struct CommBytes {
  int64_t all_reduce = 0, all_gather = 0, reduce_scatter = 0, broadcast = 0, all_to_all = 0;

  int64_t total() const {
    return all_reduce + all_gather + reduce_scatter + broadcast + all_to_all;
  }
  CommBytes operator-(const CommBytes& o) const;
  CommBytes divided_by(int64_t n) const;  // per step, for n >= 1 steps (rounded down)
  // "12.6 MB (all-reduce 9.0, all-gather 3.6)": the kinds that sent anything, in MB (1e6).
  std::string describe() const;
};

CommBytes comm_bytes_so_far();

// Called by the group implementations as each collective starts.
void count_all_reduce(int64_t bytes, int world);
void count_all_gather(int64_t input_bytes, int world);
void count_reduce_scatter(int64_t input_bytes, int world);
void count_broadcast(int64_t bytes, int world);
void count_all_to_all(int64_t sent_bytes);

}  // namespace lmtrain::dist
