// `lmtrain plan`'s estimate of the activation memory one training micro-batch needs at the
// peak (the start of backward): what autograd keeps from forward, counted tensor by tensor for
// this trainer's blocks, plus the LM head's logits.
//
// Per token of a block (elements of the compute dtype; C = n_embd, Q = n_head x head_dim,
// K = n_kv_head x head_dim, H = the MLP's hidden width):
//   norm 1 input C, the qkv projection's input C, q k v (Q + 2K) as the attention kernel keeps
//   them, QK-norm inputs (Q + K) when on, the attention output Q (the out-projection's input),
//   norm 2 input C and the MLP's input C, then the MLP's hidden tensors: 2H for GELU / relu²
//   (pre- and post-activation), 3H for SwiGLU (gate, up, product). GPT-2: 16 C (Korthikanti et
//   al.'s 34 sbh bytes in 16-bit, less their dropout masks, which a run without dropout lacks).
//   An MoE block keeps, per token, top_k routed rows of (2C + the expert's hidden tensors) and
//   the shared experts' hidden tensors instead of the dense MLP's, plus the router's scores.
//   Attention probabilities: the CPU's fused attention (and libtorch's math kernel) keep the
//   softmax probabilities, n_head x T fp32 per token; FlashAttention on the GPU keeps none.
// Per token of the model: the final norm's and the head's inputs (2C), and the logits with the
// cross-entropy's saved exponentials (2 x V fp32; the CPU's fused loss keeps exactly these).
// Tensor parallelism with sequence parallelism divides all of it by T (Korthikanti et al.).
// Activation checkpointing keeps a recomputed block's input only (C per token) plus one
// block's full set while it is recomputed.
// Not counted: the gradients' transient copies during backward beyond the logits', allocator
// caching and fragmentation, the CUDA context and libraries, and the memory a process needs
// whatever the batch (libtorch itself): the figure is what grows with the micro-batch.
// Checked against the measured growth of peak RSS per micro-batch row on the CPU
// (tests/e2e/plan_test.cpp, within 10%): gpt2-tiny 7.1 MiB planned, 7.4-7.5 measured (-4%);
// gpt2-small-cpu 61.8 MiB planned, 60.6 measured (+2%).
#pragma once
#include <cstdint>

#include "model/build_model.h"

namespace lmtrain::train {

struct ActivationShape {
  int64_t seq_len = 0;
  int64_t compute_bytes = 4;  // 4 fp32, 2 bf16 / fp16
  // The attention kernel keeps its probabilities (n_head x T per token, fp32): the CPU.
  bool attention_probs = false;
};

// Bytes for one sequence (micro-batch row) under tensor parallelism of degree tp.
int64_t activation_bytes_per_sample(const model::ModelOptions& model, const ActivationShape& a,
                                    int tp);

}  // namespace lmtrain::train
