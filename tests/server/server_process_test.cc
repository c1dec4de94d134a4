// The throttlekit-server binary as users run it (src/server/main.cc): it
// loads a configuration file, listens on loopback, serves a real client,
// reclaims the Admit slots of a client process killed with SIGKILL once
// their lease expires, refuses a bad configuration naming the file and the
// path, exits 0 on SIGTERM, and serves from a Redis Cluster
// (--redis-cluster). Real clock, real processes.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "support/child_process.h"
#include "support/test_certs.h"

// gRPC is initialised only after every fork (a forked gRPC process is not
// safe), so its headers are used in functions the parent calls late.
#include <grpcpp/grpcpp.h>

#ifdef THROTTLEKIT_SERVER_HTTP
#include "httplib.h"
#endif

#include "throttlekit/v1/throttlekit.grpc.pb.h"

namespace server_process_test {
namespace {

namespace v1 = ::throttlekit::v1;

using throttlekit::testing::Child;
using throttlekit::testing::exit_status;
using throttlekit::testing::port_after;
using throttlekit::testing::read_all;
using throttlekit::testing::read_line;
using throttlekit::testing::temp_file;

Child spawn_server(const std::vector<std::string>& args) {
  return throttlekit::testing::spawn(THROTTLEKIT_SERVER_BINARY, args);
}

// The server run with `args` refuses them: it exits 2, saying `says` on
// stderr (when given).
void expect_exits_two(const std::vector<std::string>& args,
                      const std::string& says = "") {
  Child server = spawn_server(args);
  EXPECT_EQ(exit_status(server.pid), 2) << says;
  if (!says.empty()) {
    EXPECT_NE(read_all(server.err).find(says), std::string::npos) << says;
  }
}

bool admit(v1::RateLimiter::Stub& stub, v1::AdmitResponse* resp) {
  v1::AdmitRequest req;
  req.set_policy("checkout");
  req.set_key("k");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  const grpc::Status s = stub.Admit(&ctx, req, resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return s.ok() && resp->decision().allowed();
}

// Every test closes its channels before it sends SIGTERM. gRPC's graceful
// shutdown waits for each connected client to acknowledge it, and a
// synchronous client with no call in flight does not read its connection:
// one idle channel held open made each SIGTERM take 5 s (measured).
std::unique_ptr<v1::RateLimiter::Stub> connect(int port) {
  return v1::RateLimiter::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
}

TEST(ServerProcess, AKilledClientsSlotsAreReclaimedAtExpiry) {
  const std::string config = temp_file("server.yaml", R"(
version: 1
leaseTtl: 2s
limiters:
  checkout:
    admission:
      concurrency: {maxInflight: 3}
)");
  Child server = spawn_server({"--config", config, "--listen", "127.0.0.1:0"});
  const int port = port_after(read_line(server.out), "listening on port ");
  ASSERT_GT(port, 0);

  // The client to be killed: takes every slot, says so, then hangs.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t client = fork();
  ASSERT_GE(client, 0);
  if (client == 0) {
    close(ready[0]);
    auto stub = connect(port);
    int held = 0;
    for (int i = 0; i < 3; ++i) {
      v1::AdmitResponse resp;
      held += admit(*stub, &resp) ? 1 : 0;
    }
    const char byte = static_cast<char>('0' + held);
    if (write(ready[1], &byte, 1) != 1) _exit(3);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char held = 0;
  ASSERT_EQ(read(ready[0], &held, 1), 1);
  ASSERT_EQ(held, '3');

  // Gone without a Release: its slots stay held until the lease expires.
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(client, SIGKILL), 0);
  exit_status(client);
  auto stub = connect(port);
  v1::AdmitResponse resp;
  EXPECT_FALSE(admit(*stub, &resp));
  EXPECT_EQ(resp.binding_axis(), "concurrency");
  bool reclaimed = false;
  while (std::chrono::steady_clock::now() - killed_at <
         std::chrono::seconds(10)) {
    v1::AdmitResponse r;
    if (admit(*stub, &r)) {
      reclaimed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(reclaimed);

  stub.reset();  // before SIGTERM: see connect()
  ASSERT_EQ(kill(server.pid, SIGTERM), 0);
  EXPECT_EQ(exit_status(server.pid), 0);
}

#ifdef THROTTLEKIT_SERVER_HTTP
TEST(ServerProcess, MetricsAndHealthOverHttp) {
  const std::string config = temp_file("metrics.yaml", R"(
version: 1
limiters:
  api: {strategy: fixedWindow, limit: 2, period: 1h}
)");
  Child server = spawn_server({"--config", config, "--listen", "127.0.0.1:0",
                               "--metrics-listen", "127.0.0.1:0"});
  const int port = port_after(read_line(server.out), "listening on port ");
  const int metrics_port =
      port_after(read_line(server.out), "metrics on http://127.0.0.1:");
  ASSERT_GT(port, 0);
  ASSERT_GT(metrics_port, 0);
  auto stub = connect(port);
  for (int i = 0; i < 3; ++i) {
    v1::CheckRequest req;
    req.set_policy("api");
    req.set_key("k");
    v1::CheckResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->Check(&ctx, req, &resp).ok());
  }
  httplib::Client http("127.0.0.1", metrics_port);
  httplib::Result metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->get_header_value("Content-Type").find("version=0.0.4"),
            std::string::npos);
  EXPECT_NE(metrics->body.find(
                "throttlekit_checks_total{policy=\"api\",allowed=\"true\"} 2"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find(
                "throttlekit_checks_total{policy=\"api\",allowed=\"false\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("throttlekit_store_up 1"), std::string::npos);
  httplib::Result health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  stub.reset();  // before SIGTERM: see connect()
  ASSERT_EQ(kill(server.pid, SIGTERM), 0);
  EXPECT_EQ(exit_status(server.pid), 0);

  // Off loopback, refused at start.
  Child exposed = spawn_server({"--config", config, "--listen", "127.0.0.1:0",
                                "--metrics-listen", "0.0.0.0:0"});
  read_line(exposed.out);
  const std::string err = read_all(exposed.err);
  EXPECT_EQ(exit_status(exposed.pid), 1);
  EXPECT_NE(err.find("loopback only"), std::string::npos) << err;
}
#endif

// --tls-cert / --tls-key: the binary serves TLS only; a client trusting
// its certificate is served, a plaintext one is not. Unreadable files and
// half a pair exit 2.
TEST(ServerProcess, ServesTlsFromPemFiles) {
  const throttlekit::testing::Pem pem =
      throttlekit::testing::self_signed("server");
  ASSERT_FALSE(pem.cert.empty()) << "the openssl command is needed";
  const std::string cert = temp_file("tls.crt", pem.cert);
  const std::string key = temp_file("tls.key", pem.key);
  const std::string config = temp_file("tls.yaml", R"(
version: 1
limiters:
  checkout:
    admission:
      concurrency: {maxInflight: 1}
)");
  Child server = spawn_server({"--config", config, "--listen", "127.0.0.1:0",
                               "--tls-cert", cert, "--tls-key", key});
  const int port = port_after(read_line(server.out), "listening on port ");
  ASSERT_GT(port, 0);
  grpc::SslCredentialsOptions trust;
  trust.pem_root_certs = pem.cert;
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto tls = v1::RateLimiter::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port), grpc::SslCredentials(trust), args));
  v1::AdmitResponse resp;
  EXPECT_TRUE(admit(*tls, &resp));
  {
    auto plain = connect(port);
    v1::AdmitRequest req;
    req.set_policy("checkout");
    req.set_key("k");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    EXPECT_EQ(plain->Admit(&ctx, req, &resp).error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }
  tls.reset();  // before SIGTERM: see connect()
  kill(server.pid, SIGTERM);
  EXPECT_EQ(exit_status(server.pid), 0);

  expect_exits_two({"--config", config, "--tls-cert", cert},
                   "--tls-cert and --tls-key go together");
  Child missing = spawn_server({"--config", config, "--tls-cert",
                                "/nonexistent/cert.pem", "--tls-key", key});
  const std::string err = read_all(missing.err);
  EXPECT_EQ(exit_status(missing.pid), 2);
  EXPECT_NE(err.find("cannot read /nonexistent/cert.pem"), std::string::npos)
      << err;
}

TEST(ServerProcess, ABadConfigurationExitsTwoNamingFileAndPath) {
  const std::string config = temp_file("bad.yaml", R"(
version: 1
limiters:
  api: {strategy: gcra, limit: -3, period: 1s}
)");
  Child server = spawn_server({"--config", config});
  const std::string err = read_all(server.err);
  EXPECT_EQ(exit_status(server.pid), 2);
  EXPECT_NE(err.find(config), std::string::npos) << err;
  EXPECT_NE(err.find("limiters.api.limit"), std::string::npos) << err;
}

// --redis-cluster: the policies' keys live on the cluster the test command
// starts (the `redis_cluster` fixture), each on its slot's primary.
// One policy "api" admitting 3 per hour per key.
constexpr const char* kApiLimitThree = R"(
version: 1
limiters:
  api: {strategy: gcra, limit: 3, period: 1h}
)";

// The first port of a server fixture, from the environment ctest sets (0
// when unset).
int fixture_port(const char* variable) {
  const char* v = std::getenv(variable);
  return v == nullptr ? 0 : std::atoi(v);
}

// Five checks of `key` under `policy`: how many were allowed (-1 when one
// failed).
int allowed_of_five(v1::RateLimiter::Stub& stub, const std::string& key,
                    const std::string& policy = "api") {
  int allowed = 0;
  for (int i = 0; i < 5; ++i) {
    v1::CheckRequest req;
    req.set_policy(policy);
    req.set_key(key);
    v1::CheckResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    const grpc::Status s = stub.Check(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok()) return -1;
    allowed += resp.decision().allowed();
  }
  return allowed;
}

TEST(ServerProcess, ServesFromARedisCluster) {
  const int first = fixture_port("THROTTLEKIT_REDIS_CLUSTER_PORT");
  ASSERT_GT(first, 0);
  // And a federated fair escrow, whose region pool runs on the cluster
  // too: its one tenant gets the whole budget of 4, no more.
  const std::string fair = absl::StrCat("fair", getpid());
  const std::string config = temp_file(
      "cluster.yaml",
      absl::StrCat(kApiLimitThree, "  ", fair,
                   ":\n    federatedFairEscrow: {limit: 4, period: 1h, "
                   "quantum: 1, region: eu, tenants: [{name: acme}]}\n"));
  Child server = spawn_server(
      {"--config", config, "--listen", "127.0.0.1:0", "--redis-cluster",
       absl::StrCat("127.0.0.1:", first, ",127.0.0.1:", first + 1)});
  const int port = port_after(read_line(server.out), "listening on port ");
  ASSERT_GT(port, 0);
  auto stub = connect(port);
  // Keys on different slots; each admits exactly the limit.
  for (const std::string& key :
       {absl::StrCat("a:", getpid()), absl::StrCat("b:", getpid()),
        absl::StrCat("c:", getpid())}) {
    EXPECT_EQ(allowed_of_five(*stub, key), 3) << key;
  }
  EXPECT_EQ(allowed_of_five(*stub, "acme", fair), 4);
  stub.reset();  // before SIGTERM: see connect()
  kill(server.pid, SIGTERM);
  EXPECT_EQ(exit_status(server.pid), 0);

  expect_exits_two({"--config", config, "--redis-cluster", "nohost"},
                   "--redis-cluster wants HOST:PORT");
  expect_exits_two({"--config", config, "--redis", "127.0.0.1:1",
                    "--redis-cluster", "127.0.0.1:2"});
}

// --redis-sentinel: the primary found through the sentinels serves each
// policy; the flag without --redis-master (or a bad address) exits 2.
TEST(ServerProcess, ServesFromASentinelGuardedPrimary) {
  const int first = fixture_port("THROTTLEKIT_REDIS_SENTINEL_PORT");
  ASSERT_GT(first, 0);
  const std::string config = temp_file("sentinel.yaml", kApiLimitThree);
  Child server = spawn_server(
      {"--config", config, "--listen", "127.0.0.1:0", "--redis-sentinel",
       absl::StrCat("127.0.0.1:", first + 2, ",127.0.0.1:", first + 3),
       "--redis-master", "tk"});
  const int port = port_after(read_line(server.out), "listening on port ");
  ASSERT_GT(port, 0);
  auto stub = connect(port);
  EXPECT_EQ(allowed_of_five(*stub, absl::StrCat("sentinel:", getpid())), 3);
  stub.reset();  // before SIGTERM: see connect()
  kill(server.pid, SIGTERM);
  EXPECT_EQ(exit_status(server.pid), 0);

  expect_exits_two({"--config", config, "--redis-sentinel",
                    absl::StrCat("127.0.0.1:", first + 2)},
                   "--redis-master go together");
  expect_exits_two({"--config", config, "--redis-sentinel", "nohost",
                    "--redis-master", "tk"},
                   "--redis-sentinel wants HOST:PORT");
}

TEST(ServerProcess, BadArgumentsExitTwo) {
  expect_exits_two({"--config"}, "usage");
  expect_exits_two(
      {"--config", "x.yaml", "--redis", "127.0.0.1:1", "--postgres", "h:1"});
}

}  // namespace
}  // namespace server_process_test
