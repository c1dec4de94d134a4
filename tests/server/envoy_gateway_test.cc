// throttlekit-server started the way Envoy Gateway starts the reference
// rate-limit service (docs/gateways.md, "Envoy Gateway"): no arguments, and
// exactly the environment its rate-limit Deployment sets (with a Redis
// backend and Prometheus on; the ports alone made free ones, and the
// addresses its names resolve to made loopback), its certificates in files.
// A control plane of the test's own speaks mutual TLS; Redis is the
// suite's. Before the first set the server is healthy and answers
// UNAVAILABLE; once the set is ACKed its limit holds over TLS, the metrics
// carry the reference's families, and the count is Redis's (the next
// replica started the same way admits nothing more in the window). Started with
// no arguments and a setting it refuses, it exits 2 naming the variable.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"
#include "support/child_process.h"
#include "support/test_certs.h"
#include "xds_control_plane.h"

namespace throttlekit::server {
namespace envoy_gateway_test {
namespace {

namespace rls = ::envoy::service::ratelimit::v3;
namespace conf = ::ratelimit::config::ratelimit::v3;
using testing::Child;
using testing::ControlPlane;

std::string binary() {
  const char* b = std::getenv("THROTTLEKIT_SERVER_BINARY");
  return b == nullptr ? "" : b;
}

// Writes `text` to `dir`/`name`; its path.
std::string write(const std::string& dir, const std::string& name,
                  const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The Deployment's environment (Envoy Gateway's
// internal/infrastructure/kubernetes/ratelimit/resource.go, in the order it
// writes them), with its /certs files at `certs`, the control plane and
// Redis at the given loopback addresses, and the ports free ones.
std::vector<std::string> envoy_gateway_env(const std::string& certs,
                                           const std::string& control_plane,
                                           const std::string& redis) {
  return {
      "RUNTIME_ROOT=/data",
      "RUNTIME_SUBDIRECTORY=ratelimit",
      "RUNTIME_IGNOREDOTFILES=true",
      "RUNTIME_WATCH_ROOT=false",
      "LOG_LEVEL=info",
      "USE_STATSD=false",
      "CONFIG_TYPE=GRPC_XDS_SOTW",
      "CONFIG_GRPC_XDS_SERVER_URL=" + control_plane,
      "CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit",
      "GRPC_SERVER_USE_TLS=true",
      "GRPC_SERVER_TLS_CERT=" + certs + "/tls.crt",
      "GRPC_SERVER_TLS_KEY=" + certs + "/tls.key",
      "GRPC_SERVER_TLS_CA_CERT=" + certs + "/ca.crt",
      "CONFIG_GRPC_XDS_SERVER_USE_TLS=true",
      "CONFIG_GRPC_XDS_CLIENT_TLS_CERT=" + certs + "/tls.crt",
      "CONFIG_GRPC_XDS_CLIENT_TLS_KEY=" + certs + "/tls.key",
      "CONFIG_GRPC_XDS_SERVER_TLS_CACERT=" + certs + "/ca.crt",
      "FORCE_START_WITHOUT_INITIAL_CONFIG=true",
      "REDIS_SOCKET_TYPE=tcp",
      "REDIS_URL=" + redis,
      "USE_PROMETHEUS=true",
      "PROMETHEUS_ADDR=:0",  // Envoy Gateway's is :19001
      "PROMETHEUS_MAPPER_YAML=/etc/statsd-exporter/conf.yaml",
      // Not set by Envoy Gateway (the reference's defaults are 8081 and
      // 8080): free ports, so that two replicas run side by side.
      "GRPC_PORT=0",
      "PORT=0",
  };
}

// A replica as Envoy Gateway starts it, and its ports from its banner.
struct Replica {
  Child child;
  int grpc = 0, metrics = 0, health = 0;
};

Replica start_replica(const std::vector<std::string>& env) {
  Replica r;
  r.child = testing::spawn(binary(), {}, &env);
  // Its banner: the gRPC door, the metrics, the health check, the xDS
  // source, in that order.
  r.grpc = testing::port_after(testing::read_line(r.child.out),
                               "listening on port ");
  r.metrics = testing::port_after(testing::read_line(r.child.out),
                                  "metrics on http://0.0.0.0:");
  r.health = testing::port_after(testing::read_line(r.child.out),
                                 "health check on http://0.0.0.0:");
  EXPECT_TRUE(absl::StrContains(testing::read_line(r.child.out), "xDS"));
  return r;
}

// Envoy Gateway's kind of domain and descriptor: a route rule's match, per
// client header value, `requests` a day.
conf::RateLimitConfig route_limit(uint32_t requests) {
  conf::RateLimitConfig c;
  c.set_name("default/eg/http");
  c.set_domain("default/eg/http");
  auto* rule = c.add_descriptors();
  rule->set_key("httproute/default/backend/rule/0/match/0");
  rule->set_value("httproute/default/backend/rule/0/match/0");
  auto* user = rule->add_descriptors();
  user->set_key("rule-0-match-0");
  user->mutable_rate_limit()->set_unit(conf::DAY);
  user->mutable_rate_limit()->set_requests_per_unit(requests);
  return c;
}

rls::RateLimitRequest route_request(const std::string& user) {
  rls::RateLimitRequest req;
  req.set_domain("default/eg/http");
  auto* d = req.add_descriptors();
  auto* e = d->add_entries();
  e->set_key("httproute/default/backend/rule/0/match/0");
  e->set_value("httproute/default/backend/rule/0/match/0");
  e = d->add_entries();
  e->set_key("rule-0-match-0");
  e->set_value(user);
  return req;
}

grpc::Status ask(rls::RateLimitService::Stub& stub,
                 const rls::RateLimitRequest& req,
                 rls::RateLimitResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return stub.ShouldRateLimit(&ctx, req, resp);
}

// How many of `n` requests of `user` are answered OK.
int admitted_of(rls::RateLimitService::Stub& stub, const std::string& user,
                int n) {
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    rls::RateLimitResponse resp;
    const grpc::Status s = ask(stub, route_request(user), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    ok += s.ok() && resp.overall_code() == rls::RateLimitResponse::OK;
  }
  return ok;
}

TEST(EnvoyGateway, TheServerRunsOnTheEnvironmentEnvoyGatewaySets) {
  ASSERT_FALSE(binary().empty());
  const char* redis_port = std::getenv("THROTTLEKIT_REDIS_PORT");
  ASSERT_NE(redis_port, nullptr) << "the suite's Redis fixture";
  // The Deployment's /certs: one certificate for the gRPC door and the xDS
  // client, and the CA its peers are checked against.
  const testing::Pem pod = testing::self_signed("pod");
  const testing::Pem plane_pem = testing::self_signed("plane");
  ASSERT_FALSE(pod.cert.empty() || plane_pem.cert.empty());
  char dir_template[] = "/tmp/throttlekit-eg.XXXXXX";
  const std::string certs = mkdtemp(dir_template);
  write(certs, "tls.crt", pod.cert);
  write(certs, "tls.key", pod.key);
  write(certs, "ca.crt", plane_pem.cert);

  ControlPlane plane;
  grpc::SslServerCredentialsOptions tls(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  tls.pem_root_certs = pod.cert;
  tls.pem_key_cert_pairs.push_back({plane_pem.key, plane_pem.cert});
  int cp_port = 0;
  std::unique_ptr<grpc::Server> cp =
      testing::serve(plane, grpc::SslServerCredentials(tls), &cp_port);
  ASSERT_NE(cp, nullptr);
  const std::vector<std::string> env =
      envoy_gateway_env(certs, absl::StrCat("localhost:", cp_port),
                        absl::StrCat("127.0.0.1:", redis_port));

  Replica a = start_replica(env);
  ASSERT_GT(a.grpc, 0);
  ASSERT_GT(a.health, 0);
  ASSERT_GT(a.metrics, 0);
  // Envoy's side: TLS to the door, trusting the pod's certificate.
  auto stub = rls::RateLimitService::NewStub(
      grpc::CreateChannel(absl::StrCat("localhost:", a.grpc),
                          grpc::SslCredentials({.pem_root_certs = pod.cert})));

  // Started without a configuration (FORCE_START_WITHOUT_INITIAL_CONFIG):
  // healthy, and answering that none is loaded.
  httplib::Client health("127.0.0.1", a.health);
  httplib::Result probe = health.Get("/healthcheck");
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->status, 200);
  EXPECT_EQ(probe->body, "OK");
  rls::RateLimitResponse resp;
  const std::string user = absl::StrCat("u", std::time(nullptr), "-", getpid());
  EXPECT_EQ(ask(*stub, route_request(user), &resp).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // The control plane's set, over mutual TLS, as node envoy-ratelimit.
  plane.push(testing::set_of("1", "eg-1", {route_limit(3)}));
  std::optional<testing::xds_discovery::DiscoveryRequest> ack =
      plane.answer_to("eg-1");
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->node().id(), "envoy-ratelimit");
  EXPECT_EQ(ack->version_info(), "1");
  EXPECT_FALSE(ack->has_error_detail()) << ack->error_detail().message();

  EXPECT_EQ(admitted_of(*stub, user, 5), 3);
  ASSERT_TRUE(ask(*stub, route_request(user), &resp).ok());
  EXPECT_EQ(resp.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  ASSERT_EQ(resp.statuses_size(), 1);
  EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 3u);
  EXPECT_TRUE(resp.statuses(0).has_duration_until_reset());

  // Prometheus where PROMETHEUS_ADDR says, in the reference's names.
  httplib::Client metrics("127.0.0.1", a.metrics);
  httplib::Result text = metrics.Get("/metrics");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 200);
  EXPECT_TRUE(absl::StrContains(
      text->body,
      "ratelimit_service_rate_limit_within_limit{domain=\"default/eg/http\""))
      << text->body;
  EXPECT_TRUE(absl::StrContains(text->body, "throttlekit_store_up 1"));
  stub.reset();  // before SIGTERM (server_process_test.cc, connect())
  ASSERT_EQ(kill(a.child.pid, SIGTERM), 0);
  EXPECT_EQ(testing::exit_status(a.child.pid), 0);

  // The next replica, started the same way, finds the count in Redis.
  Replica b = start_replica(env);
  ASSERT_GT(b.grpc, 0);
  plane.push(testing::set_of("1", "eg-2", {route_limit(3)}));
  ASSERT_TRUE(plane.answer_to("eg-2").has_value());
  auto stub_b = rls::RateLimitService::NewStub(
      grpc::CreateChannel(absl::StrCat("localhost:", b.grpc),
                          grpc::SslCredentials({.pem_root_certs = pod.cert})));
  EXPECT_EQ(admitted_of(*stub_b, user, 2), 0) << "the window's 3 were spent";
  EXPECT_EQ(admitted_of(*stub_b, user + "-other", 4), 3);
  stub_b.reset();
  ASSERT_EQ(kill(b.child.pid, SIGTERM), 0);
  EXPECT_EQ(testing::exit_status(b.child.pid), 0);
  cp->Shutdown();
}

TEST(EnvoyGateway, ASettingThatWouldChangeDecisionsStopsTheStart) {
  ASSERT_FALSE(binary().empty());
  for (const auto& [env, named] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "CONFIG_TYPE"},
           {{"CONFIG_TYPE=GRPC_XDS_SOTW", "SHADOW_MODE=true"}, "SHADOW_MODE"},
           {{"CONFIG_TYPE=GRPC_XDS_SOTW", "REDIS_URL=/run/redis.sock"},
            "REDIS_SOCKET_TYPE"},
       }) {
    Child c = testing::spawn(binary(), {}, &env);
    const std::string err = testing::read_all(c.err);
    EXPECT_EQ(testing::exit_status(c.pid), 2) << err;
    EXPECT_TRUE(absl::StrContains(err, named)) << err;
    EXPECT_TRUE(absl::StrContains(err, "reference service's environment"))
        << err;
  }
}

}  // namespace
}  // namespace envoy_gateway_test
}  // namespace throttlekit::server
