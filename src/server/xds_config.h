// src/server/xds_config.h (internal)
//
// Provides `xds_domains`: the Envoy domains of a set of `RateLimitConfig`
// resources a control plane pushed over xDS (docs/gateways.md), read
// through the same parser as the reference-format files (envoy_config.h),
// so a pushed domain means what the same domain in a file means and is
// refused for the same reasons: each resource is rendered in the
// reference's format (a JSON document, which YAML reads) and parsed by
// `parse_envoy_domain`.
//
// Thread-safety: pure functions.

#ifndef THROTTLEKIT_SRC_SERVER_XDS_CONFIG_H_
#define THROTTLEKIT_SRC_SERVER_XDS_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "envoy_config.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"

namespace throttlekit::server {

// The type URL of the resources throttlekit-server subscribes to.
inline constexpr char kRateLimitConfigTypeUrl[] =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

// `config` in the reference's file format, as JSON.
std::string rate_limit_config_document(
    const ::ratelimit::config::ratelimit::v3::RateLimitConfig& config);

// The domains of `response`, one per resource. kInvalidArgument naming the
// resource (its index and name) and the problem: another type, a resource
// that does not unpack, a domain the reference's format refuses (an
// unknown unit, a duplicate descriptor, ...), or a domain named twice.
absl::StatusOr<std::vector<EnvoyDomain>> xds_domains(
    const ::envoy::service::discovery::v3::DiscoveryResponse& response);

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_XDS_CONFIG_H_
