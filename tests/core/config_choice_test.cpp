// Typed string options (core/config_choice.h): every option enum reads and names each of its
// key's schema choices, in order, so the enums and config_schema.cpp cannot drift apart; a
// value outside the choices is a clear error naming where it came from and what is allowed.
#include "core/config_choice.h"

#include <gtest/gtest.h>

#include "core/config.h"
#include "core/error.h"
#include "core/runtime.h"
#include "distill/teacher.h"
#include "distributed/process_group.h"
#include "model/decoder_options.h"
#include "model/moe_config.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer_factory.h"
#include "train/data_options.h"
#include "train/run_options.h"

namespace lmtrain::core {
namespace {

// Every choice of E's key parses to the enumerator at its index, that enumerator's name is the
// choice, and a config holding it reads back as it.
template <class E>
void expect_enum_matches_schema() {
  const ChoiceKey key = choice_key(E{});
  const KeySpec* spec = find_key(key.path);
  ASSERT_NE(spec, nullptr) << key.path;
  ASSERT_EQ(spec->choices.size(), key.count) << key.path;
  for (size_t i = 0; i < key.count; ++i) {
    const auto e = static_cast<E>(i);
    EXPECT_EQ(to_string(e), spec->choices[i]) << key.path;
    EXPECT_EQ(parse_choice<E>(spec->choices[i], "test"), e) << key.path;
    auto cfg = Config::defaults();
    cfg.set(key.path, spec->choices[i], "test");
    EXPECT_EQ(get_choice<E>(cfg), e) << key.path;
  }
}

TEST(ConfigChoice, EveryOptionEnumMatchesItsSchemaChoices) {
  expect_enum_matches_schema<model::Arch>();
  expect_enum_matches_schema<model::Norm>();
  expect_enum_matches_schema<model::PosEncoding>();
  expect_enum_matches_schema<model::MlpKind>();
  expect_enum_matches_schema<model::MoeGate>();
  expect_enum_matches_schema<DeviceChoice>();
  expect_enum_matches_schema<Precision>();
  expect_enum_matches_schema<ReducePrecision>();
  expect_enum_matches_schema<optim::OptimizerName>();
  expect_enum_matches_schema<optim::LrScheduleKind>();
  expect_enum_matches_schema<dist::BackendChoice>();
  expect_enum_matches_schema<train::TeacherDtype>();
  expect_enum_matches_schema<train::DataSource>();
  expect_enum_matches_schema<train::DataFormat>();
  expect_enum_matches_schema<train::CudaGraphsChoice>();
}

TEST(ConfigChoice, UnknownTextNamesItsOriginAndTheChoices) {
  try {
    parse_choice<model::Norm>("batchnorm", "--norm");
    FAIL() << "accepted batchnorm";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--norm = 'batchnorm': expected layernorm or rmsnorm");
  }
  EXPECT_EQ(choice_list(choice_key(optim::LrScheduleKind{})), "constant, cosine, linear or wsd");
}

// An enum whose count disagrees with its key's schema list is an internal error on first use,
// not a silent misreading.
enum class Drifted { kA, kB, kC };
constexpr ChoiceKey choice_key(Drifted) { return {"model.norm", 3}; }

TEST(ConfigChoice, AnEnumThatDriftedFromTheSchemaIsRefused) {
  try {
    get_choice<Drifted>(Config::defaults());
    FAIL() << "read model.norm as a 3-value enum";
  } catch (const Error& e) {
    EXPECT_EQ(dynamic_cast<const UsageError*>(&e), nullptr) << "a bug of ours, not of the user";
    EXPECT_NE(std::string(e.what()).find("'model.norm' does not list the choices"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lmtrain::core
