// One-line text of an exception thrown by c10d (whose c10::Error carries a C++ backtrace we
// don't want in a user-facing message).
#pragma once
#include <c10/util/Exception.h>

#include <string>

namespace lmtrain::dist {

inline std::string brief_error(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string s = c10_error ? c10_error->what_without_backtrace() : e.what();
  const auto nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  return s;
}

}  // namespace lmtrain::dist
