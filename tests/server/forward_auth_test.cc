// The forward-auth door's configuration (src/server/forward_auth_config.h)
// and its translation (src/server/forward_auth.h), without HTTP: the
// documented block loads; every bad block is refused naming its path;
// each entry source reads the headers proxies send (nginx's X-Original-*,
// Caddy's and Traefik's X-Forwarded-*), a missing or empty one is refused
// naming the entry and the headers; decisions become 200, or 429 (403 for
// nginx) with the style's fields and Retry-After.

#include "forward_auth.h"

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "config.h"
#include "gtest/gtest.h"
#include "support/config_error.h"

namespace throttlekit::server {
namespace forward_auth_test {
namespace {

namespace rls = ::envoy::service::ratelimit::v3;
using testing::expect_config_error;

// A document with one envoy domain `edge` and `block` as its forwardAuth.
std::string with_block(const std::string& block) {
  return "version: 1\nenvoy:\n  domains:\n    - domain: edge\n"
         "      descriptors:\n        - key: remote_address\n"
         "          rate_limit: {unit: second, requests_per_unit: 5}\n" +
         block;
}

ForwardAuthConfig parsed(const std::string& yaml) {
  absl::StatusOr<ServerConfig> c = parse_config(yaml, "server.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->forward_auth : ForwardAuthConfig{};
}

const char* const kBlock = R"(forwardAuth:
  denyStatus: 429
  routes:
    - path: /nginx
      domain: edge
      denyStatus: 403
      descriptors:
        - [{key: remote_address, from: clientAddress}]
        - [{key: path, from: path}, {key: method, from: method}]
    - path: /caddy
      domain: edge
      descriptors:
        - [{key: plan, header: X-Plan}, {key: tier, value: gold}]
        - [{key: uri, from: uri}, {key: host, from: host}]
)";

TEST(ForwardAuthConfig, LoadsTheDocumentedShape) {
  const ForwardAuthConfig c = parsed(with_block(kBlock));
  ASSERT_EQ(c.routes.size(), 2u);
  const ForwardAuthRoute& nginx = c.routes[0];
  EXPECT_EQ(nginx.path, "/nginx");
  EXPECT_EQ(nginx.domain, "edge");
  EXPECT_EQ(nginx.deny_status, 403);
  ASSERT_EQ(nginx.descriptors.size(), 2u);
  EXPECT_EQ(nginx.descriptors[0][0].from, ForwardAuthFrom::kClientAddress);
  EXPECT_EQ(nginx.descriptors[1][1].from, ForwardAuthFrom::kMethod);
  const ForwardAuthRoute& caddy = *c.find("/caddy");
  EXPECT_EQ(caddy.deny_status, 429);  // the block's
  EXPECT_EQ(caddy.descriptors[0][0].from, ForwardAuthFrom::kHeader);
  EXPECT_EQ(caddy.descriptors[0][0].value, "X-Plan");
  EXPECT_EQ(caddy.descriptors[0][1].from, ForwardAuthFrom::kLiteral);
  EXPECT_EQ(caddy.descriptors[0][1].value, "gold");
  EXPECT_EQ(c.find("/other"), nullptr);
  // A route answers the paths under it (ext_authz's path_prefix), not
  // those that merely start alike.
  EXPECT_EQ(c.find("/nginx/items/1"), &c.routes[0]);
  EXPECT_EQ(c.find("/nginxx"), nullptr);
  EXPECT_EQ(c.find("/"), nullptr);
  // No block: no routes.
  EXPECT_TRUE(parsed(with_block("")).routes.empty());
  // No envoy: domains in the file (they come over xDS): a route's domain
  // is not checked at load.
  const ForwardAuthConfig over_xds = parsed(
      "version: 1\nlimiters:\n  api: {strategy: gcra, limit: 1, period: 1s}\n"
      "forwardAuth:\n  routes:\n    - path: /a\n      domain: pushed\n"
      "      descriptors: [[{key: k, value: v}]]\n");
  ASSERT_EQ(over_xds.routes.size(), 1u);
  EXPECT_EQ(over_xds.routes[0].domain, "pushed");
}

TEST(ForwardAuthConfig, RefusesEachBadBlockNamingItsPath) {
  const std::string route =
      "forwardAuth:\n  routes:\n    - path: /a\n      domain: edge\n";
  const std::string one = "      descriptors: [[{key: k, value: v}]]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"forwardAuth: {}\n", "forwardAuth: missing `routes`"},
      {"forwardAuth: {routes: []}\n", "forwardAuth.routes: needs at least"},
      {"forwardAuth: {routes: [], denyStatus: 500}\n",
       "forwardAuth.denyStatus: must be 429 or 403"},
      {"forwardAuth:\n  routes:\n    - domain: edge\n" + one,
       "forwardAuth.routes[0]: missing `path`"},
      {"forwardAuth:\n  routes:\n    - path: a\n      domain: edge\n" + one,
       "forwardAuth.routes[0].path: must start with /"},
      {"forwardAuth:\n  routes:\n    - path: /a?x\n      domain: edge\n" + one,
       "forwardAuth.routes[0].path: must start with / and hold no query"},
      {"forwardAuth:\n  routes:\n    - path: /a\n      domain: nope\n" + one,
       "forwardAuth.routes[0].domain: no `envoy:` domain \"nope\""},
      {route, "forwardAuth.routes[0]: missing `descriptors`"},
      {route + "      descriptors: []\n",
       "forwardAuth.routes[0].descriptors: needs at least one"},
      {route + "      descriptors: [[]]\n",
       "forwardAuth.routes[0].descriptors[0]: needs at least one entry"},
      {route + "      descriptors: [[{value: v}]]\n",
       "forwardAuth.routes[0].descriptors[0][0]: missing `key`"},
      {route + "      descriptors: [[{key: k}]]\n",
       "forwardAuth.routes[0].descriptors[0][0]: needs exactly one of"},
      {route + "      descriptors: [[{key: k, value: v, header: h}]]\n",
       "forwardAuth.routes[0].descriptors[0][0]: needs exactly one of"},
      {route + "      descriptors: [[{key: k, from: cookie}]]\n",
       "forwardAuth.routes[0].descriptors[0][0].from: must be method, uri"},
      {route + "      descriptors: [[{key: k, value: \"\"}]]\n",
       "forwardAuth.routes[0].descriptors[0][0].value: must be a non-empty"},
      {route + "      descriptors: [[{key: k, value: v, extra: 1}]]\n",
       "forwardAuth.routes[0].descriptors[0][0].extra: unknown key"},
      {route + one + "      denyStatus: 401\n",
       "forwardAuth.routes[0].denyStatus: must be 429 or 403"},
      {"forwardAuth:\n  routes:\n    - path: /a\n      domain: edge\n" + one +
           "    - path: /a\n      domain: edge\n" + one,
       "forwardAuth.routes[1].path: duplicate path \"/a\""},
  };
  for (const auto& [block, error] : cases) {
    expect_config_error(with_block(block), "server.yaml",
                        "server.yaml: " + error);
  }
}

// Headers by lower-case name, as the door reads them.
class Headers {
 public:
  Headers(std::initializer_list<std::pair<std::string, std::string>> h) {
    for (const auto& [k, v] : h) h_[absl::AsciiStrToLower(k)] = v;
  }
  std::optional<std::string_view> operator()(std::string_view name) const {
    const auto it = h_.find(std::string(name));
    if (it == h_.end()) return std::nullopt;
    return std::string_view(it->second);
  }

 private:
  std::map<std::string, std::string> h_;
};

// The descriptors of `req` as "k=v,k=v" each.
std::vector<std::string> descriptors(const rls::RateLimitRequest& req) {
  std::vector<std::string> out;
  for (const auto& d : req.descriptors()) {
    std::string s;
    for (const auto& e : d.entries()) {
      if (!s.empty()) s += ",";
      s += e.key() + "=" + e.value();
    }
    out.push_back(s);
  }
  return out;
}

TEST(ForwardAuthRequest, ReadsWhatEachProxySends) {
  const ForwardAuthConfig c = parsed(with_block(kBlock));
  // nginx: auth_request with proxy_set_header X-Original-URI $request_uri,
  // X-Original-Method $request_method, X-Real-IP $remote_addr.
  const Headers nginx({{"X-Original-URI", "/api/items?page=2"},
                       {"X-Original-Method", "POST"},
                       {"X-Real-IP", "10.0.0.7"},
                       {"X-Forwarded-For", "192.0.2.1"}});
  absl::StatusOr<rls::RateLimitRequest> r =
      forward_auth_request(*c.find("/nginx"), nginx);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->domain(), "edge");
  EXPECT_EQ(descriptors(*r),
            (std::vector<std::string>{"remote_address=10.0.0.7",
                                      "path=/api/items,method=POST"}));
  // Caddy's forward_auth: X-Forwarded-Method, -Uri, -Host, -For (and the
  // request's own headers).
  const Headers caddy({{"X-Forwarded-Method", "GET"},
                       {"X-Forwarded-Uri", "/a?b=c"},
                       {"X-Forwarded-Host", "shop.example"},
                       {"Host", "auth.internal"},
                       {"X-Forwarded-For", " 198.51.100.4 , 10.0.0.1"},
                       {"x-plan", "pro"}});
  r = forward_auth_request(*c.find("/caddy"), caddy);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(descriptors(*r),
            (std::vector<std::string>{"plan=pro,tier=gold",
                                      "uri=/a?b=c,host=shop.example"}));
  r = forward_auth_request(*c.find("/nginx"), caddy);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(descriptors(*r)[0], "remote_address=198.51.100.4")
      << "the first address of X-Forwarded-For";
  EXPECT_EQ(descriptors(*r)[1], "path=/a,method=GET");
}

TEST(ForwardAuthRequest, ExtAuthzsOwnMethodAndPathServeWhenNoHeaderDoes) {
  const ForwardAuthConfig c = parsed(with_block(kBlock));
  // ext_authz asks `<path_prefix><original path>` with the original method.
  absl::StatusOr<rls::RateLimitRequest> r = forward_auth_request(
      *c.find("/nginx"), Headers({{"X-Forwarded-For", "203.0.113.5"}}),
      {.method = "PUT", .rest = "/api/items?x=1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(descriptors(*r),
            (std::vector<std::string>{"remote_address=203.0.113.5",
                                      "path=/api/items,method=PUT"}));
  // A header still wins over the subrequest's own.
  r = forward_auth_request(*c.find("/nginx"),
                           Headers({{"X-Real-IP", "203.0.113.6"},
                                    {"X-Forwarded-Method", "GET"},
                                    {"X-Forwarded-Uri", "/b"}}),
                           {.method = "PUT", .rest = "/a"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(descriptors(*r)[1], "path=/b,method=GET");
}

TEST(ForwardAuthRequest, AMissingOrEmptyHeaderIsRefusedNamingIt) {
  const ForwardAuthConfig c = parsed(with_block(kBlock));
  absl::StatusOr<rls::RateLimitRequest> r = forward_auth_request(
      *c.find("/nginx"),
      Headers({{"X-Original-URI", "/a"}, {"X-Original-Method", "GET"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "forward auth /nginx: descriptors[0] entry \"remote_address\" "
            "reads X-Real-IP or X-Forwarded-For, and the request has none (or "
            "only empty ones)");
  r = forward_auth_request(
      *c.find("/caddy"),
      Headers({{"X-Plan", "  "}, {"X-Forwarded-Uri", "/"}, {"Host", "h"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "descriptors[0] entry \"plan\" reads X-Plan"))
      << r.status();
  EXPECT_EQ(forward_auth_error(r.status()).status, 400);
  EXPECT_EQ(forward_auth_error(absl::UnavailableError("store down")).status,
            503);
}

TEST(ForwardAuthAnswer, AdmittedIs200AndRefusedCarriesRetryAfter) {
  const ForwardAuthConfig c = parsed(with_block(kBlock));
  rls::RateLimitResponse ok;
  ok.set_overall_code(rls::RateLimitResponse::OK);
  auto* h = ok.add_response_headers_to_add();
  h->set_key("RateLimit-Remaining");
  h->set_value("3");
  ForwardAuthAnswer a = forward_auth_answer(ok, *c.find("/caddy"));
  EXPECT_EQ(a.status, 200);
  ASSERT_EQ(a.headers.size(), 1u);
  EXPECT_EQ(a.headers[0].first, "RateLimit-Remaining");

  rls::RateLimitResponse over;
  over.set_overall_code(rls::RateLimitResponse::OVER_LIMIT);
  auto* s1 = over.add_statuses();
  s1->set_code(rls::RateLimitResponse::OVER_LIMIT);
  s1->mutable_duration_until_reset()->set_nanos(250'000'000);
  auto* s2 = over.add_statuses();
  s2->set_code(rls::RateLimitResponse::OVER_LIMIT);
  s2->mutable_duration_until_reset()->set_seconds(2);
  s2->mutable_duration_until_reset()->set_nanos(1'000'000);
  auto* s3 = over.add_statuses();  // an admitted one does not count
  s3->set_code(rls::RateLimitResponse::OK);
  s3->mutable_duration_until_reset()->set_seconds(50);
  a = forward_auth_answer(over, *c.find("/caddy"));
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(
      a.headers,
      (std::vector<std::pair<std::string, std::string>>{{"Retry-After", "3"}}))
      << "2.001 s rounded up";
  a = forward_auth_answer(over, *c.find("/nginx"));
  EXPECT_EQ(a.status, 403);
  // A style that sends Retry-After itself keeps its own.
  auto* r = over.add_response_headers_to_add();
  r->set_key("Retry-After");
  r->set_value("1");
  a = forward_auth_answer(over, *c.find("/caddy"));
  EXPECT_EQ(
      a.headers,
      (std::vector<std::pair<std::string, std::string>>{{"Retry-After", "1"}}));
}

}  // namespace
}  // namespace forward_auth_test
}  // namespace throttlekit::server
