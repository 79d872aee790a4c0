#include "report/html_page.h"

#include "report/charts.h"
#include "report/summary_tables.h"
#include "report/svg_chart.h"
#include "report/xml_text.h"

namespace lmtrain::report {
namespace {

// Inline style: a system font stack (no font is downloaded), charts two per row on a wide
// screen. No '<' or '&' in it, so it needs no CDATA section to stay well-formed XML.
const char* kReportCss = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
       sans-serif; margin: 24px auto; max-width: 1180px; padding: 0 16px; color: #222;
       background: #fff; line-height: 1.4; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
p.meta { color: #666; margin-top: 0; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.key { font-weight: 600; white-space: nowrap; }
span.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
              margin: 0 4px 0 10px; vertical-align: -1px; }
div.charts { display: flex; flex-wrap: wrap; gap: 10px; }
svg.chart { border: 1px solid #e3e3e3; border-radius: 4px; background: #fff; }
svg.chart text { font-size: 11px; fill: #333; }
svg.chart text.title { font-size: 13px; font-weight: 600; }
svg.chart text.ytick { text-anchor: end; }
svg.chart text.xtick, svg.chart text.xlabel, svg.chart text.ylabel { text-anchor: middle; }
svg.chart text.caption { fill: #777; font-size: 10px; }
svg.chart text.note { fill: #8a5a00; font-size: 10px; }
svg.chart rect.plot { fill: #fcfcfc; stroke: #ccc; }
svg.chart g.grid line { stroke: #e8e8e8; stroke-width: 1; }
ul.notes li { color: #8a5a00; }
details pre { font-size: 12px; background: #f7f7f7; padding: 8px; overflow-x: auto; }
)";

std::string html_table(const Table& t, const std::string& id, bool first_column_is_key) {
  std::string out = "<table id=\"" + id + "\"><thead><tr>";
  for (const auto& h : t.header) out += "<th>" + xml_escape(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      out += (i == 0 && first_column_is_key ? "<td class=\"key\">" : "<td>") + xml_escape(row[i]) +
             "</td>";
    }
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

}  // namespace

std::string render_html_report(const std::vector<RunData>& runs, const std::string& generated_at) {
  std::string names;
  for (const auto& r : runs) names += (names.empty() ? "" : ", ") + r.name;
  std::string out;
  out +=
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head>"
      "<meta charset=\"utf-8\"/><meta name=\"generator\" content=\"lmtrain report\"/>";
  out += "<title>lmtrain report: " + xml_escape(names) + "</title>";
  out += "<style>" + std::string(kReportCss) + "</style></head><body>\n";
  out += "<h1>lmtrain report</h1><p class=\"meta\">generated " + xml_escape(generated_at) +
         " by lmtrain report; runs:";
  for (size_t i = 0; i < runs.size(); ++i) {
    out += "<span class=\"swatch\" style=\"background:" + run_color(i) + "\"></span>" +
           xml_escape(runs[i].name) + " (" + run_status_name(runs[i].status) + ")";
  }
  out += "</p>\n<h2 id=\"summary\">Summary</h2>\n" +
         html_table(summary_table(runs), "summary-table", true) + "\n";
  if (runs.size() > 1) {
    const Table diff = config_diff_table(runs);
    out += "<h2 id=\"config-diff\">Config differences</h2>\n";
    if (diff.rows.empty()) {
      out += "<p>The runs' configs are the same (run.dir aside).</p>\n";
    } else {
      out += "<p>Only the keys whose values differ (run.dir aside).</p>\n" +
             html_table(diff, "config-diff-table", true) + "\n";
    }
  }
  std::vector<std::string> notes;
  for (const auto& r : runs) notes.insert(notes.end(), r.notes.begin(), r.notes.end());
  if (!notes.empty()) {
    out += "<h2 id=\"notes\">Notes</h2><ul class=\"notes\">";
    for (const auto& n : notes) out += "<li>" + xml_escape(n) + "</li>";
    out += "</ul>\n";
  }
  const auto sections = build_chart_sections(runs);
  if (sections.empty()) out += "<h2>Charts</h2><p>No metrics logged yet.</p>\n";
  for (const auto& s : sections) {
    out += "<h2>" + xml_escape(s.title) + "</h2>\n<div class=\"charts\">\n";
    for (const auto& svg : s.svgs) out += svg + "\n";
    out += "</div>\n";
  }
  out += "<h2 id=\"configs\">Configs</h2>\n";
  for (const auto& r : runs) {
    out += "<details><summary>" + xml_escape(r.name) + ": config.yaml</summary><pre>";
    for (const auto& [k, v] : r.config) out += xml_escape(k + ": " + v) + "\n";
    out += "</pre></details>\n";
  }
  out += "</body></html>\n";
  return out;
}

}  // namespace lmtrain::report
