// Command-line parsing shared by every subcommand.
// Accepts `--name=value`, `--name value` (for flags that take a value), `--flag` (booleans),
// multi-valued flags (`--input a b c`), and config overrides `--section.key=value` plus the
// flat aliases from the config schema.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace lmtrain::cli {

// Upper bound of every --threads flag (the same as the config key train.threads).
inline constexpr int64_t kMaxThreadsFlag = 1024;

enum class FlagKind { kBool, kValue, kMulti };

struct FlagSpec {
  std::string name;  // without the leading dashes
  FlagKind kind;
  std::string help;
  std::string value_name = "VALUE";
};

struct ParsedArgs {
  std::map<std::string, std::vector<std::string>> flags;       // name -> values (bool: {"true"})
  std::vector<std::pair<std::string, std::string>> overrides;  // config path -> text, in order
  std::vector<std::string> positional;
  bool help = false;
  bool accepts_config = false;  // the command takes --section.key=VALUE overrides

  bool has(const std::string& name) const { return flags.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> get_all(const std::string& name) const;
  // A kBool flag: absent -> fallback; --name -> true; --name=false -> false.
  bool get_bool(const std::string& name, bool fallback = false) const;
  // Parsed numbers; errors (UsageError: not a number, overflow, NaN/inf, outside [min, max])
  // name the flag.
  int64_t get_int(const std::string& name, int64_t fallback,
                  int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max()) const;
  double get_float(const std::string& name, double fallback) const;
};

// `command` is used in error messages ("unknown flag --x for `lmtrain train`").
// With accept_config, `--a.b=v` and flat aliases become overrides; otherwise they are errors.
ParsedArgs parse_args(const std::string& command, const std::vector<std::string>& args,
                      const std::vector<FlagSpec>& specs, bool accept_config);

// --overwrite of the commands that write a run or an output directory (import hf, export hf,
// export peft, lora merge): what the output holds moves aside into OUT/previous-<n>/.
FlagSpec overwrite_flag();

// --quiet of the long commands (prepare, distill-cache, import, export, eval, generate): no
// progress display (core/progress.h); apply_quiet sets it from the parsed flags.
FlagSpec quiet_flag();
void apply_quiet(const ParsedArgs& args);

// "Usage: ..." text listing the flags.
std::string flags_help(const std::vector<FlagSpec>& specs);

// The head every command starts with. --help: prints `usage` (the command's own text, ending in a
// blank line), "Flags:", its flags, and for commands that take config overrides the
// --section.key=VALUE line. --help-config (commands with config_flags()): prints every config
// key. Returns whether it printed; the command then exits 0.
bool print_help_if_asked(const ParsedArgs& args, const std::vector<FlagSpec>& flags,
                         const std::string& usage);

}  // namespace lmtrain::cli
