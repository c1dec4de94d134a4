// throttlekit-server: the library's decisions over gRPC (docs/server.md).
//
//     throttlekit-server --config server.yaml [--listen 127.0.0.1:50051]
//                        [--redis HOST:PORT | --redis-cluster HOST:PORT,...
//                         | --redis-sentinel HOST:PORT,... --redis-master NAME
//                         | --postgres HOST:PORT [--postgres-db NAME]
//                         [--postgres-user NAME]]
//                        [--fleet-secret SECRET] [--monitor-secret SECRET]
//                        [--metrics-listen 127.0.0.1:PORT] [--node-id ID]
//                        [--forward-auth-listen HOST:PORT]
//                        [--xds-server HOST:PORT [--xds-node-id ID]
//                         [--xds-tls-ca FILE [--xds-tls-cert FILE
//                         --xds-tls-key FILE]]]
//                        [--tls-cert FILE --tls-key FILE [--tls-client-ca
//                        FILE]] [--reload-interval-ms MS]
//
// --reload-interval-ms: how often the configuration (and the Envoy domain
// files it names) is reread; a change to its `envoy:` block is applied
// without a restart, keeping every count (docs/envoy.md, "Reloading").
// Default 1000; 0 turns it off.
//
// --tls-cert and --tls-key (PEM files) make the gRPC door speak TLS only;
// --tls-client-ca (PEM) also requires every client to present a
// certificate that CA signed (mutual TLS).
//
// --node-id names this server in a distributedConcurrency fleet (unique
// among the live servers on one store; default: host name and pid).
//
// --metrics-listen serves GET /metrics (Prometheus) and GET /healthz on a
// loopback HTTP port (port 0 picks one; the second stdout line names it).
//
// --xds-server takes the Envoy domains from a control plane over xDS
// (RateLimitConfig resources, state of the world; docs/gateways.md) as
// node --xds-node-id (default: --node-id, else the host name and pid);
// CONFIG_TYPE=GRPC_XDS_SOTW with CONFIG_GRPC_XDS_SERVER_URL and
// CONFIG_GRPC_XDS_NODE_ID in the environment say the same, as Envoy
// Gateway starts the reference service (--config may then be left out:
// the server starts with no domains). --xds-tls-ca (PEM; or
// CONFIG_GRPC_XDS_SERVER_USE_TLS=true with CONFIG_GRPC_XDS_SERVER_TLS_CACERT)
// speaks TLS to the control plane, trusting that CA; --xds-tls-cert and
// --xds-tls-key (CONFIG_GRPC_XDS_CLIENT_TLS_CERT and _KEY) present a
// client certificate (mutual TLS). The configuration file is then
// not reread (--reload-interval-ms is ignored): the control plane's sets
// are the domains.
//
// --forward-auth-listen serves the `forwardAuth:` block's routes over HTTP
// for nginx's auth_request, Caddy's forward_auth, Traefik's ForwardAuth
// and Envoy's ext_authz (docs/gateways.md; port 0 picks one, a stdout line
// names it).
//
// The fleet door (Fleet.Reserve) answers loopback callers only unless a
// secret is given (--fleet-secret, or THROTTLEKIT_FLEET_SECRET in the
// environment, which keeps it out of `ps`); callers then send it as
// `x-fleet-secret` metadata.
//
// --redis-cluster names nodes of a Redis Cluster (comma-separated; any of
// them, the slot map is read from the first that answers): each policy's
// keys go to the primary serving their slot (docs/redis.md, "Redis
// Cluster").
//
// --redis-sentinel names the sentinels (comma-separated) watching the
// primary --redis-master names: the primary is found through them and
// followed through every failover they run (docs/redis.md, "Redis
// Sentinel").
//
// Started without arguments it reads the reference rate-limit service's
// environment instead, as Envoy Gateway starts the reference
// (`/bin/ratelimit`): GRPC_HOST/GRPC_PORT and its TLS, the health check on
// HOST:PORT (/healthcheck), USE_PROMETHEUS with PROMETHEUS_ADDR and _PATH,
// REDIS_URL with REDIS_TYPE and REDIS_AUTH, CONFIG_TYPE=GRPC_XDS_SOTW and
// its CONFIG_GRPC_XDS_* (reference_env.h says which it honours, notes or
// refuses; docs/gateways.md, "Envoy Gateway").
//
// Without --redis or --postgres the policies live in the embedded memory
// store (one process). SIGINT or SIGTERM stops it: RPCs in flight finish,
// new ones are refused. Exit status: 0 after a signal, 2 for bad arguments
// or configuration (the message names the problem), 1 when it cannot
// start (a store that does not answer, a port in use).

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "config.h"
#include "config_watcher.h"
#include "file_text.h"
#include "policies.h"
#include "reference_env.h"
#include "server.h"
#include "xds_client.h"

#ifdef THROTTLEKIT_SERVER_HTTP
#include "forward_auth_door.h"
#include "http_door.h"
#endif

#ifdef THROTTLEKIT_SERVER_REDIS
#include "throttlekit/federation/redis_region_pool.h"
#include "throttlekit/redis/redis_coordinator.h"
#endif
#ifdef THROTTLEKIT_SERVER_POSTGRES
#include "throttlekit/postgres/postgres_coordinator.h"
#endif

namespace {

struct Args {
  std::string config;
  std::string listen = "127.0.0.1:50051";
  std::string redis;
  std::string redis_cluster;
  std::string redis_sentinel;
  std::string redis_master;
  std::string postgres;
  std::string postgres_db = "postgres";
  std::string postgres_user = "postgres";
  std::string fleet_secret;
  std::string monitor_secret;
  std::string metrics_listen;
  std::string forward_auth_listen;
  std::string xds_server;
  std::string xds_node_id;
  std::string xds_tls_ca;
  std::string xds_tls_cert;
  std::string xds_tls_key;
  std::string node_id;
  // Set by the reference service's environment only (reference_env.h).
  std::string redis_user, redis_password;
  std::string sentinel_user, sentinel_password;
  std::string health_listen;  // GET /healthcheck (and /healthz) anywhere
  std::string metrics_path = "/metrics";
  bool metrics_public = false;  // the metrics door may listen off loopback
  bool healthy_needs_config = false;
  bool headers = false;  // the reference's three rate-limit headers
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  int64_t reload_interval_ms = 1000;
};

constexpr const char* kUsage =
    "usage: throttlekit-server --config FILE [--listen HOST:PORT]\n"
    "       [--redis HOST:PORT | --redis-cluster HOST:PORT[,HOST:PORT...]\n"
    "        | --redis-sentinel HOST:PORT[,HOST:PORT...] --redis-master NAME\n"
    "        | --postgres HOST:PORT [--postgres-db NAME]\n"
    "        [--postgres-user NAME]] [--fleet-secret SECRET]\n"
    "       [--monitor-secret SECRET] [--metrics-listen 127.0.0.1:PORT]\n"
    "       [--node-id ID] [--tls-cert FILE --tls-key FILE\n"
    "        [--tls-client-ca FILE]] [--reload-interval-ms MS]\n"
    "       [--forward-auth-listen HOST:PORT]\n"
    "       [--xds-server HOST:PORT [--xds-node-id ID] [--xds-tls-ca FILE\n"
    "        [--xds-tls-cert FILE --xds-tls-key FILE]]]\n"
    "   or: throttlekit-server   (no arguments: the reference service's\n"
    "       environment, as Envoy Gateway sets it; docs/gateways.md)\n";

int usage(const std::string& problem) {
  std::fprintf(stderr, "throttlekit-server: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

// Splits HOST:PORT; false if it is not that.
bool host_port(const std::string& s, std::string& host, int& port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = s.substr(0, colon);
  return absl::SimpleAtoi(s.substr(colon + 1), &port) && port > 0 &&
         port < 65536;
}

// Started without arguments, as Envoy Gateway starts the reference service:
// the settings come from the reference's environment variables
// (reference_env.h); an exit status when the process must stop.
std::optional<int> from_reference_env(Args& args) {
  absl::StatusOr<throttlekit::server::ReferenceEnv> env =
      throttlekit::server::read_reference_env(
          [](const char* name) { return std::getenv(name); });
  if (!env.ok()) {
    return usage(absl::StrCat(
        "started without arguments, the reference service's environment is "
        "read (docs/gateways.md, \"Envoy Gateway\"): ",
        env.status().message()));
  }
  // Notes are warnings: LOG_LEVEL error and above leaves them out.
  if (env->log_level != "error" && env->log_level != "fatal" &&
      env->log_level != "panic") {
    for (const std::string& note : env->notes) {
      std::fprintf(stderr, "throttlekit-server: note: %s\n", note.c_str());
    }
  }
  args.listen = env->grpc_listen;
  args.tls_cert = env->tls_cert;
  args.tls_key = env->tls_key;
  args.tls_client_ca = env->tls_client_ca;
  args.health_listen = env->health_listen;
  args.healthy_needs_config = env->healthy_needs_config;
  args.metrics_listen = env->metrics_listen;
  args.metrics_path = env->metrics_path;
  args.metrics_public = true;
  args.redis = env->redis;
  args.redis_cluster = env->redis_cluster;
  args.redis_sentinel = env->redis_sentinel;
  args.redis_master = env->redis_master;
  args.redis_user = env->redis_user;
  args.redis_password = env->redis_password;
  args.sentinel_user = env->sentinel_user;
  args.sentinel_password = env->sentinel_password;
  args.xds_server = env->xds_server;
  args.xds_node_id = env->xds_node_id;
  args.xds_tls_ca = env->xds_tls_ca;
  args.xds_tls_cert = env->xds_tls_cert;
  args.xds_tls_key = env->xds_tls_key;
  args.headers = env->headers;
  return std::nullopt;
}

// Splits a listening HOST:PORT (port 0 picks one); false if it is not that.
bool listen_address(const std::string& s, std::string& host, int& port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = s.substr(0, colon);
  return absl::SimpleAtoi(s.substr(colon + 1), &port) && port >= 0 &&
         port < 65536;
}

// Reads the flags into `args`; an exit status when the process must stop
// (--help, or a flag without its value, unknown or out of range).
std::optional<int> parse_flags(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return usage(std::string(flag) + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--config") {
      args.config = value;
    } else if (flag == "--listen") {
      args.listen = value;
    } else if (flag == "--redis") {
      args.redis = value;
    } else if (flag == "--redis-cluster") {
      args.redis_cluster = value;
    } else if (flag == "--redis-sentinel") {
      args.redis_sentinel = value;
    } else if (flag == "--redis-master") {
      args.redis_master = value;
    } else if (flag == "--postgres") {
      args.postgres = value;
    } else if (flag == "--postgres-db") {
      args.postgres_db = value;
    } else if (flag == "--postgres-user") {
      args.postgres_user = value;
    } else if (flag == "--fleet-secret") {
      args.fleet_secret = value;
    } else if (flag == "--monitor-secret") {
      args.monitor_secret = value;
    } else if (flag == "--node-id") {
      if (value.empty() || value.size() > 256) {
        return usage("--node-id must be 1 .. 256 bytes");
      }
      args.node_id = value;
    } else if (flag == "--tls-cert") {
      args.tls_cert = value;
    } else if (flag == "--tls-key") {
      args.tls_key = value;
    } else if (flag == "--tls-client-ca") {
      args.tls_client_ca = value;
    } else if (flag == "--metrics-listen") {
      args.metrics_listen = value;
    } else if (flag == "--forward-auth-listen") {
      args.forward_auth_listen = value;
    } else if (flag == "--xds-server") {
      args.xds_server = value;
    } else if (flag == "--xds-tls-ca") {
      args.xds_tls_ca = value;
    } else if (flag == "--xds-tls-cert") {
      args.xds_tls_cert = value;
    } else if (flag == "--xds-tls-key") {
      args.xds_tls_key = value;
    } else if (flag == "--xds-node-id") {
      if (value.empty() || value.size() > 256) {
        return usage("--xds-node-id must be 1 .. 256 bytes");
      }
      args.xds_node_id = value;
    } else if (flag == "--reload-interval-ms") {
      if (!absl::SimpleAtoi(value, &args.reload_interval_ms) ||
          args.reload_interval_ms < 0 || args.reload_interval_ms > 86'400'000) {
        return usage("--reload-interval-ms wants 0 .. 86400000; got " + value);
      }
    } else {
      return usage("unknown flag " + std::string(flag));
    }
  }
  return std::nullopt;
}

// What the flags name, read and checked: the TLS files' contents and the
// HTTP door's address (port -1: no door).
struct Checked {
  std::string tls_cert, tls_key, tls_client_ca;
  // The control plane's CA and this server's certificate and key (empty:
  // plaintext, no client certificate).
  std::string xds_ca, xds_cert, xds_key;
  std::string metrics_host;
  int metrics_port = -1;
  std::string health_host;
  int health_port = -1;  // -1: no health door
  std::string forward_auth_host;
  int forward_auth_port = -1;  // -1: no forward-auth door
};

// Reads each named file (a path, and where its bytes go; an empty path is
// skipped); exit status 2, naming the file, when one cannot be read or is
// empty.
std::optional<int> read_files(
    std::initializer_list<std::pair<const std::string*, std::string*>> files) {
  for (const auto& [path, into] : files) {
    if (path->empty()) continue;
    std::optional<std::string> text =
        throttlekit::server::read_file_text(*path);
    if (!text.has_value() || text->empty()) {
      std::fprintf(stderr, "throttlekit-server: cannot read %s\n",
                   path->c_str());
      return 2;
    }
    *into = *std::move(text);
  }
  return std::nullopt;
}

// Checks the flags together, reads the files they name and takes the
// secrets the environment gives; an exit status when the process must
// stop.
std::optional<int> check_flags(Args& args, Checked& ready) {
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    return usage("--tls-cert and --tls-key go together");
  }
  if (!args.tls_client_ca.empty() && args.tls_cert.empty()) {
    return usage("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (std::optional<int> rc =
          read_files({{&args.tls_cert, &ready.tls_cert},
                      {&args.tls_key, &ready.tls_key},
                      {&args.tls_client_ca, &ready.tls_client_ca}})) {
    return rc;
  }
  if (const char* env = std::getenv("THROTTLEKIT_FLEET_SECRET");
      args.fleet_secret.empty() && env != nullptr) {
    args.fleet_secret = env;
  }
  if (const char* env = std::getenv("THROTTLEKIT_MONITOR_SECRET");
      args.monitor_secret.empty() && env != nullptr) {
    args.monitor_secret = env;
  }
  // The HTTP doors' addresses (port 0 picks one).
  for (const auto& [listen, what, host, port] :
       {std::tuple(&args.metrics_listen, "--metrics-listen",
                   &ready.metrics_host, &ready.metrics_port),
        std::tuple(&args.health_listen, "HOST and PORT", &ready.health_host,
                   &ready.health_port),
        std::tuple(&args.forward_auth_listen, "--forward-auth-listen",
                   &ready.forward_auth_host, &ready.forward_auth_port)}) {
    if (listen->empty()) continue;
#ifndef THROTTLEKIT_SERVER_HTTP
    return usage("this build has no HTTP door (cpp-httplib was not found)");
#endif
    if (!listen_address(*listen, *host, *port)) {
      return usage(std::string(what) + " wants HOST:PORT; got " + *listen);
    }
  }
  // Envoy Gateway's way of saying --xds-server and --xds-node-id.
  if (const char* type = std::getenv("CONFIG_TYPE");
      args.xds_server.empty() && type != nullptr &&
      std::string_view(type) == "GRPC_XDS_SOTW") {
    const char* url = std::getenv("CONFIG_GRPC_XDS_SERVER_URL");
    if (url == nullptr || *url == '\0') {
      return usage(
          "CONFIG_TYPE=GRPC_XDS_SOTW needs CONFIG_GRPC_XDS_SERVER_URL (the "
          "control plane's HOST:PORT)");
    }
    args.xds_server = url;
    if (const char* node = std::getenv("CONFIG_GRPC_XDS_NODE_ID");
        args.xds_node_id.empty() && node != nullptr && *node != '\0') {
      args.xds_node_id = node;
    }
  }
  if (const char* tls = std::getenv("CONFIG_GRPC_XDS_SERVER_USE_TLS");
      tls != nullptr && std::string_view(tls) == "true") {
    const auto env_or = [](std::string& into, const char* name) {
      if (const char* v = std::getenv(name); into.empty() && v != nullptr) {
        into = v;
      }
    };
    env_or(args.xds_tls_ca, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT");
    env_or(args.xds_tls_cert, "CONFIG_GRPC_XDS_CLIENT_TLS_CERT");
    env_or(args.xds_tls_key, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY");
    if (args.xds_tls_ca.empty()) {
      return usage(
          "CONFIG_GRPC_XDS_SERVER_USE_TLS=true needs "
          "CONFIG_GRPC_XDS_SERVER_TLS_CACERT (the control plane's CA)");
    }
  }
  if (!args.xds_node_id.empty() && args.xds_server.empty()) {
    return usage("--xds-node-id goes with --xds-server");
  }
  if (!args.xds_tls_ca.empty() && args.xds_server.empty()) {
    return usage("--xds-tls-ca goes with --xds-server");
  }
  if (args.xds_tls_cert.empty() != args.xds_tls_key.empty()) {
    return usage("--xds-tls-cert and --xds-tls-key go together");
  }
  if (!args.xds_tls_cert.empty() && args.xds_tls_ca.empty()) {
    return usage("--xds-tls-cert needs --xds-tls-ca");
  }
  if (std::optional<int> rc =
          read_files({{&args.xds_tls_ca, &ready.xds_ca},
                      {&args.xds_tls_cert, &ready.xds_cert},
                      {&args.xds_tls_key, &ready.xds_key}})) {
    return rc;
  }
  if (args.config.empty() && args.xds_server.empty()) {
    return usage(
        "--config is required (or --xds-server: the domains from "
        "a control plane)");
  }
  if (!args.redis.empty() + !args.redis_cluster.empty() +
          !args.redis_sentinel.empty() + !args.postgres.empty() >
      1) {
    return usage(
        "give one store: --redis, --redis-cluster, --redis-sentinel or "
        "--postgres, not two");
  }
  if (args.redis_sentinel.empty() != args.redis_master.empty()) {
    return usage(
        "--redis-sentinel and --redis-master go together (the sentinels and "
        "the name of the primary they watch)");
  }
  return std::nullopt;
}

// Opens the store the flags name into `store` (left null for the embedded
// memory store) and gives `context` what runs beside it; an exit status
// when the process must stop.
std::optional<int> open_store(const Args& args,
                              std::shared_ptr<throttlekit::Coordinator>& store,
                              throttlekit::server::PolicyContext& context) {
  std::string host;
  int port = 0;
  if (!args.redis.empty() || !args.redis_cluster.empty() ||
      !args.redis_sentinel.empty()) {
    // One server (--redis), a cluster's seed nodes (--redis-cluster) or
    // the sentinels of a primary (--redis-sentinel).
    // CheckMany over a strict limit passes one read of the store's clock
    // to every key of its batch: the default `ttl_slack_ms` (a minute,
    // core/ttl_slack.h) keeps a window's state alive past any batch's
    // duration, so a late key never revives an ended window.
    throttlekit::RedisCoordinatorOptions o;
    const bool single = !args.redis.empty();
    const bool cluster = !args.redis_cluster.empty();
    const char* flag = single    ? "--redis"
                       : cluster ? "--redis-cluster"
                                 : "--redis-sentinel";
    const std::string& where = single    ? args.redis
                               : cluster ? args.redis_cluster
                                         : args.redis_sentinel;
    if (single) {
      if (!host_port(args.redis, host, port)) {
        return usage("--redis wants HOST:PORT; got " + args.redis);
      }
      o.host = host;
      o.port = port;
    } else {
      const std::vector<std::string> nodes = absl::StrSplit(where, ',');
      for (const std::string& node : nodes) {
        int node_port = 0;
        std::string node_host;
        if (!host_port(node, node_host, node_port)) {
          return usage(std::string(flag) +
                       " wants HOST:PORT[,HOST:PORT...]; got " + where);
        }
        (cluster ? o.cluster_seeds : o.sentinels).emplace_back(node);
      }
      o.master_name = args.redis_master;
    }
    o.username = args.redis_user;
    o.password = args.redis_password;
    o.sentinel_username = args.sentinel_user;
    o.sentinel_password = args.sentinel_password;
#ifdef THROTTLEKIT_SERVER_REDIS
    auto c = throttlekit::RedisCoordinator::create(o);
    if (!c.ok()) {
      std::fprintf(stderr, "throttlekit-server: %s %s: %s\n", flag,
                   where.c_str(), std::string(c.status().message()).c_str());
      return 1;
    }
    std::shared_ptr<throttlekit::RedisCoordinator> redis = *std::move(c);
    // A fair escrow's region pool runs on the same coordinator, so it goes
    // wherever the store goes (one server, the cluster, the Sentinel
    // primary).
    context.region_pool =
        [redis]() -> absl::StatusOr<std::shared_ptr<throttlekit::RegionPool>> {
      auto pool = throttlekit::RedisRegionPool::create({.coordinator = redis});
      if (!pool.ok()) return pool.status();
      return std::shared_ptr<throttlekit::RegionPool>(*std::move(pool));
    };
    store = redis;
#else
    (void)where;
    (void)flag;
    (void)single;
    return usage("this build has no Redis backend (hiredis was not found)");
#endif
  } else if (!args.postgres.empty()) {
    if (!host_port(args.postgres, host, port)) {
      return usage("--postgres wants HOST:PORT; got " + args.postgres);
    }
#ifdef THROTTLEKIT_SERVER_POSTGRES
    throttlekit::PostgresCoordinatorOptions o;
    o.host = host;
    o.port = port;
    o.dbname = args.postgres_db;
    o.user = args.postgres_user;
    auto c = throttlekit::PostgresCoordinator::create(o);
    if (!c.ok()) {
      std::fprintf(stderr, "throttlekit-server: postgres %s: %s\n",
                   args.postgres.c_str(),
                   std::string(c.status().message()).c_str());
      return 1;
    }
    store = std::shared_ptr<throttlekit::Coordinator>(*std::move(c));
#else
    return usage("this build has no Postgres backend (libpqxx was not found)");
#endif
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  // SIGINT and SIGTERM are blocked before any thread exists (gRPC's, the
  // store's, the server's workers all inherit the mask) and taken by one
  // thread with sigwait, which stops the server; one sent during start-up
  // waits for it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  Args args;
  if (std::optional<int> rc = argc == 1 ? from_reference_env(args)
                                        : parse_flags(argc, argv, args)) {
    return *rc;
  }
  Checked ready;
  if (std::optional<int> rc = check_flags(args, ready)) return *rc;
  // With xDS and no file: no policies, and no Envoy domains until the
  // control plane's first set (requests until then are NOT_FOUND).
  absl::StatusOr<throttlekit::server::ServerConfig> config =
      args.config.empty() ? throttlekit::server::ServerConfig{}
                          : throttlekit::server::load_config(args.config);
  if (!config.ok()) {
    std::fprintf(stderr, "throttlekit-server: %s\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  if (args.headers)
    config->envoy.headers = throttlekit::RateLimitStyle::kDraft06;

  std::shared_ptr<throttlekit::Coordinator> store;
  throttlekit::server::PolicyContext context{.node_id = args.node_id};
  if (std::optional<int> rc = open_store(args, store, context)) return *rc;

  if (store != nullptr) {
    if (absl::Status s = store->ping(); !s.ok()) {
      std::fprintf(stderr,
                   "throttlekit-server: the %s store does not answer: %s\n",
                   std::string(store->backend()).c_str(),
                   std::string(s.message()).c_str());
      return 1;
    }
  }
  auto policies = throttlekit::server::Policies::create(*config, store, {},
                                                        std::move(context));
  if (!policies.ok()) {
    std::fprintf(stderr, "throttlekit-server: %s: %s\n", args.config.c_str(),
                 std::string(policies.status().message()).c_str());
    return 2;
  }

  auto server = throttlekit::server::Server::start(
      *std::move(policies), {.listen = args.listen,
                             .fleet_secret = args.fleet_secret,
                             .monitor_secret = args.monitor_secret,
                             .tls_cert_chain = std::move(ready.tls_cert),
                             .tls_private_key = std::move(ready.tls_key),
                             .tls_client_ca = std::move(ready.tls_client_ca)});
  if (!server.ok()) {
    std::fprintf(stderr, "throttlekit-server: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf(
      "throttlekit-server: listening on port %d, store %s, %zu "
      "policies\n",
      (*server)->port(),
      std::string((*server)->policies().store_name()).c_str(),
      (*server)->policies().all().size());
  std::fflush(stdout);
#ifdef THROTTLEKIT_SERVER_HTTP
  std::unique_ptr<throttlekit::server::HttpDoor> http;
  if (ready.metrics_port >= 0) {
    auto door = throttlekit::server::HttpDoor::start(
        {.host = ready.metrics_host,
         .port = ready.metrics_port,
         .metrics_path = args.metrics_path,
         .loopback_only = !args.metrics_public},
        **server);
    if (!door.ok()) {
      std::fprintf(stderr, "throttlekit-server: %s\n",
                   std::string(door.status().message()).c_str());
      return 1;
    }
    http = *std::move(door);
    std::printf("throttlekit-server: metrics on http://%s:%d%s\n",
                ready.metrics_host.c_str(), http->port(),
                args.metrics_path.c_str());
    std::fflush(stdout);
  }
  // The reference's health check, where its HOST and PORT say.
  std::unique_ptr<throttlekit::server::HttpDoor> health;
  if (ready.health_port >= 0) {
    auto door = throttlekit::server::HttpDoor::start(
        {.host = ready.health_host,
         .port = ready.health_port,
         .metrics_path = "",
         .healthcheck = true,
         .healthy_needs_config = args.healthy_needs_config,
         .loopback_only = false},
        **server);
    if (!door.ok()) {
      std::fprintf(stderr, "throttlekit-server: %s\n",
                   std::string(door.status().message()).c_str());
      return 1;
    }
    health = *std::move(door);
    std::printf(
        "throttlekit-server: health check on http://%s:%d/healthcheck\n",
        ready.health_host.c_str(), health->port());
    std::fflush(stdout);
  }
  // The routes reload with the configuration (the watcher below).
  std::unique_ptr<throttlekit::server::ForwardAuthDoor> forward_auth;
  if (ready.forward_auth_port >= 0) {
    auto door = throttlekit::server::ForwardAuthDoor::start(
        ready.forward_auth_host, ready.forward_auth_port, **server,
        config->forward_auth);
    if (!door.ok()) {
      std::fprintf(stderr, "throttlekit-server: %s\n",
                   std::string(door.status().message()).c_str());
      return 1;
    }
    forward_auth = *std::move(door);
    std::printf("throttlekit-server: forward auth on http://%s:%d\n",
                ready.forward_auth_host.c_str(), forward_auth->port());
    std::fflush(stdout);
  }
#endif

  std::unique_ptr<throttlekit::server::XdsClient> xds;
  if (!args.xds_server.empty()) {
    std::string node = !args.xds_node_id.empty()
                           ? args.xds_node_id
                           : (*server)->policies().node_id();
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    if (!ready.xds_ca.empty()) {
      credentials = grpc::SslCredentials({.pem_root_certs = ready.xds_ca,
                                          .pem_private_key = ready.xds_key,
                                          .pem_cert_chain = ready.xds_cert});
    }
    auto x = throttlekit::server::XdsClient::start(
        {.server = args.xds_server,
         .node_id = std::move(node),
         .credentials = std::move(credentials)},
        (*server)->policies());
    if (!x.ok()) {
      std::fprintf(stderr, "throttlekit-server: %s\n",
                   std::string(x.status().message()).c_str());
      return 1;
    }
    xds = *std::move(x);
    std::printf("throttlekit-server: Envoy domains from xDS at %s\n",
                args.xds_server.c_str());
    std::fflush(stdout);
  }

  throttlekit::server::ForwardAuthRoutes* forward_auth_routes = nullptr;
#ifdef THROTTLEKIT_SERVER_HTTP
  if (forward_auth != nullptr) forward_auth_routes = &forward_auth->routes();
#endif
  std::unique_ptr<throttlekit::server::ConfigWatcher> watcher;
  if (args.reload_interval_ms > 0 && xds == nullptr) {
    auto w = throttlekit::server::ConfigWatcher::start(
        args.config, (*server)->policies(),
        {.interval_ms = args.reload_interval_ms}, &(*server)->quota_door(),
        forward_auth_routes);
    if (!w.ok()) {
      std::fprintf(stderr, "throttlekit-server: %s\n",
                   std::string(w.status().message()).c_str());
      return 1;
    }
    watcher = *std::move(w);
  }

  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    (*server)->shutdown();
  });
  (*server)->wait();
  stopper.join();
  watcher.reset();
  xds.reset();
  return 0;
}
