// Lists written in one config value or flag ("q,v", "0:1, 3", "sink=4,window=64"): the items
// between separators with surrounding spaces and tabs removed. Empty items are kept (each caller
// decides whether "a,,b" or a trailing comma is an error), so "" gives one empty item.
#pragma once
#include <string>
#include <vector>

namespace lmtrain::core {

std::vector<std::string> split_list(const std::string& text, char sep = ',');

// `text` without leading and trailing spaces and tabs.
std::string trim_blanks(const std::string& text);

}  // namespace lmtrain::core
