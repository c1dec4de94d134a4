// src/server/yaml_reader.h
//
// Provides the YAML reading helpers the server's configuration parsers share
// (config.cc for our policies, envoy_config.cc for the Envoy rate-limit
// service's format, rlqs_config.cc for the rate limit quota service's,
// forward_auth_config.cc for the forward-auth door's):
// errors that name the source, the path in the document and the problem;
// mappings whose unknown keys are errors; bounded integers, durations and
// strict booleans; the nesting cap. Internal to src/server.
//
// Thread-safety: plain values and pure functions.

#ifndef THROTTLEKIT_SRC_SERVER_YAML_READER_H_
#define THROTTLEKIT_SRC_SERVER_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl_view.h"
#include "config.h"
#include "envoy_config.h"
#include "forward_auth_config.h"
#include "rlqs_config.h"
#include "throttlekit/core/decision.h"

// `lhs = *expr` when `expr` (an absl::StatusOr) holds a value; otherwise
// returns its status from the enclosing function: a reader's field-by-field
// assignment.
#define TK_ASSIGN(lhs, expr)              \
  do {                                    \
    auto tk_v = (expr);                   \
    if (!tk_v.ok()) return tk_v.status(); \
    lhs = *std::move(tk_v);               \
  } while (0)

namespace throttlekit::server::yaml_reader {

// Where in the document a node sits, for errors: `limiters.api.limit`.
inline std::string child(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(sv(path), ".", sv(key));
}

// Builds errors naming the source and the path.
class Errors {
 public:
  explicit Errors(std::string_view source) : source_(source) {}

  // The source's name (a file name).
  const std::string& source() const { return source_; }

  absl::Status at(std::string_view path, std::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", path.empty() ? "(document)" : sv(path),
                     ": ", sv(problem)));
  }

 private:
  std::string source_;
};

// Calls `item(element, at)` for each element of the list `n` at `path`
// (`at` is `path[i]`), stopping at the first error it returns; a node that
// is not a list is the error "<path>: must be <what>".
template <class Item>
absl::Status for_each_item(const YAML::Node& n, const std::string& path,
                           const Errors& errors, std::string_view what,
                           Item item) {
  if (!n.IsSequence())
    return errors.at(path, absl::StrCat("must be ", sv(what)));
  for (size_t i = 0; i < n.size(); ++i) {
    if (absl::Status s = item(n[i], absl::StrCat(path, "[", i, "]")); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// What a scalar said, quoted for an error.
inline std::string quoted(const YAML::Node& n) {
  if (!n.IsScalar()) return n.IsMap() ? "a mapping" : "a sequence";
  return absl::StrCat("\"", n.Scalar(), "\"");
}

// A mapping whose keys are consumed one by one; `unknown` reports the first
// key nobody asked for.
class Map {
 public:
  Map(YAML::Node node, std::string path, const Errors& errors)
      : node_(std::move(node)), path_(std::move(path)), errors_(errors) {}

  const std::string& path() const { return path_; }
  const Errors& errors() const { return errors_; }

  // The value under `key`, or an undefined node; marks `key` as known.
  YAML::Node get(std::string_view key) {
    known_.insert(std::string(key));
    return node_[std::string(key)];
  }
  bool has(std::string_view key) const {
    return node_[std::string(key)].IsDefined();
  }

  // kInvalidArgument naming the first key nobody asked for, with the keys
  // this mapping accepts.
  absl::Status unknown() const {
    for (const auto& kv : node_) {
      const std::string key = kv.first.Scalar();
      if (!known_.contains(key)) {
        return errors_.at(child(path_, key),
                          absl::StrCat("unknown key; expected one of ",
                                       absl::StrJoin(known_, ", ")));
      }
    }
    return absl::OkStatus();
  }

 private:
  YAML::Node node_;
  std::string path_;
  const Errors& errors_;
  std::set<std::string> known_;
};

// Refuses documents nested deeper than kMaxConfigDepth and keys that are
// not plain strings.
inline absl::Status check_shape(const YAML::Node& n, const std::string& path,
                                int depth, const Errors& errors) {
  if (depth > kMaxConfigDepth) {
    return errors.at(
        path, absl::StrCat("nested deeper than ", kMaxConfigDepth, " levels"));
  }
  if (n.IsMap()) {
    for (const auto& kv : n) {
      if (!kv.first.IsScalar()) {
        return errors.at(path, "a mapping key must be a plain string");
      }
      if (absl::Status s = check_shape(
              kv.second, child(path, kv.first.Scalar()), depth + 1, errors);
          !s.ok()) {
        return s;
      }
    }
  } else if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      if (absl::Status s = check_shape(n[i], absl::StrCat(path, "[", i, "]"),
                                       depth + 1, errors);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

// An integer in [lo, hi].
inline absl::StatusOr<int64_t> integer(const YAML::Node& n,
                                       const std::string& path, int64_t lo,
                                       int64_t hi, const Errors& errors,
                                       std::string_view bounds) {
  int64_t v = 0;
  if (!n.IsScalar() || !absl::SimpleAtoi(n.Scalar(), &v) || v < lo || v > hi) {
    return errors.at(path, absl::StrCat("must be an integer in ", sv(bounds),
                                        "; got ", quoted(n)));
  }
  return v;
}

// Milliseconds: an integer, or a string with a unit (ms, s, m, h, d).
inline absl::StatusOr<int64_t> duration(const YAML::Node& n,
                                        const std::string& path,
                                        const Errors& errors) {
  const auto bad = [&] {
    return errors.at(
        path, absl::StrCat("must be a duration in [1 ms, 2^53-1 ms]: an "
                           "integer of milliseconds or a number with a unit "
                           "(ms, s, m, h, d); got ",
                           quoted(n)));
  };
  if (!n.IsScalar()) return bad();
  const std::string& s = n.Scalar();
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  int64_t value = 0;
  if (digits == 0 || digits > 16 ||
      !absl::SimpleAtoi(absl::string_view(s.data(), digits), &value)) {
    return bad();
  }
  const std::string_view unit = std::string_view(s).substr(digits);
  int64_t scale = 0;
  if (unit.empty() || unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else if (unit == "d") {
    scale = 86'400'000;
  } else {
    return bad();
  }
  if (value < 1 || value > kMaxSafeInteger / scale) return bad();
  return value * scale;
}

// `true` or `false` (YAML's other spellings are refused: one way to say it).
inline absl::StatusOr<bool> boolean(const YAML::Node& n,
                                    const std::string& path,
                                    const Errors& errors) {
  if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) {
    return n.Scalar() == "true";
  }
  return errors.at(path,
                   absl::StrCat("must be true or false; got ", quoted(n)));
}

inline absl::StatusOr<Map> mapping(const YAML::Node& n, const std::string& path,
                                   const Errors& errors) {
  if (!n.IsMap()) {
    return errors.at(path, absl::StrCat("must be a mapping; got ", quoted(n)));
  }
  return Map(n, path, errors);
}

// Parses `yaml` and hands the document to `read` (returning
// absl::StatusOr<T>); yaml-cpp's exceptions, for text that is not YAML or a
// node read as what it is not, become kInvalidArgument naming `source` and
// the line.
template <class T, class Read>
absl::StatusOr<T> read_yaml(std::string_view yaml, std::string_view source,
                            Read&& read) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    // yaml-cpp reports 0-based positions.
    return absl::InvalidArgumentError(
        absl::StrCat(sv(source), ": line ", e.mark.line + 1, ", column ",
                     e.mark.column + 1, ": not valid YAML: ", e.msg));
  }
  try {
    return read(doc);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(sv(source), ": line ", e.mark.line + 1, ": ", e.msg));
  }
}

// The server document's `envoy:` block at `path` (envoy_config.cc): inline
// `domains` and the reference-format `files` (a relative name is read from
// `base_dir`), every domain unique.
absl::StatusOr<EnvoyConfig> envoy_block(const YAML::Node& n,
                                        const std::string& path,
                                        const Errors& errors,
                                        std::string_view base_dir);

// The server document's `rlqs:` block at `path` (rlqs_config.cc): the rate
// limit quota service's domains, each unique.
absl::StatusOr<RlqsConfig> rlqs_block(const YAML::Node& n,
                                      const std::string& path,
                                      const Errors& errors);

// The server document's `forwardAuth:` block at `path`
// (forward_auth_config.cc): routes with unique paths, each naming a domain
// of `envoy` when it has any (else the domains come over xDS).
absl::StatusOr<ForwardAuthConfig> forward_auth_block(const YAML::Node& n,
                                                     const std::string& path,
                                                     const Errors& errors,
                                                     const EnvoyConfig& envoy);

}  // namespace throttlekit::server::yaml_reader

#endif  // THROTTLEKIT_SRC_SERVER_YAML_READER_H_
