// The reference rate-limit service's environment (src/server/
// reference_env.h): Envoy Gateway's own variables read as its deployment
// sets them, the reference's defaults where a variable is unset, each
// setting this server does not apply noted, and each it refuses named.

#include "reference_env.h"

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace throttlekit::server {
namespace {

using Env = std::map<std::string, std::string>;

absl::StatusOr<ReferenceEnv> read(const Env& env) {
  return read_reference_env([&env](const char* name) -> const char* {
    const auto found = env.find(name);
    return found == env.end() ? nullptr : found->second.c_str();
  });
}

// What Envoy Gateway's rate-limit Deployment sets (its
// internal/infrastructure/kubernetes/ratelimit/resource.go), with a Redis
// backend and Prometheus on.
Env envoy_gateway() {
  return {{"RUNTIME_ROOT", "/data"},
          {"RUNTIME_SUBDIRECTORY", "ratelimit"},
          {"RUNTIME_IGNOREDOTFILES", "true"},
          {"RUNTIME_WATCH_ROOT", "false"},
          {"LOG_LEVEL", "info"},
          {"USE_STATSD", "false"},
          {"CONFIG_TYPE", "GRPC_XDS_SOTW"},
          {"CONFIG_GRPC_XDS_SERVER_URL", "envoy-gateway:18001"},
          {"CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"},
          {"GRPC_SERVER_USE_TLS", "true"},
          {"GRPC_SERVER_TLS_CERT", "/certs/tls.crt"},
          {"GRPC_SERVER_TLS_KEY", "/certs/tls.key"},
          {"GRPC_SERVER_TLS_CA_CERT", "/certs/ca.crt"},
          {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"},
          {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/certs/tls.crt"},
          {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/certs/tls.key"},
          {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt"},
          {"FORCE_START_WITHOUT_INITIAL_CONFIG", "true"},
          {"REDIS_SOCKET_TYPE", "tcp"},
          {"REDIS_URL", "redis.redis-system.svc.cluster.local:6379"},
          {"USE_PROMETHEUS", "true"},
          {"PROMETHEUS_ADDR", ":19001"},
          {"PROMETHEUS_MAPPER_YAML", "/etc/statsd-exporter/conf.yaml"}};
}

TEST(ReferenceEnv, EnvoyGatewaysDeploymentIsReadAsItMeansIt) {
  absl::StatusOr<ReferenceEnv> env = read(envoy_gateway());
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->grpc_listen, "0.0.0.0:8081");
  EXPECT_EQ(env->health_listen, "0.0.0.0:8080");
  EXPECT_EQ(env->tls_cert, "/certs/tls.crt");
  EXPECT_EQ(env->tls_key, "/certs/tls.key");
  // GRPC_SERVER_TLS_CA_CERT is not a variable the reference reads: no
  // client certificate is asked for, as with the reference.
  EXPECT_EQ(env->tls_client_ca, "");
  EXPECT_EQ(env->metrics_listen, "0.0.0.0:19001");
  EXPECT_EQ(env->metrics_path, "/metrics");
  EXPECT_EQ(env->redis, "redis.redis-system.svc.cluster.local:6379");
  EXPECT_EQ(env->redis_cluster, "");
  EXPECT_EQ(env->xds_server, "envoy-gateway:18001");
  EXPECT_EQ(env->xds_node_id, "envoy-ratelimit");
  EXPECT_EQ(env->xds_tls_ca, "/certs/ca.crt");
  EXPECT_EQ(env->xds_tls_cert, "/certs/tls.crt");
  EXPECT_EQ(env->xds_tls_key, "/certs/tls.key");
  EXPECT_FALSE(env->headers);
  EXPECT_FALSE(env->healthy_needs_config);
  EXPECT_EQ(env->log_level, "info");
  ASSERT_EQ(env->notes.size(), 1u);
  EXPECT_TRUE(absl::StrContains(env->notes[0], "PROMETHEUS_MAPPER_YAML"));
}

TEST(ReferenceEnv, UnsetVariablesTakeTheReferencesDefaults) {
  absl::StatusOr<ReferenceEnv> env = read({{"CONFIG_TYPE", "GRPC_XDS_SOTW"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->grpc_listen, "0.0.0.0:8081");
  EXPECT_EQ(env->health_listen, "0.0.0.0:8080");
  EXPECT_EQ(env->tls_cert, "");
  EXPECT_EQ(env->metrics_listen, "") << "USE_PROMETHEUS is false by default";
  EXPECT_EQ(env->xds_server, "localhost:18000");
  EXPECT_EQ(env->xds_node_id, "default");
  EXPECT_EQ(env->xds_tls_ca, "");
  EXPECT_EQ(env->log_level, "warn");
  // The memory store, and statsd (on by default there) not offered.
  EXPECT_EQ(env->redis, "");
  ASSERT_EQ(env->notes.size(), 2u);
  EXPECT_TRUE(absl::StrContains(env->notes[0], "USE_STATSD"));
  EXPECT_TRUE(absl::StrContains(env->notes[1], "REDIS_URL"));
}

TEST(ReferenceEnv, PortsStoresMetricsAndHeadersAreReadWhereSet) {
  Env e = {{"CONFIG_TYPE", "GRPC_XDS_SOTW"},
           {"USE_STATSD", "false"},
           {"GRPC_HOST", "127.0.0.1"},
           {"GRPC_PORT", "0"},
           {"HOST", "127.0.0.1"},
           {"PORT", "9000"},
           {"GRPC_SERVER_USE_TLS", "1"},
           {"GRPC_SERVER_TLS_CERT", "c"},
           {"GRPC_SERVER_TLS_KEY", "k"},
           {"GRPC_CLIENT_TLS_CACERT", "ca"},
           {"USE_PROMETHEUS", "True"},
           {"PROMETHEUS_ADDR", "127.0.0.1:9100"},
           {"PROMETHEUS_PATH", "/stats/prometheus"},
           {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true"},
           {"LIMIT_RESPONSE_HEADERS_ENABLED", "true"},
           {"REDIS_SOCKET_TYPE", "TCP"},
           {"REDIS_TYPE", "sentinel"},
           {"REDIS_URL", "mymaster,10.0.0.1:26379,10.0.0.2:26379"},
           {"REDIS_AUTH", "app:secret"},
           {"REDIS_SENTINEL_AUTH", "sentinel-secret"},
           {"LOG_LEVEL", "WARNING"}};
  absl::StatusOr<ReferenceEnv> env = read(e);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->grpc_listen, "127.0.0.1:0");
  EXPECT_EQ(env->health_listen, "127.0.0.1:9000");
  EXPECT_EQ(env->tls_client_ca, "ca");
  EXPECT_EQ(env->metrics_listen, "127.0.0.1:9100");
  EXPECT_EQ(env->metrics_path, "/stats/prometheus");
  EXPECT_TRUE(env->healthy_needs_config);
  EXPECT_TRUE(env->headers);
  EXPECT_EQ(env->redis_master, "mymaster");
  EXPECT_EQ(env->redis_sentinel, "10.0.0.1:26379,10.0.0.2:26379");
  EXPECT_EQ(env->redis_user, "app");
  EXPECT_EQ(env->redis_password, "secret");
  EXPECT_EQ(env->sentinel_user, "");
  EXPECT_EQ(env->sentinel_password, "sentinel-secret");
  EXPECT_EQ(env->log_level, "warn");
  EXPECT_TRUE(env->notes.empty());

  e["REDIS_TYPE"] = "CLUSTER";
  e["REDIS_URL"] = "10.0.0.1:7000,10.0.0.2:7000";
  env = read(e);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->redis_cluster, "10.0.0.1:7000,10.0.0.2:7000");
  EXPECT_EQ(env->redis_sentinel, "");
}

TEST(ReferenceEnv, SettingsThatWouldChangeDecisionsOrSecurityAreRefused) {
  const std::pair<Env, std::string> cases[] = {
      {{}, "CONFIG_TYPE"},  // FILE, the reference's default
      {{{"CONFIG_TYPE", "FILE"}}, "RUNTIME_ROOT"},
      {{{"GRPC_PORT", "80000"}}, "GRPC_PORT"},
      {{{"PORT", "http"}}, "PORT"},
      {{{"GRPC_SERVER_USE_TLS", "yes"}}, "GRPC_SERVER_USE_TLS"},
      {{{"GRPC_SERVER_USE_TLS", "true"}}, "GRPC_SERVER_TLS_CERT"},
      {{{"GRPC_SERVER_USE_TLS", "true"},
        {"GRPC_SERVER_TLS_CERT", "c"},
        {"GRPC_SERVER_TLS_KEY", "k"},
        {"GRPC_CLIENT_TLS_SAN", "envoy"}},
       "GRPC_CLIENT_TLS_SAN"},
      {{{"GRPC_UDS", "/tmp/rl.sock"}}, "GRPC_UDS"},
      {{{"BACKEND_TYPE", "memcache"}}, "BACKEND_TYPE"},
      {{{"REDIS_URL", "/var/run/nutcracker/ratelimit.sock"}},
       "REDIS_SOCKET_TYPE"},
      {{{"REDIS_URL", "r:6379"},
        {"REDIS_SOCKET_TYPE", "tcp"},
        {"REDIS_TLS", "true"}},
       "REDIS_TLS"},
      {{{"REDIS_URL", "r:6379"},
        {"REDIS_SOCKET_TYPE", "tcp"},
        {"REDIS_TYPE", "ring"}},
       "REDIS_TYPE"},
      {{{"REDIS_URL", "mymaster"},
        {"REDIS_SOCKET_TYPE", "tcp"},
        {"REDIS_TYPE", "SENTINEL"}},
       "REDIS_URL"},
      {{{"REDIS_URL", "r:6379"},
        {"REDIS_SOCKET_TYPE", "tcp"},
        {"REDIS_PERSECOND", "true"}},
       "REDIS_PERSECOND"},
      {{{"USE_PROMETHEUS", "true"}, {"PROMETHEUS_PATH", "metrics"}},
       "PROMETHEUS_PATH"},
      {{{"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"}},
       "CONFIG_GRPC_XDS_SERVER_TLS_CACERT"},
      {{{"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "cp"}},
       "CONFIG_GRPC_XDS_SERVER_TLS_SAN"},
      {{{"SHADOW_MODE", "true"}}, "SHADOW_MODE"},
      {{{"QUOTA_MODE", "true"}}, "QUOTA_MODE"},
      {{{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"}},
       "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"},
      {{{"MERGE_DOMAIN_CONFIG", "true"}}, "MERGE_DOMAIN_CONFIG"},
      {{{"LIMIT_REMAINING_HEADER", "X-RateLimit-Remaining"}},
       "LIMIT_REMAINING_HEADER"},
      {{{"LOG_LEVEL", "verbose"}}, "LOG_LEVEL"},
  };
  for (const auto& [overrides, named] : cases) {
    Env e = named == "CONFIG_TYPE" || named == "RUNTIME_ROOT"
                ? Env{}
                : Env{{"CONFIG_TYPE", "GRPC_XDS_SOTW"}};
    for (const auto& [k, v] : overrides) e[k] = v;
    absl::StatusOr<ReferenceEnv> env = read(e);
    ASSERT_FALSE(env.ok()) << "expected a refusal naming " << named;
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(env.status().message(), named))
        << env.status();
  }
}

TEST(ReferenceEnv, SettingsThatChangeNoDecisionAreNoted) {
  Env e = {
      {"CONFIG_TYPE", "GRPC_XDS_SOTW"}, {"USE_STATSD", "false"},
      {"REDIS_URL", "r:6379"},          {"REDIS_SOCKET_TYPE", "tcp"},
      {"REDIS_POOL_SIZE", "10"},        {"REDIS_TIMEOUT", "1s"},
      {"NEAR_LIMIT_RATIO", "0.9"},      {"LOCAL_CACHE_SIZE_IN_BYTES", "1024"},
      {"TRACING_ENABLED", "true"}};
  absl::StatusOr<ReferenceEnv> env = read(e);
  ASSERT_TRUE(env.ok()) << env.status();
  std::string all;
  for (const std::string& n : env->notes) all += n + "\n";
  for (const char* named :
       {"REDIS_POOL_SIZE", "REDIS_TIMEOUT", "NEAR_LIMIT_RATIO",
        "LOCAL_CACHE_SIZE_IN_BYTES", "TRACING_ENABLED"}) {
    EXPECT_TRUE(absl::StrContains(all, named)) << named << " in\n" << all;
  }
  EXPECT_EQ(env->notes.size(), 5u) << all;
}

}  // namespace
}  // namespace throttlekit::server
