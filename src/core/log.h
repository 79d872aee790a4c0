// The process-wide logger (the one piece of global mutable state we allow).
// Lines go to stderr (progress, warnings) and, once a run dir is known, to a log file.
#pragma once
#include <string>

namespace lmtrain::log {

enum class Level { kInfo, kWarn, kError };

// Mirror every line into `path` (appending). Empty path: stop mirroring. The first file opened
// also gets the lines logged before it (config notices, the distributed setup).
void set_file(const std::string& path);
// In a distributed job every line printed to the console starts with "[rank N] ".
void set_rank_prefix(int rank, bool enabled);
// Quiet mode suppresses info lines on the console (they still go to the file).
void set_quiet(bool quiet);

// The progress display (core/progress.h) draws through the logger, which owns stderr. On a
// terminal it keeps one status line that set_status redraws in place ("\r", padded with blanks,
// no escape codes); a log line written meanwhile erases it, prints, and draws it again below.
// set_progress_quiet(true) (a command's --quiet) turns progress off. Progress lines for files
// and pipes are ordinary info lines.
void set_progress_quiet(bool quiet);
bool progress_quiet();
void set_status(const std::string& line);
void clear_status();

void write(Level level, const std::string& line);
inline void info(const std::string& line) { write(Level::kInfo, line); }
inline void warn(const std::string& line) { write(Level::kWarn, line); }
inline void error(const std::string& line) { write(Level::kError, line); }

// printf-style formatting into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace lmtrain::log
