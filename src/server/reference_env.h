// src/server/reference_env.h
//
// Provides `read_reference_env`: the settings of the reference rate-limit
// service (envoyproxy/ratelimit, its `src/settings/settings.go`) read from
// the environment, for throttlekit-server started the way Envoy Gateway
// starts the reference (`/bin/ratelimit`, no arguments, everything in the
// environment; docs/gateways.md, "Envoy Gateway").
//
// Each variable the reference reads is honoured, noted or refused:
// - honoured: the ports and their TLS, the xDS source, the Redis store,
//   Prometheus metrics, the health check and its config gate, the
//   rate-limit headers (below);
// - noted (`notes`, one line each for stderr): a setting whose value
//   changes no decision and that this server does not apply (statsd,
//   tracing, the Redis pool's size and timeouts, the local over-limit
//   cache, a metrics mapper file);
// - refused (kInvalidArgument naming the variable): a setting that would
//   change decisions, placement or security if ignored (global shadow or
//   quota mode, a memcache backend, Redis over TLS or a Unix socket,
//   a SAN check, custom header names, a file configuration).
// Defaults are the reference's (gRPC on 0.0.0.0:8081, the health check on
// 0.0.0.0:8080, Prometheus at :9090/metrics when USE_PROMETHEUS=true),
// except the store: without REDIS_URL the counts live in the embedded
// memory store (the reference would dial its default Unix socket).
//
// Pure (no I/O, no process state): the lookup is the caller's.
// Thread-safety: safe to call concurrently with distinct lookups.

#ifndef THROTTLEKIT_SRC_SERVER_REFERENCE_ENV_H_
#define THROTTLEKIT_SRC_SERVER_REFERENCE_ENV_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace throttlekit::server {

// What the reference's environment asks of the server. Addresses are
// HOST:PORT; file settings are paths, as given.
struct ReferenceEnv {
  // The gRPC door (GRPC_HOST, GRPC_PORT) and its TLS (GRPC_SERVER_USE_TLS
  // with GRPC_SERVER_TLS_CERT and _KEY; GRPC_CLIENT_TLS_CACERT requires a
  // client certificate that CA signed). Empty paths: plaintext.
  std::string grpc_listen;
  std::string tls_cert, tls_key, tls_client_ca;
  // The health check's HTTP door (HOST, PORT): GET /healthcheck.
  std::string health_listen;
  // HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: unhealthy until a
  // configuration is loaded.
  bool healthy_needs_config = false;
  // USE_PROMETHEUS=true: the metrics at PROMETHEUS_ADDR (a bare ":PORT"
  // listens on every address, as Go's does) under PROMETHEUS_PATH; empty
  // address: no metrics door.
  std::string metrics_listen;
  std::string metrics_path = "/metrics";
  // REDIS_TYPE SINGLE, CLUSTER or SENTINEL with REDIS_URL: one of the three
  // set (the sentinel's master name apart); none: the memory store.
  // REDIS_AUTH "password" or "user:password"; REDIS_SENTINEL_AUTH the same
  // for the sentinels.
  std::string redis, redis_cluster, redis_sentinel, redis_master;
  std::string redis_user, redis_password;
  std::string sentinel_user, sentinel_password;
  // CONFIG_TYPE=GRPC_XDS_SOTW: the control plane (CONFIG_GRPC_XDS_SERVER_URL),
  // this node (CONFIG_GRPC_XDS_NODE_ID) and, with
  // CONFIG_GRPC_XDS_SERVER_USE_TLS=true, its CA and our certificate.
  std::string xds_server, xds_node_id;
  std::string xds_tls_ca, xds_tls_cert, xds_tls_key;
  // LIMIT_RESPONSE_HEADERS_ENABLED=true: the reference's three headers
  // (RateLimit-Limit, -Remaining, -Reset) on every response.
  bool headers = false;
  // LOG_LEVEL, lower-cased (trace, debug, info, warn, error, fatal, panic).
  std::string log_level = "warn";
  // Settings read and not applied, each a sentence naming the variable.
  std::vector<std::string> notes;
};

// Looks a variable up: its value, or null when it is not set.
using EnvLookup = std::function<const char*(const char*)>;

// Reads the reference's variables through `lookup`. kInvalidArgument
// naming the variable for a value that does not parse or a setting this
// server refuses (file header).
absl::StatusOr<ReferenceEnv> read_reference_env(const EnvLookup& lookup);

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_REFERENCE_ENV_H_
