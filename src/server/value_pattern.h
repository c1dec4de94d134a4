// src/server/value_pattern.h
//
// Provides the value matching the server's Envoy doors share (docs/envoy.md,
// "Semantics"; docs/rlqs.md, "Configuration"): a configured value holding
// `*` is a pattern, each `*` matching any run of bytes (`10.*`,
// `/api/*/action`), and the length-prefixed encoding that turns a sequence
// of strings into a key no other sequence makes. Internal to src/server.
//
// Thread-safety: pure functions.

#ifndef THROTTLEKIT_SRC_SERVER_VALUE_PATTERN_H_
#define THROTTLEKIT_SRC_SERVER_VALUE_PATTERN_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl_view.h"

namespace throttlekit::server {

// `value` split on `*` when it holds one (a pattern: at least two parts),
// else empty (an exact value).
inline std::vector<std::string> split_value_pattern(std::string_view value) {
  if (value.find('*') == std::string_view::npos) return {};
  return absl::StrSplit(sv(value), '*');
}

// Whether `value` matches the pattern split on `*` into `parts` (at least
// two): it starts with the first part, ends with the last, and holds the
// middle ones in order between them; each `*` matches any run of bytes.
inline bool matches_value_pattern(const std::vector<std::string>& parts,
                                  std::string_view value) {
  const std::string& first = parts.front();
  const std::string& last = parts.back();
  if (value.size() < first.size() + last.size()) return false;
  if (value.substr(0, first.size()) != first) return false;
  if (value.substr(value.size() - last.size()) != last) return false;
  std::string_view middle =
      value.substr(first.size(), value.size() - first.size() - last.size());
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    const size_t at = middle.find(parts[i]);
    if (at == std::string_view::npos) return false;
    middle.remove_prefix(at + parts[i].size());
  }
  return true;
}

// Appends `s` length-prefixed (`5:users`), so no two sequences of strings
// make the same key, whatever bytes they hold.
inline void append_length_prefixed(std::string& key, std::string_view s) {
  absl::StrAppend(&key, s.size(), ":", sv(s));
}

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_VALUE_PATTERN_H_
