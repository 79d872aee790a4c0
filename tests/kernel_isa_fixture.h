// Runs a test twice: with the kernels this CPU selects (AVX2+FMA here) and with the baseline-ISA
// variants, which no CI machine would otherwise execute.
#pragma once
#include <gtest/gtest.h>

#include "kernels/cpu_kernels.h"

namespace lmtrain::testing {

class KernelIsaTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { kernels::use_baseline_isa(GetParam()); }
  void TearDown() override { kernels::use_baseline_isa(false); }
};

inline std::string isa_name(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "BaselineIsa" : "NativeIsa";
}

}  // namespace lmtrain::testing

// Declares FIXTURE as a KernelIsaTest and instantiates it for both variants.
#define LMTRAIN_KERNEL_ISA_SUITE(FIXTURE)                                \
  class FIXTURE : public ::lmtrain::testing::KernelIsaTest {};           \
  INSTANTIATE_TEST_SUITE_P(Isa, FIXTURE, ::testing::Values(false, true), \
                           ::lmtrain::testing::isa_name)
