// Error types. cli/ maps them to exit codes: UsageError -> 2, anything else -> 1.
#pragma once
#include <stdexcept>
#include <string>

namespace lmtrain {

// A failure the user can act on; the message says what and where.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Bad flag, bad config key/value/type, missing input file named on the command line.
// Exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& msg) : Error(msg) {}
};

}  // namespace lmtrain
