// src/server/forward_auth.h (internal)
//
// Provides the forward-auth door's translation (docs/gateways.md), pure and
// free of HTTP: `forward_auth_request` turns a proxy's subrequest (its
// headers) into the Envoy door's `RateLimitRequest` for a route
// (forward_auth_config.h), and `forward_auth_answer` turns the decision
// into the HTTP answer the proxy acts on:
//
//   - admitted: 200, with the rate-limit fields the `envoy:` block's
//     `headers` style produces (to copy onto the response);
//   - refused: the route's denyStatus (429, or 403 for nginx), the same
//     fields and `Retry-After` (seconds until the refusing window ends,
//     rounded up; the style's own when it sends one);
//   - a request missing a header an entry reads: 400 naming the entry and
//     the headers looked for, nothing counted (`forward_auth_request`'s
//     error);
//   - a decision that failed (a store outage the fail policy does not
//     decide, an unknown domain under `unknownDomain: notFound`): 503 with
//     the status's message (proxies fail closed on a 5xx).
//
// Thread-safety: pure functions.

#ifndef THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_H_
#define THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "forward_auth_config.h"

namespace throttlekit::server {

// A request header by its lower-case name (the request's may be in any
// case); nullopt when absent.
using ForwardAuthHeaders =
    absl::FunctionRef<std::optional<std::string_view>(std::string_view)>;

// The subrequest itself, what `method`, `uri` and `path` fall back to when
// no header names them: Envoy's ext_authz asks with the original method
// and the original path and query after the route's path (its
// path_prefix).
struct ForwardAuthSubrequest {
  std::string_view method;
  // The request target after the route's path ("" when it is the route's
  // path itself).
  std::string_view rest;
};

// The Envoy door's request for `route`: its domain, one descriptor per
// configured one, each entry's value read from `headers` (then
// `subrequest`). kInvalidArgument naming the route, the descriptor, the
// entry's key and the headers looked for when one is absent or empty.
absl::StatusOr<::envoy::service::ratelimit::v3::RateLimitRequest>
forward_auth_request(const ForwardAuthRoute& route, ForwardAuthHeaders headers,
                     ForwardAuthSubrequest subrequest = {});

// What the door answers the proxy.
struct ForwardAuthAnswer {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// The answer for the Envoy door's `response` on `route`.
ForwardAuthAnswer forward_auth_answer(
    const ::envoy::service::ratelimit::v3::RateLimitResponse& response,
    const ForwardAuthRoute& route);

// The answer for a request refused before counting (kInvalidArgument: 400)
// or a decision that failed (anything else: 503), with the status's message.
ForwardAuthAnswer forward_auth_error(const absl::Status& status);

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_H_
