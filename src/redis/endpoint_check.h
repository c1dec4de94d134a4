// src/redis/endpoint_check.h
//
// Provides `redis_internal::check_endpoint`: the connection fields every
// Redis client's options share (host, port, database, the two timeouts,
// username and password), checked once for the coordinator and the
// region pool, each error naming `<what>.<field>` and its bound.

#ifndef THROTTLEKIT_SRC_REDIS_ENDPOINT_CHECK_H_
#define THROTTLEKIT_SRC_REDIS_ENDPOINT_CHECK_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/option_check.h"

namespace throttlekit::redis_internal {

// kInvalidArgument "<what>.<field> must be <bound>; got <got>".
template <class T>
absl::Status bad_option(std::string_view what, std::string_view field,
                        std::string_view bound, const T& got) {
  return absl::InvalidArgumentError(absl::StrCat(
      absl::string_view(what.data(), what.size()), ".",
      absl::string_view(field.data(), field.size()), " must be ",
      absl::string_view(bound.data(), bound.size()), "; got ", got));
}

// OK iff `o` (any options struct with the fields above) names a reachable
// endpoint: a host, a port in [1, 65535], a database in [0, 10^6],
// timeouts in (0, 10 min], and a password beside any username.
template <class Options>
absl::Status check_endpoint(const char* what, const Options& o) {
  if (o.host.empty()) return bad_option(what, "host", "non-empty", "\"\"");
  if (o.port < 1 || o.port > 65535) {
    return bad_option(what, "port", "in [1, 65535]", o.port);
  }
  if (o.database < 0 || o.database > 1'000'000) {
    return bad_option(what, "database", "in [0, 1000000]", o.database);
  }
  for (const absl::Status& s :
       {detail::check_timeout_option(what, "connect_timeout",
                                     o.connect_timeout),
        detail::check_timeout_option(what, "command_timeout",
                                     o.command_timeout)}) {
    if (!s.ok()) return s;
  }
  if (!o.username.empty() && o.password.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ".username needs a password"));
  }
  return absl::OkStatus();
}

}  // namespace throttlekit::redis_internal

#endif  // THROTTLEKIT_SRC_REDIS_ENDPOINT_CHECK_H_
