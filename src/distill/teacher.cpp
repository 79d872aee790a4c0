#include "distill/teacher.h"

#include <filesystem>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/sharded_reader.h"
#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "data/bpe_tokenizer.h"
#include "model/build_model.h"

namespace lmtrain::train {

namespace {

// distill.teacher's checkpoint dir (a run dir or a link resolved), or a UsageError naming it.
std::string resolve_teacher_dir(const std::string& spec) {
  if (!std::filesystem::exists(spec)) {
    throw UsageError("config key 'distill.teacher' = '" + spec +
                     "': no such file or directory (an lmtrain checkpoint, run dir or `lmtrain "
                     "import hf` output; empty = train a teacher first)");
  }
  auto dir = CheckpointStore::resolve(spec, spec);
  if (!dir) throw UsageError("distill.teacher = '" + spec + "': no checkpoint there");
  return *dir;
}

}  // namespace

std::string resolve_teacher(const std::string& teacher) {
  return std::filesystem::absolute(resolve_teacher_dir(teacher)).lexically_normal().string();
}

std::unique_ptr<TeacherCache> open_teacher_cache(const DistillOptions& distill,
                                                 const data::TokenSplit& train_shard,
                                                 const data::WindowStream& train_stream,
                                                 const std::string& tokenizer_hash,
                                                 int64_t vocab_size) {
  const std::string& path = distill.cache;
  auto cache = std::make_unique<TeacherCache>(path);
  const auto& info = cache->info();
  std::string diffs;
  auto cmp = [&](const char* what, const std::string& cached, const std::string& run) {
    if (cached != run) diffs += std::string("\n  ") + what + ": cache " + cached + ", run " + run;
  };
  cmp("tokenizer", info.tokenizer_hash, tokenizer_hash);
  cmp("vocabulary", std::to_string(info.vocab_size), std::to_string(vocab_size));
  cmp("train tokens", std::to_string(info.train_tokens), std::to_string(train_shard.size()));
  cmp("data.seq_len", std::to_string(info.seq_len), std::to_string(train_stream.seq_len()));
  cmp("windows", std::to_string(info.windows), std::to_string(train_stream.num_windows()));
  cmp("distill.temperature", log::format("%g", info.temperature),
      log::format("%g", distill.temperature));
  if (!diffs.empty()) {
    throw UsageError("distill.cache = " + path +
                     " was written for other data than this run's (rewrite it with `lmtrain "
                     "distill-cache` and the run's config):" +
                     diffs);
  }
  if (distill.top_k > 0 && distill.top_k != info.top_k) {
    throw UsageError(log::format("distill.top_k = %lld but distill.cache holds the top-%lld",
                                 (long long)distill.top_k, (long long)info.top_k));
  }
  // A teacher named beside the cache must be the cache's: otherwise which one teaches is
  // ambiguous (the cache's would, silently).
  if (const std::string& given = distill.teacher; !given.empty()) {
    std::error_code ec;
    const auto canonical = [&](const std::string& p) {
      return std::filesystem::weakly_canonical(p, ec).string();
    };
    if (canonical(resolve_teacher_dir(given)) != canonical(info.teacher)) {
      throw UsageError("distill.teacher = " + given + " but distill.cache = " + path +
                       " holds the logits of teacher " + info.teacher +
                       ": leave distill.teacher empty (the cache is the teacher), or rewrite the "
                       "cache with this teacher (`lmtrain distill-cache`)");
    }
  }
  log::info(log::format("distillation teacher: offline, the top-%lld logits of %s from %s",
                        (long long)info.top_k, info.teacher.c_str(), path.c_str()));
  return cache;
}

LoadedTeacher load_teacher(const DistillOptions& distill, int64_t seq_len, const core::Runtime& rt,
                           int64_t student_vocab, const std::string& tokenizer_hash) {
  const std::string dir = resolve_teacher_dir(distill.teacher);
  auto ckpt = CheckpointStore::load(dir, /*allow_fallback=*/false, {"model.safetensors"});
  if (is_lora_checkpoint(ckpt)) {
    throw UsageError("distill.teacher = " + dir +
                     " is a LoRA run's checkpoint (adapters on a frozen base), not a whole "
                     "model: fold the adapters in first with `lmtrain lora merge --checkpoint " +
                     dir + " --output MERGED_RUN` and give distill.teacher=MERGED_RUN");
  }
  const model::ModelOptions teacher_model = checkpoint_model_options(ckpt);
  const std::string saved_hash = ckpt.meta.value("tokenizer_hash", "");
  if (!saved_hash.empty() && saved_hash != tokenizer_hash) {
    throw UsageError("distill.teacher = " + dir + " was trained with another tokenizer (" +
                     saved_hash + ") than data.dir (" + tokenizer_hash +
                     "): teacher and student must share one vocabulary");
  }
  const model::GptConfig& teacher_shape = teacher_model.shape;
  if (teacher_shape.block_size < seq_len) {
    throw UsageError(log::format(
        "distill.teacher = %s has model.block_size %lld, shorter than the student's "
        "data.seq_len %lld: the teacher cannot see a whole training window; lower data.seq_len "
        "to at most %lld or use a teacher with a longer context",
        dir.c_str(), (long long)teacher_shape.block_size, (long long)seq_len,
        (long long)teacher_shape.block_size));
  }
  if (teacher_shape.vocab_size != student_vocab) {
    throw UsageError(log::format(
        "distill.teacher = %s has a vocabulary of %lld tokens, the student %lld: teacher and "
        "student must share one vocabulary (model.vocab_size)",
        dir.c_str(), (long long)teacher_shape.vocab_size, (long long)student_vocab));
  }
  core::Runtime trt = rt;
  const TeacherDtype dtype = distill.teacher_dtype;
  if (dtype == TeacherDtype::kBf16) {
    trt.param_dtype = at::kBFloat16;
    trt.compute_dtype = at::kBFloat16;
  } else if (dtype == TeacherDtype::kAuto && rt.cuda() && rt.autocast()) {
    // The student's compute dtype (bf16 or fp16): its autocast would cast the teacher's
    // weights to it at every matmul anyway, so they are stored that way once.
    trt.param_dtype = rt.compute_dtype;
    trt.compute_dtype = rt.compute_dtype;
  } else {
    trt.param_dtype = at::kFloat;
  }
  LoadedTeacher teacher;
  teacher.model = model::build_model(teacher_model, trt, {/*init=*/false, {}});
  load_model_tensors(*teacher.model, ckpt.files.at("model.safetensors"),
                     ckpt.dir + "/model.safetensors");
  teacher.dir = ckpt.dir;
  // CheckpointStore::load verified the file against this hash.
  teacher.sha256 = model_weights_sha256(ckpt.meta);
  log::info(log::format("distillation teacher: %s, %s, weights in %s", ckpt.dir.c_str(),
                        teacher_shape.describe().c_str(), c10::toString(trt.param_dtype)));
  return teacher;
}

}  // namespace lmtrain::train
