#include "core/text_list.h"

#include <gtest/gtest.h>

namespace lmtrain::core {
namespace {

using Items = std::vector<std::string>;

TEST(TextList, SplitsTrimsBlanksAndKeepsEmptyItems) {
  EXPECT_EQ(split_list("q,v"), (Items{"q", "v"}));
  EXPECT_EQ(split_list(" 0 :\t1 , 3 "), (Items{"0 :\t1", "3"}));
  EXPECT_EQ(split_list("0 :\t1", ':'), (Items{"0", "1"}));
  EXPECT_EQ(split_list("a,,b,"), (Items{"a", "", "b", ""}));
  EXPECT_EQ(split_list(""), (Items{""}));
  EXPECT_EQ(split_list("one item"), (Items{"one item"}));
  EXPECT_EQ(trim_blanks(" \t x y\t "), "x y");
  EXPECT_EQ(trim_blanks(" \t "), "");
}

}  // namespace
}  // namespace lmtrain::core
