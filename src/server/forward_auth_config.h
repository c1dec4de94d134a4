// src/server/forward_auth_config.h
//
// Provides the configuration of throttlekit-server's forward-auth door
// (docs/gateways.md): HTTP routes that nginx's `auth_request`, Caddy's
// `forward_auth`, Traefik's ForwardAuth or Envoy's `ext_authz` (HTTP mode)
// ask once per request, each turning the request's method, URI, host,
// client address and headers (sent by the proxy) into the descriptors of an
// Envoy domain (the `envoy:` block, docs/envoy.md), counted by the Envoy
// door's engines:
//
//     forwardAuth:
//       denyStatus: 429                 # or 403 (nginx); default 429
//       routes:
//         - path: /auth/api              # the door's URL path
//           domain: edge                 # an envoy: domain
//           denyStatus: 403              # this route's, over the block's
//           descriptors:                 # each a list of entries
//             - [{key: remote_address, from: clientAddress}]
//             - [{key: path, from: path}, {key: method, from: method}]
//             - [{key: plan, header: X-Plan}, {key: tier, value: gold}]
//
// An entry's value is `value` (a literal), `header` (that request header,
// any case) or `from`: `method` (X-Forwarded-Method, else
// X-Original-Method, else the subrequest's own method), `uri`
// (X-Forwarded-Uri, else X-Original-URI, else the subrequest's target after
// the route's path, as Envoy's ext_authz sends it), `path` (the uri up to
// its `?`), `host` (X-Forwarded-Host, else Host) or `clientAddress`
// (X-Real-IP, else the first address of X-Forwarded-For).
// Read by the server's parser (config.h) as the `rlqs:` block is; every
// error is kInvalidArgument reading `<source>: <path>: <problem>`.
//
// Thread-safety: plain values.

#ifndef THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_CONFIG_H_
#define THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_CONFIG_H_

#include <string>
#include <string_view>
#include <vector>

namespace throttlekit::server {

// Where a descriptor entry's value comes from.
enum class ForwardAuthFrom {
  kLiteral,        // `value`
  kHeader,         // `header`: a request header
  kMethod,         // the original method
  kUri,            // the original URI (path and query)
  kPath,           // the original URI up to its `?`
  kHost,           // the original host
  kClientAddress,  // the client's address
};

// One entry of a descriptor.
struct ForwardAuthEntry {
  std::string key;  // never empty
  ForwardAuthFrom from = ForwardAuthFrom::kLiteral;
  // kLiteral: the value (never empty); kHeader: the header's name, as
  // written (matched in any case).
  std::string value;
};

// One route of the door.
struct ForwardAuthRoute {
  std::string path;    // starts with `/`; unique in the block
  std::string domain;  // the Envoy domain its descriptors are counted in
  // At least one descriptor, each of at least one entry.
  std::vector<std::vector<ForwardAuthEntry>> descriptors;
  // The status of a refusal: 429 (Too Many Requests, with Retry-After) or
  // 403 (what nginx's auth_request passes on; map it to 429 with
  // `error_page`).
  int deny_status = 429;
};

// The `forwardAuth:` block; no routes when the document has none.
struct ForwardAuthConfig {
  std::vector<ForwardAuthRoute> routes;

  // The route of `path`: the one whose path it is, else the longest whose
  // path it continues after a `/` (`/envoy` answers `/envoy/items`, as
  // Envoy's ext_authz asks with its path_prefix); null if none.
  const ForwardAuthRoute* find(std::string_view path) const;
};

// The request headers an entry's value is read from, in the order tried
// (lower case), and how an error names them: "X-Real-IP or the first
// address of X-Forwarded-For".
std::vector<std::string> forward_auth_headers(const ForwardAuthEntry& entry);
std::string forward_auth_headers_named(const ForwardAuthEntry& entry);

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_CONFIG_H_
