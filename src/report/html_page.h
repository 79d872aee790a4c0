// The report as one self-contained page: no network, no scripts, no external fonts or styles:
// the CSS is inline, the charts inline SVG (report/charts.h), so the file opens from disk in
// any browser and can be mailed as it is. It is well-formed XML (XHTML served as HTML: every
// element closed, every text escaped), which tests check with an XML parser.
//
// Layout: the runs with their colours; the summary table; the config differences (several
// runs); notes (skipped lines, missing files); then the charts by section; each run's full
// config in a collapsed <details>.
#pragma once
#include <string>
#include <vector>

#include "report/run_data.h"

namespace lmtrain::report {

// `generated_at`: the time shown in the header ("2026-01-02 13:04:05").
std::string render_html_report(const std::vector<RunData>& runs, const std::string& generated_at);

}  // namespace lmtrain::report
