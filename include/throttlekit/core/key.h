// throttlekit/core/key.h
//
// Provides key validation and the one definition of key joining
// (docs/semantics.md, "Decision", keys): a non-empty prefix gives
// `prefix + ":" + key`, an empty prefix gives `key`.

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

namespace detail {

// Builds the error for a key that failed the fast check (out of line).
[[gnu::cold, gnu::noinline]] inline absl::Status invalid_key(size_t size) {
  if (size == 0) return absl::InvalidArgumentError("key must not be empty");
  return absl::InvalidArgumentError(
      absl::StrCat("key is ", size, " bytes; the maximum is ", kMaxKeyBytes));
}

}  // namespace detail

// True iff `key` is 1 .. kMaxKeyBytes bytes long.
constexpr bool is_valid_key(std::string_view key) noexcept {
  return key.size() - 1 < kMaxKeyBytes;  // wraps for size 0
}

// OK, or kInvalidArgument naming the problem (empty, or over kMaxKeyBytes).
inline absl::Status validate_key(std::string_view key) {
  if (is_valid_key(key)) [[likely]] {
    return absl::OkStatus();
  }
  return detail::invalid_key(key.size());
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
