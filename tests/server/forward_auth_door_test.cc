// The forward-auth door over HTTP (src/server/forward_auth_door.h): a
// server over the embedded store with an Envoy domain of 5 requests a
// second per client address and the draft06 headers, its door on a
// loopback port, and an HTTP client sending what proxies send. Within a
// window the first 5 are 200 with the fields and the rest 429 (403 on the
// nginx route) with Retry-After; other addresses count apart; every method
// is answered; a missing header is 400 and counts nothing; an unknown path
// is 404; the routes reload with the file (a document without them is
// refused); a door without routes is refused.

#include "forward_auth_door.h"

#include <stdlib.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "config.h"
#include "config_watcher.h"
#include "forward_auth_served.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "policies.h"
#include "server.h"
#include "started_server.h"
#include "throttlekit/core/clock.h"

namespace throttlekit::server {
namespace forward_auth_door_test {
namespace {

const char* const kConfig = R"(
version: 1
envoy:
  headers: draft06
  domains:
    - domain: edge
      descriptors:
        - key: remote_address
          rate_limit: {unit: second, requests_per_unit: 5}
forwardAuth:
  routes:
    - path: /caddy
      domain: edge
      descriptors:
        - [{key: remote_address, from: clientAddress}]
    - path: /nginx
      domain: edge
      denyStatus: 403
      descriptors:
        - [{key: remote_address, from: clientAddress}]
)";

class ForwardAuthDoorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ServerConfig> config = parse_config(kConfig, "test.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    ASSERT_TRUE(served_.start(*config));
    client_ =
        std::make_unique<httplib::Client>("127.0.0.1", served_.door->port());
  }

  // A request to `path` from client address `ip`.
  httplib::Result get(const std::string& path, const std::string& ip) {
    return client_->Get(path, {{"X-Forwarded-For", ip}});
  }
  // Waits for the start of a second, so that a burst falls in one window.
  static void at_a_window_start() {
    while (SystemClock{}.now_ms() % 1000 > 100) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  testing::ServedDoor served_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ForwardAuthDoorTest, TheLimitHoldsPerWindowWithItsFields) {
  at_a_window_start();
  for (int i = 0; i < 5; ++i) {
    httplib::Result r = get("/caddy", "192.0.2.1");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200) << i << ": " << r->body;
    EXPECT_EQ(r->get_header_value("RateLimit-Limit"), "5");
    EXPECT_EQ(r->get_header_value("RateLimit-Remaining"), absl::StrCat(4 - i));
  }
  httplib::Result r = get("/caddy", "192.0.2.1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(r->get_header_value("RateLimit-Remaining"), "0");
  // The nginx route answers 403; another address counts apart.
  r = get("/nginx", "192.0.2.1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_TRUE(r->has_header("Retry-After"));
  r = get("/nginx", "192.0.2.2");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(ForwardAuthDoorTest, EveryMethodIsAnswered) {
  const httplib::Headers h = {{"X-Real-IP", "198.51.100.9"}};
  httplib::Result r = client_->Head("/caddy", h);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = client_->Post("/caddy", h, "", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = client_->Delete("/caddy", h);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(ForwardAuthDoorTest, BadRequestsCountNothing) {
  at_a_window_start();
  // No client address: 400 naming the entry, nothing counted.
  for (int i = 0; i < 10; ++i) {
    httplib::Result r = client_->Get("/caddy");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("\"remote_address\" reads X-Real-IP or "
                           "X-Forwarded-For"),
              std::string::npos)
        << r->body;
  }
  httplib::Result r = get("/other", "192.0.2.3");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->body, "no forward-auth route /other\n");
  // Still the whole window for an address.
  r = get("/caddy", "192.0.2.3");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("RateLimit-Remaining"), "4");
}

TEST(ForwardAuthDoor, TheRoutesReloadWithTheConfiguration) {
  char dir_template[] = "/tmp/throttlekit-fa.XXXXXX";
  const std::string path = std::string(mkdtemp(dir_template)) + "/s.yaml";
  const auto write = [&](const std::string& route) {
    std::string text = absl::StrCat(
        "version: 1\nenvoy: {domains: [{domain: edge, descriptors: [{key: "
        "k, rate_limit: {unit: minute, requests_per_unit: 100}}]}]}\n");
    if (!route.empty()) {
      absl::StrAppend(&text, "forwardAuth: {routes: [{path: ", route,
                      ", domain: edge, descriptors: [[{key: k, value: "
                      "v}]]}]}\n");
    }
    std::ofstream(path) << text;
  };
  write("/caddy");
  absl::StatusOr<ServerConfig> config = load_config(path);
  ASSERT_TRUE(config.ok()) << config.status();
  testing::ServedDoor served;
  ASSERT_TRUE(served.start(*config));
  auto watcher = ConfigWatcher::start(path, served.server->policies(),
                                      {.background = false}, nullptr,
                                      &served.door->routes());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  httplib::Client client("127.0.0.1", served.door->port());
  const auto status_of = [&](const std::string& p) {
    httplib::Result r = client.Get(p);
    return r ? r->status : -1;
  };
  EXPECT_EQ(status_of("/caddy"), 200);
  EXPECT_EQ(status_of("/traefik"), 404);

  write("/traefik");
  absl::StatusOr<bool> applied = (*watcher)->poll();
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(*applied);
  EXPECT_EQ(status_of("/caddy"), 404);
  EXPECT_EQ(status_of("/traefik"), 200);

  // Without routes the open door cannot serve: refused whole, the routes
  // in force stay.
  write("");
  applied = (*watcher)->poll();
  ASSERT_FALSE(applied.ok());
  EXPECT_TRUE(absl::StrContains(applied.status().message(), "forwardAuth"))
      << applied.status();
  EXPECT_EQ(status_of("/traefik"), 200);
}

TEST(ForwardAuthDoor, ADoorWithoutRoutesIsRefused) {
  absl::StatusOr<ServerConfig> config =
      parse_config("version: 1\nenvoy: {domains: [{domain: a}]}\n", "t.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  auto policies = Policies::create(*config, nullptr);
  ASSERT_TRUE(policies.ok());
  auto server = Server::start(*std::move(policies), {.listen = "127.0.0.1:0"});
  ASSERT_TRUE(server.ok());
  auto door = ForwardAuthDoor::start("127.0.0.1", 0, **server, {});
  ASSERT_FALSE(door.ok());
  EXPECT_EQ(door.status().code(), absl::StatusCode::kInvalidArgument);
  (*server)->shutdown();
}

}  // namespace
}  // namespace forward_auth_door_test
}  // namespace throttlekit::server
