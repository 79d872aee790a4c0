#include "report/markdown_card.h"

#include "report/summary_tables.h"

namespace lmtrain::report {
namespace {

// A table cell: '|' would end the cell, a newline the row.
std::string md_cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string md_table(const Table& t) {
  std::string out = "|";
  for (const auto& h : t.header) out += " " + md_cell(h) + " |";
  out += "\n|";
  for (size_t i = 0; i < t.header.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (const auto& c : row) out += " " + md_cell(c) + " |";
    out += "\n";
  }
  return out;
}

}  // namespace

std::string render_markdown_card(const std::vector<RunData>& runs,
                                 const std::string& generated_at) {
  std::string names;
  for (const auto& r : runs) names += (names.empty() ? "" : ", ") + r.name;
  std::string out = "# lmtrain report: " + names + "\n\nGenerated " + generated_at +
                    " by `lmtrain report`.\n\n## Summary\n\n" + md_table(summary_table(runs));
  if (runs.size() > 1) {
    const Table diff = config_diff_table(runs);
    out += "\n## Config differences\n\n";
    out += diff.rows.empty()
               ? "The runs' configs are the same (run.dir aside).\n"
               : "Only the keys whose values differ (run.dir aside).\n\n" + md_table(diff);
  }
  std::string notes;
  for (const auto& r : runs) {
    for (const auto& n : r.notes) notes += "- " + n + "\n";
  }
  if (!notes.empty()) out += "\n## Notes\n\n" + notes;
  return out;
}

}  // namespace lmtrain::report
