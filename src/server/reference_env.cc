// src/server/reference_env.cc: the reference service's environment
// (reference_env.h).

#include "reference_env.h"

#include <cctype>
#include <string_view>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace throttlekit::server {
namespace {

// The reference reads its booleans with Go's strconv.ParseBool.
absl::StatusOr<bool> parse_bool(const char* name, std::string_view v) {
  if (v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" ||
      v == "True") {
    return true;
  }
  if (v == "0" || v == "f" || v == "F" || v == "false" || v == "FALSE" ||
      v == "False") {
    return false;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(name, " wants true or false; got \"", std::string(v), "\""));
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Splits "user:password" (REDIS_AUTH's form) or takes a bare password.
void split_auth(std::string_view auth, std::string& user,
                std::string& password) {
  const size_t colon = auth.find(':');
  if (colon == std::string_view::npos) {
    password = std::string(auth);
  } else {
    user = std::string(auth.substr(0, colon));
    password = std::string(auth.substr(colon + 1));
  }
}

class Reader {
 public:
  explicit Reader(const EnvLookup& lookup) : lookup_(lookup) {}

  // The value, or `fallback` when unset (an empty value counts as set, as
  // envconfig reads it).
  std::string get(const char* name, std::string_view fallback = "") const {
    const char* v = lookup_(name);
    return v == nullptr ? std::string(fallback) : std::string(v);
  }
  bool set(const char* name) const { return lookup_(name) != nullptr; }

  absl::StatusOr<bool> flag(const char* name, bool fallback) const {
    const char* v = lookup_(name);
    if (v == nullptr) return fallback;
    return parse_bool(name, v);
  }

  absl::StatusOr<int> port(const char* name, int fallback) const {
    const char* v = lookup_(name);
    if (v == nullptr) return fallback;
    int port = 0;
    if (!absl::SimpleAtoi(v, &port) || port < 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " wants a port 0 .. 65535; got \"", v, "\""));
    }
    return port;
  }

 private:
  const EnvLookup& lookup_;
};

#define TK_ENV_ASSIGN(lhs, expr)     \
  do {                               \
    auto _tk_env_value = (expr);     \
    if (!_tk_env_value.ok()) {       \
      return _tk_env_value.status(); \
    }                                \
    lhs = *std::move(_tk_env_value); \
  } while (false)

absl::Status refused(const char* name, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", why));
}

// Refuses a boolean the reference reads whose `true` we do not offer.
absl::Status refuse_if_true(const Reader& env, const char* name,
                            const char* why) {
  bool on = false;
  TK_ENV_ASSIGN(on, env.flag(name, false));
  if (on) return refused(name, why);
  return absl::OkStatus();
}

absl::Status read_doors(const Reader& env, ReferenceEnv& out) {
  int grpc_port = 0, port = 0;
  TK_ENV_ASSIGN(grpc_port, env.port("GRPC_PORT", 8081));
  TK_ENV_ASSIGN(port, env.port("PORT", 8080));
  out.grpc_listen =
      absl::StrCat(env.get("GRPC_HOST", "0.0.0.0"), ":", grpc_port);
  out.health_listen = absl::StrCat(env.get("HOST", "0.0.0.0"), ":", port);
  if (!env.get("GRPC_UDS").empty()) {
    return refused("GRPC_UDS",
                   "a Unix socket for the gRPC door is not offered; set "
                   "GRPC_HOST and GRPC_PORT");
  }
  bool tls = false;
  TK_ENV_ASSIGN(tls, env.flag("GRPC_SERVER_USE_TLS", false));
  if (tls) {
    out.tls_cert = env.get("GRPC_SERVER_TLS_CERT");
    out.tls_key = env.get("GRPC_SERVER_TLS_KEY");
    out.tls_client_ca = env.get("GRPC_CLIENT_TLS_CACERT");
    if (out.tls_cert.empty() || out.tls_key.empty()) {
      return refused("GRPC_SERVER_USE_TLS",
                     "true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
    }
    if (!env.get("GRPC_CLIENT_TLS_SAN").empty()) {
      return refused("GRPC_CLIENT_TLS_SAN",
                     "checking a client certificate's SAN is not offered "
                     "(GRPC_CLIENT_TLS_CACERT alone requires a certificate "
                     "its CA signed)");
    }
  }
  TK_ENV_ASSIGN(out.healthy_needs_config,
                env.flag("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false));
  bool prometheus = false;
  TK_ENV_ASSIGN(prometheus, env.flag("USE_PROMETHEUS", false));
  if (prometheus) {
    std::string addr = env.get("PROMETHEUS_ADDR", ":9090");
    if (!addr.empty() && addr.front() == ':') addr = "0.0.0.0" + addr;
    out.metrics_listen = std::move(addr);
    out.metrics_path = env.get("PROMETHEUS_PATH", "/metrics");
    if (out.metrics_path.empty() || out.metrics_path.front() != '/') {
      return refused(
          "PROMETHEUS_PATH",
          absl::StrCat("wants a path from /; got \"", out.metrics_path, "\""));
    }
    if (!env.get("PROMETHEUS_MAPPER_YAML").empty()) {
      out.notes.push_back(
          "PROMETHEUS_MAPPER_YAML is not read: the metrics carry the names "
          "the reference's default mapping gives (docs/envoy.md, "
          "\"Metrics\")");
    }
  }
  bool statsd = false;
  TK_ENV_ASSIGN(statsd, env.flag("USE_STATSD", true));
  if (statsd) {
    out.notes.push_back(
        "USE_STATSD is true (the reference's default): statsd is not "
        "offered; set USE_PROMETHEUS=true for the metrics");
  }
  return absl::OkStatus();
}

absl::Status read_redis(const Reader& env, ReferenceEnv& out) {
  const std::string backend = lower(env.get("BACKEND_TYPE", "redis"));
  if (backend != "redis") {
    return refused("BACKEND_TYPE",
                   absl::StrCat("\"", backend,
                                "\" is not offered; the store is Redis "
                                "(REDIS_URL) or, without it, the memory "
                                "store"));
  }
  const std::string url = env.get("REDIS_URL");
  if (url.empty()) {
    out.notes.push_back(
        "REDIS_URL is not set: the counts live in this process's memory "
        "store (one server; set REDIS_URL to share them)");
    return absl::OkStatus();
  }
  if (const std::string socket = lower(env.get("REDIS_SOCKET_TYPE", "unix"));
      socket != "tcp") {
    return refused("REDIS_SOCKET_TYPE",
                   absl::StrCat("\"", socket,
                                "\": Redis is reached over tcp only; set "
                                "REDIS_SOCKET_TYPE=tcp and REDIS_URL to "
                                "HOST:PORT"));
  }
  if (absl::Status s = refuse_if_true(
          env, "REDIS_TLS", "Redis over TLS is not offered by this server");
      !s.ok()) {
    return s;
  }
  const std::string type = lower(env.get("REDIS_TYPE", "single"));
  if (type == "single") {
    out.redis = url;
  } else if (type == "cluster") {
    out.redis_cluster = url;
  } else if (type == "sentinel") {
    // "<master name>,<sentinel>,...", as the reference reads it.
    const size_t comma = url.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == url.size()) {
      return refused("REDIS_URL",
                     "with REDIS_TYPE=SENTINEL wants <master name>,"
                     "<sentinel HOST:PORT>[,...]");
    }
    out.redis_master = url.substr(0, comma);
    out.redis_sentinel = url.substr(comma + 1);
    split_auth(env.get("REDIS_SENTINEL_AUTH"), out.sentinel_user,
               out.sentinel_password);
  } else {
    return refused("REDIS_TYPE", absl::StrCat("wants SINGLE, CLUSTER or "
                                              "SENTINEL; got \"",
                                              type, "\""));
  }
  split_auth(env.get("REDIS_AUTH"), out.redis_user, out.redis_password);
  if (absl::Status s = refuse_if_true(
          env, "REDIS_PERSECOND",
          "a second Redis for per-second limits is not offered (every "
          "limit counts in REDIS_URL's store)");
      !s.ok()) {
    return s;
  }
  for (const char* name : {"REDIS_POOL_SIZE", "REDIS_TIMEOUT",
                           "REDIS_PIPELINE_WINDOW", "REDIS_PIPELINE_LIMIT"}) {
    if (env.set(name)) {
      out.notes.push_back(absl::StrCat(
          name,
          " is not applied: the store's client pipelines every call over "
          "one connection with a 250 ms bound per call (docs/redis.md)"));
    }
  }
  return absl::OkStatus();
}

absl::Status read_config_source(const Reader& env, ReferenceEnv& out) {
  const std::string type = env.get("CONFIG_TYPE", "FILE");
  if (type != "GRPC_XDS_SOTW") {
    return refused(
        "CONFIG_TYPE",
        absl::StrCat("\"", type,
                     "\": the reference's runtime directory (RUNTIME_ROOT) "
                     "is not read; set CONFIG_TYPE=GRPC_XDS_SOTW, or start "
                     "with --config naming the domain files "
                     "(docs/envoy.md)"));
  }
  out.xds_server = env.get("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000");
  out.xds_node_id = env.get("CONFIG_GRPC_XDS_NODE_ID", "default");
  bool tls = false;
  TK_ENV_ASSIGN(tls, env.flag("CONFIG_GRPC_XDS_SERVER_USE_TLS", false));
  if (tls) {
    out.xds_tls_ca = env.get("CONFIG_GRPC_XDS_SERVER_TLS_CACERT");
    out.xds_tls_cert = env.get("CONFIG_GRPC_XDS_CLIENT_TLS_CERT");
    out.xds_tls_key = env.get("CONFIG_GRPC_XDS_CLIENT_TLS_KEY");
    if (out.xds_tls_ca.empty()) {
      return refused("CONFIG_GRPC_XDS_SERVER_USE_TLS",
                     "true needs CONFIG_GRPC_XDS_SERVER_TLS_CACERT (the "
                     "control plane's CA)");
    }
    if (out.xds_tls_cert.empty() != out.xds_tls_key.empty()) {
      return refused("CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
                     "and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together");
    }
  }
  for (const char* name :
       {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "CONFIG_GRPC_XDS_NODE_METADATA",
        "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"}) {
    if (!env.get(name).empty()) {
      return refused(name, "is not offered by this server's xDS client");
    }
  }
  return absl::OkStatus();
}

// The reference's switches that change decisions or answers.
absl::Status read_behaviour(const Reader& env, ReferenceEnv& out) {
  const std::pair<const char*, const char*> refusals[] = {
      {"SHADOW_MODE",
       "the global shadow mode is not offered (a limit's shadow_mode is)"},
      {"QUOTA_MODE", "the global quota mode is not offered"},
      {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
       "is not offered (a refused descriptor counts no hit here already, "
       "docs/envoy.md \"Where we differ\"; the others still count)"},
      {"MERGE_DOMAIN_CONFIG",
       "merging configurations of one domain is not offered"},
      {"RESPONSE_DYNAMIC_METADATA", "response dynamic metadata is not sent"},
  };
  for (const auto& [name, why] : refusals) {
    if (absl::Status s = refuse_if_true(env, name, why); !s.ok()) return s;
  }
  TK_ENV_ASSIGN(out.headers, env.flag("LIMIT_RESPONSE_HEADERS_ENABLED", false));
  const std::pair<const char*, const char*> names[] = {
      {"LIMIT_LIMIT_HEADER", "RateLimit-Limit"},
      {"LIMIT_REMAINING_HEADER", "RateLimit-Remaining"},
      {"LIMIT_RESET_HEADER", "RateLimit-Reset"},
  };
  for (const auto& [name, standard] : names) {
    if (const std::string v = env.get(name, standard); v != standard) {
      return refused(name, absl::StrCat("custom header names are not offered "
                                        "(the headers are ",
                                        standard, " and its two siblings)"));
    }
  }
  if (const std::string ratio = env.get("NEAR_LIMIT_RATIO", "0.8");
      ratio != "0.8") {
    out.notes.push_back(
        absl::StrCat("NEAR_LIMIT_RATIO=", ratio,
                     " is not applied: near_limit counts past 0.8 of a limit"));
  }
  if (const std::string cache = env.get("LOCAL_CACHE_SIZE_IN_BYTES", "0");
      cache != "0") {
    out.notes.push_back(
        "LOCAL_CACHE_SIZE_IN_BYTES is not applied: a limit marked `leased` "
        "saves the round trips a local cache would (docs/envoy.md)");
  }
  bool tracing = false;
  TK_ENV_ASSIGN(tracing, env.flag("TRACING_ENABLED", false));
  if (tracing) {
    out.notes.push_back("TRACING_ENABLED is not applied: no spans are sent");
  }
  const std::string level = lower(env.get("LOG_LEVEL", "warn"));
  if (level != "trace" && level != "debug" && level != "info" &&
      level != "warn" && level != "warning" && level != "error" &&
      level != "fatal" && level != "panic") {
    return refused("LOG_LEVEL",
                   absl::StrCat("wants trace, debug, info, warn, error, "
                                "fatal or panic; got \"",
                                level, "\""));
  }
  out.log_level = level == "warning" ? "warn" : level;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReferenceEnv> read_reference_env(const EnvLookup& lookup) {
  const Reader env(lookup);
  ReferenceEnv out;
  for (auto* step :
       {read_doors, read_redis, read_config_source, read_behaviour}) {
    if (absl::Status s = step(env, out); !s.ok()) return s;
  }
  return out;
}

}  // namespace throttlekit::server
