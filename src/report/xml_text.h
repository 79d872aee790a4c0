// Text for the report's XHTML and SVG: escaping and the number formats of tables and axes.
// The page is well-formed XML (tests parse it with an XML parser), so every piece of text that
// comes from a run (names, config values, error notes) goes through xml_escape.
#pragma once
#include <cstdint>
#include <string>

namespace lmtrain::report {

// & < > " ' as entities.
std::string xml_escape(const std::string& text);

// A coordinate with one decimal ("123.4"): finer than a pixel, short in the file.
std::string coord(double v);

// Numbers for axes and tables: "%.4g" style, no exponent for 1e-3..1e6 ("0.0006", "6e-05").
std::string format_number(double v);

// 1234567 -> "1.23M", 2048 -> "2.05k", 950 -> "950" (tokens, parameters).
std::string format_count(double v);

// 1234567 -> "1,234,567".
std::string format_thousands(int64_t v);

}  // namespace lmtrain::report
