// throttlekit-server as an xDS client (src/server/xds_client.h,
// docs/gateways.md): a control plane of the test's own (the aggregated
// discovery service, state of the world, on loopback) pushes
// RateLimitConfig sets to a server that started with a file domain. The
// first request subscribes by type with the node's id; each set is applied
// whole and ACKed with its version (the Envoy door then answers by it);
// a set the reference's format refuses, or with a domain twice, is NACKed
// with the reason and the version still in force, whose limits go on
// answering; a stream the control plane ends is opened again, naming the
// version it has; and an unlimited domain answered OK throughout, nothing
// refused by a change; over mutual TLS, a client without its certificate
// is refused and one with it served.

#include "xds_client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "config.h"
#include "envoy/service/discovery/v3/ads.grpc.pb.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy_rls.h"
#include "gtest/gtest.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"
#include "server.h"
#include "started_server.h"
#include "support/eventually.h"
#include "support/test_certs.h"
#include "xds_config.h"
#include "xds_control_plane.h"

namespace throttlekit::server {
namespace xds_client_test {
namespace {

namespace discovery = ::envoy::service::discovery::v3;
namespace conf = ::ratelimit::config::ratelimit::v3;
namespace rls = ::envoy::service::ratelimit::v3;
using testing::ControlPlane;
using testing::eventually;
using testing::serve;
using testing::set_of;

// A RateLimitConfig: domain `domain`, descriptor `key` at `requests` a
// minute (0 with `unknown_unit`: the unit left UNKNOWN).
conf::RateLimitConfig limit_config(const std::string& domain,
                                   const std::string& key, uint32_t requests,
                                   bool unknown_unit = false) {
  conf::RateLimitConfig c;
  c.set_name(domain + "-config");
  c.set_domain(domain);
  auto* d = c.add_descriptors();
  d->set_key(key);
  d->mutable_rate_limit()->set_unit(unknown_unit ? conf::UNKNOWN
                                                 : conf::MINUTE);
  d->mutable_rate_limit()->set_requests_per_unit(requests);
  return c;
}

conf::RateLimitConfig unlimited_config(const std::string& domain) {
  conf::RateLimitConfig c;
  c.set_name(domain);
  c.set_domain(domain);
  auto* d = c.add_descriptors();
  d->set_key("k");
  d->mutable_rate_limit()->set_unlimited(true);
  return c;
}

// A request for `domain` {key: value}.
rls::RateLimitRequest request_of(const std::string& domain,
                                 const std::string& key,
                                 const std::string& value) {
  rls::RateLimitRequest req;
  req.set_domain(domain);
  auto* e = req.add_descriptors()->add_entries();
  e->set_key(key);
  e->set_value(value);
  return req;
}

// What the server's Envoy door answers `domain` {key: value}.
rls::RateLimitResponse::Code decide(Server& server, const std::string& domain,
                                    const std::string& key,
                                    const std::string& value) {
  rls::RateLimitResponse resp;
  const absl::Status s = server.policies().envoy()->should_rate_limit(
      request_of(domain, key, value), &resp);
  EXPECT_TRUE(s.ok()) << s;
  return resp.overall_code();
}

// How many of `n` requests for `domain` {key: value} are admitted.
int admitted_of(Server& server, const std::string& domain,
                const std::string& key, const std::string& value, int n) {
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    ok += decide(server, domain, key, value) == rls::RateLimitResponse::OK;
  }
  return ok;
}

TEST(XdsClient, PushedSetsAreAppliedAckedOrRefusedNackedAndTheStreamReopens) {
  ControlPlane plane;
  int port = 0;
  std::unique_ptr<grpc::Server> cp =
      serve(plane, grpc::InsecureServerCredentials(), &port);
  ASSERT_NE(cp, nullptr);

  absl::StatusOr<ServerConfig> config = parse_config(
      "version: 1\nenvoy:\n  domains:\n    - domain: file\n      descriptors:"
      "\n        - {key: k, rate_limit: {unit: minute, requests_per_unit: 1}}"
      "\n",
      "xds.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  std::unique_ptr<Server> server = testing::start_server(*config);
  ASSERT_NE(server, nullptr);
  // Serving before any set: the file's domain.
  EXPECT_EQ(admitted_of(*server, "file", "k", "v", 3), 1);

  auto client = XdsClient::start(
      {.server = absl::StrCat("127.0.0.1:", port), .node_id = "rl-test"},
      server->policies());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(eventually([&] { return !plane.requests().empty(); }, 5000));
  const discovery::DiscoveryRequest first = plane.requests().front();
  EXPECT_EQ(first.node().id(), "rl-test");
  EXPECT_EQ(first.type_url(), kRateLimitConfigTypeUrl);
  EXPECT_TRUE(first.resource_names().empty()) << "a wildcard subscription";
  EXPECT_EQ(first.version_info(), "");
  EXPECT_EQ(first.response_nonce(), "");

  // v1: applied and ACKed; the file's domain gone, the pushed ones served.
  plane.push(set_of(
      "1", "n1", {limit_config("edge", "user", 3), unlimited_config("open")}));
  std::optional<discovery::DiscoveryRequest> ack = plane.answer_to("n1");
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->version_info(), "1");
  EXPECT_FALSE(ack->has_error_detail());
  EXPECT_EQ((*client)->version(), "1");
  EXPECT_EQ(admitted_of(*server, "edge", "user", "a", 5), 3);
  EXPECT_EQ(admitted_of(*server, "file", "k", "v", 3), 3)
      << "an unknown domain now: no limit";

  // Traffic on the unlimited domain from here on: nothing refused, no
  // error, whatever the pushes.
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0}, refused{0};
  std::thread traffic([&] {
    while (!stop) {
      if (decide(*server, "open", "k", "x") != rls::RateLimitResponse::OK) {
        ++refused;
      }
      ++calls;
    }
  });

  // v2: another limit.
  plane.push(set_of(
      "2", "n2", {limit_config("edge", "user", 5), unlimited_config("open")}));
  ack = plane.answer_to("n2");
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->version_info(), "2");
  EXPECT_FALSE(ack->has_error_detail());
  EXPECT_EQ(admitted_of(*server, "edge", "user", "b", 7), 5);

  // A set the reference's format refuses: NACKed, v2 in force.
  plane.push(set_of(
      "3", "n3",
      {limit_config("edge", "user", 9, true), unlimited_config("open")}));
  std::optional<discovery::DiscoveryRequest> nack = plane.answer_to("n3");
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->version_info(), "2");
  ASSERT_TRUE(nack->has_error_detail());
  EXPECT_EQ(nack->error_detail().code(), 3);  // INVALID_ARGUMENT
  EXPECT_TRUE(absl::StrContains(nack->error_detail().message(),
                                "xDS version \"3\" resources[0] (edge-config)"))
      << nack->error_detail().message();
  EXPECT_TRUE(absl::StrContains(nack->error_detail().message(), "unit"))
      << nack->error_detail().message();
  EXPECT_EQ((*client)->version(), "2");
  EXPECT_EQ(admitted_of(*server, "edge", "user", "c", 7), 5);

  // A domain in two resources: NACKed.
  plane.push(
      set_of("4", "n4",
             {limit_config("edge", "user", 1), limit_config("edge", "ip", 1)}));
  nack = plane.answer_to("n4");
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->version_info(), "2");
  EXPECT_TRUE(absl::StrContains(nack->error_detail().message(),
                                "domain \"edge\" is in another resource"))
      << nack->error_detail().message();
  EXPECT_EQ((*client)->nacks(), 2);

  // The control plane ends the stream: the client opens another, naming
  // the version it has, and takes the next set.
  plane.end_stream();
  ASSERT_TRUE(eventually([&] { return plane.streams() >= 2; }, 5000));
  ASSERT_TRUE(eventually(
      [&] {
        const auto r = plane.requests();
        return r.back().response_nonce().empty() &&
               r.back().version_info() == "2";
      },
      5000));
  plane.push(set_of(
      "5", "n5", {limit_config("edge", "user", 2), unlimited_config("open")}));
  ack = plane.answer_to("n5");
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->version_info(), "5");
  EXPECT_EQ(admitted_of(*server, "edge", "user", "d", 4), 2);
  EXPECT_EQ((*client)->acks(), 3);

  stop = true;
  traffic.join();
  EXPECT_GT(calls.load(), 0);
  EXPECT_EQ(refused.load(), 0);
  client->reset();
  server->shutdown();
  cp->Shutdown();
}

TEST(XdsClient, SpeaksMutualTlsToTheControlPlane) {
  const testing::Pem plane_pem = testing::self_signed("plane");
  const testing::Pem client_pem = testing::self_signed("client");
  ASSERT_FALSE(plane_pem.cert.empty() || client_pem.cert.empty());
  ControlPlane plane;
  grpc::SslServerCredentialsOptions tls(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  tls.pem_root_certs = client_pem.cert;  // the client's, self-signed
  tls.pem_key_cert_pairs.push_back({plane_pem.key, plane_pem.cert});
  int port = 0;
  std::unique_ptr<grpc::Server> cp =
      serve(plane, grpc::SslServerCredentials(tls), &port);
  ASSERT_NE(cp, nullptr);
  absl::StatusOr<ServerConfig> config =
      parse_config("version: 1\nenvoy: {domains: [{domain: a}]}\n", "x.yaml");
  ASSERT_TRUE(config.ok());
  std::unique_ptr<Server> server = testing::start_server(*config);
  ASSERT_NE(server, nullptr);
  plane.push(set_of("1", "t1", {limit_config("edge", "user", 2)}));

  // Without a client certificate the control plane refuses the handshake:
  // nothing is asked, nothing applied.
  auto anonymous = XdsClient::start(
      {.server = absl::StrCat("127.0.0.1:", port),
       .node_id = "anonymous",
       .credentials = grpc::SslCredentials({.pem_root_certs = plane_pem.cert})},
      server->policies());
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(plane.requests().empty());
  EXPECT_EQ((*anonymous)->acks(), 0);
  anonymous->reset();

  auto client = XdsClient::start({.server = absl::StrCat("127.0.0.1:", port),
                                  .node_id = "rl-tls",
                                  .credentials = grpc::SslCredentials(
                                      {.pem_root_certs = plane_pem.cert,
                                       .pem_private_key = client_pem.key,
                                       .pem_cert_chain = client_pem.cert})},
                                 server->policies());
  ASSERT_TRUE(client.ok()) << client.status();
  std::optional<discovery::DiscoveryRequest> ack = plane.answer_to("t1");
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->node().id(), "rl-tls");
  EXPECT_EQ(ack->version_info(), "1");
  EXPECT_EQ(admitted_of(*server, "edge", "user", "a", 3), 2);
  client->reset();
  server->shutdown();
  cp->Shutdown();
}

TEST(XdsClient, AServerWithoutAFileIsUnavailableUntilTheFirstSet) {
  ControlPlane plane;
  int port = 0;
  std::unique_ptr<grpc::Server> cp =
      serve(plane, grpc::InsecureServerCredentials(), &port);
  ASSERT_NE(cp, nullptr);
  // What throttlekit-server runs on with --xds-server and no --config.
  std::unique_ptr<Server> server = testing::start_server(ServerConfig{});
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->policies().envoy(), nullptr) << "no domains yet";
  // Over the door, as Envoy asks.
  auto stub = rls::RateLimitService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                          grpc::InsecureChannelCredentials()));
  const auto ask = [&](rls::RateLimitResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    return stub->ShouldRateLimit(&ctx, request_of("edge", "user", "a"), resp);
  };
  rls::RateLimitResponse resp;
  const grpc::Status before_client = ask(&resp);
  EXPECT_EQ(before_client.error_code(), grpc::StatusCode::NOT_FOUND)
      << "no Envoy door without domains or a control plane";
  auto client = XdsClient::start(
      {.server = absl::StrCat("127.0.0.1:", port), .node_id = "bare"},
      server->policies());
  ASSERT_TRUE(client.ok()) << client.status();
  const grpc::Status before_set = ask(&resp);
  EXPECT_EQ(before_set.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "fed by a control plane that has sent nothing yet";
  EXPECT_TRUE(absl::StrContains(before_set.error_message(),
                                "no rate limit configuration loaded yet"))
      << before_set.error_message();
  plane.push(set_of("1", "b1", {limit_config("edge", "user", 2)}));
  ASSERT_TRUE(plane.answer_to("b1").has_value());
  EXPECT_EQ(admitted_of(*server, "edge", "user", "a", 3), 2);
  // An empty set is a configuration too: every domain unknown, answered OK
  // with no limit, as the reference answers a domain it does not have.
  plane.push(set_of("2", "b2", {}));
  ASSERT_TRUE(plane.answer_to("b2").has_value());
  const grpc::Status after_empty = ask(&resp);
  ASSERT_TRUE(after_empty.ok()) << after_empty.error_message();
  EXPECT_EQ(resp.overall_code(), rls::RateLimitResponse::OK);
  ASSERT_EQ(resp.statuses_size(), 1);
  EXPECT_FALSE(resp.statuses(0).has_current_limit());
  client->reset();
  server->shutdown();
  cp->Shutdown();
}

TEST(XdsClient, AnEnvoyBlockWithoutDomainsSetsWhatThePushedDomainsAnswer) {
  ControlPlane plane;
  int port = 0;
  std::unique_ptr<grpc::Server> cp =
      serve(plane, grpc::InsecureServerCredentials(), &port);
  ASSERT_NE(cp, nullptr);
  absl::StatusOr<ServerConfig> config = parse_config(
      "version: 1\nenvoy: {domains: [], headers: draft06}\n", "x.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  std::unique_ptr<Server> server = testing::start_server(*config);
  ASSERT_NE(server, nullptr);
  // The door is on from the start, every domain unknown.
  ASSERT_NE(server->policies().envoy(), nullptr);
  EXPECT_EQ(decide(*server, "edge", "user", "a"), rls::RateLimitResponse::OK);
  auto client = XdsClient::start(
      {.server = absl::StrCat("127.0.0.1:", port), .node_id = "headers"},
      server->policies());
  ASSERT_TRUE(client.ok()) << client.status();
  plane.push(set_of("1", "h1", {limit_config("edge", "user", 2)}));
  ASSERT_TRUE(plane.answer_to("h1").has_value());
  rls::RateLimitResponse resp;
  ASSERT_TRUE(server->policies()
                  .envoy()
                  ->should_rate_limit(request_of("edge", "user", "b"), &resp)
                  .ok());
  EXPECT_EQ(resp.overall_code(), rls::RateLimitResponse::OK);
  std::string limit_header;
  for (const auto& h : resp.response_headers_to_add()) {
    if (h.key() == "RateLimit-Limit") limit_header = h.value();
  }
  EXPECT_EQ(limit_header, "2") << "the block's headers on a pushed domain";
  client->reset();
  server->shutdown();
  cp->Shutdown();
}

TEST(XdsClient, BadOptionsAreRefusedNamingThem) {
  absl::StatusOr<ServerConfig> config =
      parse_config("version: 1\nenvoy: {domains: [{domain: a}]}\n", "x.yaml");
  ASSERT_TRUE(config.ok());
  std::unique_ptr<Server> server = testing::start_server(*config);
  ASSERT_NE(server, nullptr);
  auto c = XdsClient::start({.server = "", .node_id = "n"}, server->policies());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  c = XdsClient::start({.server = "127.0.0.1:1", .node_id = ""},
                       server->policies());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "node id"));
  c = XdsClient::start(
      {.server = "127.0.0.1:1", .node_id = "n", .initial_backoff_ms = 0},
      server->policies());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  server->shutdown();
}

TEST(XdsConfig, AResourceIsTheReferenceFormatsDomain) {
  conf::RateLimitConfig c = limit_config("edge", "user", 3);
  auto* d = c.mutable_descriptors(0);
  d->set_value("a \"quoted\"\n\\ value");
  d->mutable_rate_limit()->set_name("per-user");
  d->mutable_rate_limit()->add_replaces()->set_name("other");
  d->set_shadow_mode(true);
  auto* nested = d->add_descriptors();
  nested->set_key("path");
  nested->mutable_rate_limit()->set_unlimited(true);
  EXPECT_EQ(rate_limit_config_document(c),
            "{\"domain\": \"edge\", \"descriptors\": [{\"key\": \"user\", "
            "\"value\": \"a \\\"quoted\\\"\\u000a\\\\ value\", \"rate_limit\": "
            "{\"unit\": \"minute\", \"requests_per_unit\": 3, \"name\": "
            "\"per-user\", \"replaces\": [{\"name\": \"other\"}]}, "
            "\"shadow_mode\": true, \"descriptors\": [{\"key\": \"path\", "
            "\"rate_limit\": {\"unlimited\": true}}]}]}");
  absl::StatusOr<std::vector<EnvoyDomain>> domains =
      xds_domains(set_of("7", "n", {c}));
  ASSERT_TRUE(domains.ok()) << domains.status();
  ASSERT_EQ(domains->size(), 1u);
  EXPECT_EQ((*domains)[0].domain, "edge");
  // Another type is refused naming it.
  discovery::DiscoveryResponse other = set_of("8", "n", {});
  other.add_resources()->PackFrom(discovery::DiscoveryRequest());
  domains = xds_domains(other);
  ASSERT_FALSE(domains.ok());
  EXPECT_TRUE(
      absl::StrContains(domains.status().message(), "resources[0]: type "))
      << domains.status();
}

}  // namespace
}  // namespace xds_client_test
}  // namespace throttlekit::server
