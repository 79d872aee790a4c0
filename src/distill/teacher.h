// The teacher of a distillation run (distill.*): where it comes from and how it is loaded.
//   distill.teacher = PATH   an lmtrain checkpoint (dir, run dir, latest/best link) or the
//                            output of `lmtrain import hf`
//   distill.teacher = ""     a teacher is trained first, in this command, into RUN_DIR/teacher:
//                            the student's config at width distill.teacher_hidden_size (default
//                            twice the student's), for distill.teacher_steps steps
//                            (cli/teacher_run.h). Rerunning the command resumes or reuses it (it
//                            is an ordinary run dir).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "core/runtime.h"
#include "data/token_split.h"
#include "data/window_stream.h"
#include "distill/distill_options.h"
#include "distill/teacher_cache.h"
#include "model/gpt.h"

namespace lmtrain::train {

// distill.teacher = `teacher` resolved to the teacher's checkpoint dir (absolute), so the
// student's saved config records which teacher it learned from; a UsageError when there is none.
std::string resolve_teacher(const std::string& teacher);

// Opens distill.cache and checks that it was made for this run's data: the same train shard
// (token count), windows of data.seq_len, tokenizer and vocabulary (errors name both sides). The
// cache's teacher (info().teacher) is what the run records as distill.teacher (for generate
// --use_teacher).
std::unique_ptr<TeacherCache> open_teacher_cache(const DistillOptions& distill,
                                                 const data::TokenSplit& train_shard,
                                                 const data::WindowStream& train_stream,
                                                 const std::string& tokenizer_hash,
                                                 int64_t vocab_size);

// A teacher loaded from its checkpoint: the model (weights in distill.teacher_dtype, on rt's
// device; DistillObjective puts it in eval mode and freezes it), the checkpoint dir it came from
// and the sha256 of its model.safetensors.
struct LoadedTeacher {
  model::Gpt model{nullptr};
  std::string dir;
  std::string sha256;
};

// Loads distill.teacher (a checkpoint, run dir or link). Refuses a teacher whose vocabulary or
// tokenizer differs from the student's (tokenizer_hash: data.dir's; a teacher that records
// none, e.g. an HF import, is not checked), or whose context is shorter than `seq_len`
// (data.seq_len).
LoadedTeacher load_teacher(const DistillOptions& distill, int64_t seq_len, const core::Runtime& rt,
                           int64_t student_vocab, const std::string& tokenizer_hash);

}  // namespace lmtrain::train
