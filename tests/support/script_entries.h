// tests/support/script_entries.h
//
// Provides `read_script_entries`: the lines of a shared request script
// (tests/server/envoy_script/, tests/server/rlqs_script/) that the C++
// tests and the Python clients (tests/server/script_support.py,
// `read_entries`, which reads them alike) both run. Each entry is a
// `tag: body` line, or a tag alone without a colon; a line starting with
// whitespace continues the one before (joined with a space); blank lines
// and `#` comments are skipped.

#ifndef THROTTLEKIT_TESTS_SUPPORT_SCRIPT_ENTRIES_H_
#define THROTTLEKIT_TESTS_SUPPORT_SCRIPT_ENTRIES_H_

#include <cctype>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace throttlekit::testing {

struct ScriptEntry {
  int line = 0;  // of its first line, from 1
  std::string tag;
  std::string body;  // after the colon, trimmed; empty for a tag alone
};

// The entries of the script at `path`; NotFound if it cannot be read,
// InvalidArgument for a continuation before any entry.
inline absl::StatusOr<std::vector<ScriptEntry>> read_script_entries(
    const std::string& path) {
  std::ifstream in(path);
  if (!in.good())
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<ScriptEntry> entries;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string trimmed(absl::StripAsciiWhitespace(line));
    if (trimmed.empty() || trimmed[0] == '#') continue;
    if (std::isspace(static_cast<unsigned char>(line[0])) != 0) {
      if (entries.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", number, ": a continuation with nothing to continue"));
      }
      absl::StrAppend(&entries.back().body, " ", trimmed);
      continue;
    }
    const size_t colon = trimmed.find(':');
    ScriptEntry e{.line = number};
    e.tag = std::string(absl::StripAsciiWhitespace(trimmed.substr(0, colon)));
    if (colon != std::string::npos) {
      e.body =
          std::string(absl::StripAsciiWhitespace(trimmed.substr(colon + 1)));
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_SCRIPT_ENTRIES_H_
