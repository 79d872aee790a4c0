// `lmtrain report RUN_DIR [RUN_DIR ...] [--output FILE] [--format html|md]`.
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/output_dir.h"
#include "report/run_report.h"

namespace lmtrain::cli {

int cmd_report(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"output", FlagKind::kValue,
       "the file to write (default: RUN_DIR/report.html for one run, ./report.html for several; "
       "--format md prints to stdout)",
       "FILE"},
      {"format", FlagKind::kValue, "html (default): the page with charts; md: a Markdown card",
       "html|md"},
      {"overwrite", FlagKind::kBool,
       "replace an existing --output file (RUN_DIR/report.html, the run's own page, is always "
       "replaced)"},
  };
  const auto args = parse_args("report", argv, flags, /*accept_config=*/false);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain report RUN_DIR [RUN_DIR ...] [--output FILE.html] [--format html|md]\n\n"
          "Writes one self-contained HTML page about one or more training runs: no network,\n"
          "no scripts, no external fonts; it opens from disk in any browser.\n"
          "  - charts of every metric in metrics.jsonl: train loss (raw and smoothed) and\n"
          "    validation loss against steps and tokens, learning rate, gradient norm, tokens/s,\n"
          "    peak memory, communication wait, fp16 loss scale, distillation terms, eval\n"
          "    perplexity and accuracies, MoE per-layer statistics as heat maps; several runs\n"
          "    overlay in one chart, one colour each. Long runs are downsampled for drawing,\n"
          "    keeping every bucket's first, lowest, highest and last point;\n"
          "  - a summary per run: model and parameters, world size, precision, device, tokens\n"
          "    seen, training time, best validation loss and its step, final perplexity, mean\n"
          "    tokens/s, checkpoints, and whether it finished, was stopped, crashed or is\n"
          "    still running;\n"
          "  - with several runs, the config keys whose values differ.\n"
          "--format md writes the same tables as a Markdown card, without charts.\n\n"
          "Training keeps RUN_DIR/report.html up to date by itself (log.report=true, the\n"
          "default): rank 0 rewrites it after every evaluation and when the run ends.\n\n"
          "A truncated last line of metrics.jsonl (a killed run) is skipped with a note; a\n"
          "damaged line elsewhere is an error naming FILE:LINE.\n\n")) {
    return 0;
  }
  if (args.positional.empty()) {
    throw UsageError(
        "usage: lmtrain report RUN_DIR [RUN_DIR ...] [--output FILE] "
        "[--format html|md]: give at least one run dir");
  }
  const std::string format_name = args.get("format", "html");
  if (format_name != "html" && format_name != "md") {
    throw UsageError("--format='" + format_name + "': expected html or md");
  }
  const auto format =
      format_name == "md" ? report::ReportFormat::kMarkdown : report::ReportFormat::kHtml;
  // Read and render first: a bad run dir is refused before any file is touched.
  const std::string text = report::render_report(args.positional, format);

  std::string output = args.get("output");
  bool own_page = false;
  if (output.empty()) {
    if (format == report::ReportFormat::kMarkdown) {
      std::cout << text;
      return 0;
    }
    own_page = args.positional.size() == 1;
    output = own_page ? args.positional[0] + "/" + report::kRunReportFile
                      : std::string(report::kRunReportFile);
  }
  if (!own_page) {
    core::OutputDirOptions options{"report", {}, args.get_bool("overwrite")};
    // The runs' own files are inputs: a report never replaces what it reads.
    for (const auto& dir : args.positional) {
      for (const char* f : {"metrics.jsonl", "config.yaml", "run_state.json", "train.log"}) {
        options.inputs.push_back(dir + "/" + f);
      }
      options.inputs.push_back(dir + "/checkpoints");
    }
    core::check_output_file(output, options);
  }
  core::write_file_atomic(output, text);
  std::cout << "report: " << output << "\n";
  return 0;
}

}  // namespace lmtrain::cli
