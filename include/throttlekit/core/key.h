// throttlekit/core/key.h
//
// Provides key validation and the one definition of key joining
// (SEMANTICS.md, "Keys"): a non-empty prefix gives `prefix + ":" + key`,
// an empty prefix gives `key`.

#ifndef THROTTLEKIT_CORE_KEY_H_
#define THROTTLEKIT_CORE_KEY_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace throttlekit {

// Keys are arbitrary bytes (spaces, quotes, newlines, non-UTF-8 are all
// fine) from 1 byte up to this many bytes.
inline constexpr size_t kMaxKeyBytes = size_t{1} << 20;  // 1 MiB

// OK, or kInvalidArgument naming the problem (empty, or over kMaxKeyBytes).
inline absl::Status validate_key(std::string_view key) {
  if (key.empty()) {
    return absl::InvalidArgumentError("key must not be empty");
  }
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key is ", key.size(), " bytes; the maximum is ", kMaxKeyBytes));
  }
  return absl::OkStatus();
}

// `prefix + ":" + key` when prefix is non-empty, else `key`.
inline std::string join_key(std::string_view prefix, std::string_view key) {
  std::string out;
  if (prefix.empty()) {
    out.assign(key.data(), key.size());
    return out;
  }
  out.reserve(prefix.size() + 1 + key.size());
  out.append(prefix.data(), prefix.size());
  out.push_back(':');
  out.append(key.data(), key.size());
  return out;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_KEY_H_
