// The report as a Markdown card (`lmtrain report --format md`): the same summary and config-diff
// tables as the HTML page, the notes, and no charts. For a pull request, an issue or a notebook.
#pragma once
#include <string>
#include <vector>

#include "report/run_data.h"

namespace lmtrain::report {

std::string render_markdown_card(const std::vector<RunData>& runs, const std::string& generated_at);

}  // namespace lmtrain::report
