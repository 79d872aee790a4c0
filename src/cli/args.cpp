#include "cli/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

namespace lmtrain::cli {

std::string ParsedArgs::get(const std::string& name, const std::string& fallback) const {
  auto it = flags.find(name);
  return it == flags.end() || it->second.empty() ? fallback : it->second.back();
}

bool ParsedArgs::get_bool(const std::string& name, bool fallback) const {
  return has(name) ? get(name, "true") != "false" : fallback;
}

FlagSpec overwrite_flag() {
  return {"overwrite", FlagKind::kBool,
          "write into an output that already holds files: they move aside into "
          "OUT/previous-<n>/ (never deleted); the command's own input is never replaced"};
}

FlagSpec quiet_flag() {
  return {"quiet", FlagKind::kBool,
          "no progress display (on a terminal a bar redrawn in place, to a file or pipe a plain "
          "line each tenth of the way)"};
}

void apply_quiet(const ParsedArgs& args) { log::set_progress_quiet(args.get_bool("quiet")); }

std::vector<std::string> ParsedArgs::get_all(const std::string& name) const {
  auto it = flags.find(name);
  return it == flags.end() ? std::vector<std::string>{} : it->second;
}

int64_t ParsedArgs::get_int(const std::string& name, int64_t fallback, int64_t min,
                            int64_t max) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0')
    throw UsageError("--" + name + " expects an integer, got '" + v + "'");
  // strtoll saturates on overflow: a 20-digit count must not silently become INT64_MAX.
  if (errno == ERANGE || x < min || x > max) {
    throw UsageError("--" + name + "=" + v + " is out of range: must be in [" +
                     std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return x;
}

double ParsedArgs::get_float(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0')
    throw UsageError("--" + name + " expects a number, got '" + v + "'");
  // strtod accepts "nan" and "inf" (and overflows to inf): no flag means either.
  if (!std::isfinite(x))
    throw UsageError("--" + name + " expects a finite number, got '" + v + "'");
  return x;
}

ParsedArgs parse_args(const std::string& command, const std::vector<std::string>& args,
                      const std::vector<FlagSpec>& specs, bool accept_config) {
  ParsedArgs out;
  out.accepts_config = accept_config;
  // Config path -> the first flag that set it and its canonical value: a seed alias and its
  // native key (--lr and --optim.lr), or two aliases of one key (--max_seq_len and
  // --max_length), given with different values are an error naming both, not "last one wins".
  std::map<std::string, std::pair<std::string, std::string>> set_by;
  auto find_spec = [&](const std::string& name) -> const FlagSpec* {
    for (const auto& s : specs) {
      if (s.name == name) return &s;
    }
    return nullptr;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      out.help = true;
      continue;
    }
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      out.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (const FlagSpec* spec = find_spec(name)) {
      auto& slot = out.flags[name];
      if (spec->kind == FlagKind::kBool) {
        slot = {has_value ? value : "true"};
      } else if (spec->kind == FlagKind::kValue) {
        if (!has_value) {
          if (i + 1 >= args.size())
            throw UsageError("--" + name + " needs a value (" + command + ")");
          value = args[++i];
        }
        slot = {value};
      } else {  // kMulti: values until the next --flag
        if (has_value) slot.push_back(value);
        while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) slot.push_back(args[++i]);
        if (slot.empty())
          throw UsageError("--" + name + " needs at least one value (" + command + ")");
      }
      continue;
    }
    if (accept_config && name == "fp8" && !has_value) {  // nanochat's store_true --fp8
      out.overrides.emplace_back("train.precision", "fp8");
      continue;
    }
    if (accept_config) {
      std::string path;
      if (name.find('.') != std::string::npos) {
        path = name;
      } else if (const char* target = core::alias_target(name)) {
        path = target;
      }
      if (!path.empty()) {
        if (!has_value) {
          if (i + 1 >= args.size()) throw UsageError("--" + name + " needs a value");
          value = args[++i];
        }
        const core::KeySpec* spec = core::find_key(path);
        if (!spec) {
          // Let Config::set produce the message with a suggestion.
          core::Config::defaults().set(path, value, "--" + name);
        }
        const std::string canonical = core::canonicalize_value(*spec, value, "--" + name);
        const auto [it, first] = set_by.emplace(path, std::make_pair(name, canonical));
        if (!first && it->second.first != name && it->second.second != canonical) {
          throw UsageError("--" + it->second.first + "=" + it->second.second + " and --" + name +
                           "=" + canonical + " both set " + path +
                           " to different values: give one of them");
        }
        if (!first) it->second = {name, canonical};
        out.overrides.emplace_back(path, value);
        continue;
      }
    }
    throw UsageError("unknown flag --" + name + " for `lmtrain " + command + "` (see `lmtrain " +
                     command + " --help`)");
  }
  return out;
}

std::string flags_help(const std::vector<FlagSpec>& specs) {
  std::ostringstream ss;
  for (const auto& s : specs) {
    std::string left = "  --" + s.name;
    if (s.kind == FlagKind::kValue) left += " " + s.value_name;
    if (s.kind == FlagKind::kMulti) left += " " + s.value_name + "...";
    ss << left;
    if (left.size() < 28) {
      ss << std::string(28 - left.size(), ' ');
    } else {
      ss << "\n" << std::string(28, ' ');
    }
    ss << s.help << "\n";
  }
  return ss.str();
}

bool print_help_if_asked(const ParsedArgs& args, const std::vector<FlagSpec>& flags,
                         const std::string& usage) {
  if (args.help) {
    std::cout << usage << "Flags:\n" << flags_help(flags);
    if (args.accepts_config) {
      std::cout << "  --section.key=VALUE         override any config key (see --help-config)\n";
    }
    return true;
  }
  if (args.has("help-config")) {
    std::cout << core::config_reference();
    return true;
  }
  return false;
}

}  // namespace lmtrain::cli
