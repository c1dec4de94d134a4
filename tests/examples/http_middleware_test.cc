// The HTTP middleware example (examples/http_middleware.cc) as a user runs
// it: the binary on loopback, driven by a real HTTP client. In each field
// style the fields sent are parsed (the structured ones as RFC 8941 items);
// the burst is admitted, then 429 with Retry-After and the binding axis;
// tenants are limited apart; --no-limit sends no fields; and, when the
// server is built, --server makes throttlekit-server decide.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "support/child_process.h"
#include "support/sf_item.h"

namespace http_middleware_test {
namespace {

using throttlekit::testing::parse_item;

using throttlekit::testing::Child;
using throttlekit::testing::temp_file;

// Starts `binary` and reads the port its first stdout line names.
struct Started {
  Child child;
  int port = 0;
};

Started spawn(const std::string& binary, std::vector<std::string> args,
              const std::string& marker) {
  Started s;
  s.child = throttlekit::testing::spawn(binary, std::move(args));
  s.port = throttlekit::testing::port_after(
      throttlekit::testing::read_line(s.child.out), marker);
  return s;
}

int stop(const Started& s) {
  kill(s.child.pid, SIGTERM);
  return throttlekit::testing::exit_status(s.child.pid);
}

Started start_example(std::vector<std::string> args) {
  args.insert(args.end(), {"--port", "0"});
  return spawn(THROTTLEKIT_HTTP_MIDDLEWARE, std::move(args),
               "listening on port ");
}

httplib::Result get(int port, const std::string& tenant) {
  httplib::Client client("127.0.0.1", port);
  return client.Get("/hello", {{"X-Tenant", tenant}});
}

int64_t integer_header(const httplib::Result& r, const std::string& name) {
  int64_t v = -1;
  EXPECT_TRUE(r->has_header(name)) << name;
  EXPECT_TRUE(absl::SimpleAtoi(r->get_header_value(name), &v))
      << name << ": " << r->get_header_value(name);
  return v;
}

TEST(HttpMiddleware, StructuredFieldsThenA429) {
  // 5 a second, bursts of 2: two admitted, then denied on the rate axis.
  const Started c = start_example({"--rate", "5", "--fields", "structured"});
  for (int i = 0; i < 2; ++i) {
    httplib::Result r = get(c.port, "alice");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello\n");
    auto policy = parse_item(r->get_header_value("RateLimit-Policy"));
    ASSERT_TRUE(policy.has_value()) << r->get_header_value("RateLimit-Policy");
    EXPECT_EQ(policy->name, "http");
    EXPECT_EQ(policy->params.at("q"), 2);
    EXPECT_EQ(policy->params.at("w"), 1);
    auto limit = parse_item(r->get_header_value("RateLimit"));
    ASSERT_TRUE(limit.has_value()) << r->get_header_value("RateLimit");
    EXPECT_EQ(limit->params.at("r"), 1 - i);
    EXPECT_GE(limit->params.at("t"), 0);
    EXPECT_FALSE(r->has_header("Retry-After"));
  }
  httplib::Result denied = get(c.port, "alice");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 429);
  EXPECT_GE(integer_header(denied, "Retry-After"), 1);
  EXPECT_NE(denied->body.find("\"binding_axis\":\"rate\""), std::string::npos)
      << denied->body;
  auto limit = parse_item(denied->get_header_value("RateLimit"));
  ASSERT_TRUE(limit.has_value());
  EXPECT_EQ(limit->params.at("r"), 0);
  // Another tenant has its own budget.
  httplib::Result bob = get(c.port, "bob");
  ASSERT_TRUE(bob);
  EXPECT_EQ(bob->status, 200);
  EXPECT_EQ(stop(c), 0);
}

TEST(HttpMiddleware, DraftAndLegacyFields) {
  const Started d6 = start_example({"--rate", "5", "--fields", "draft06"});
  httplib::Result r = get(d6.port, "t");
  ASSERT_TRUE(r);
  EXPECT_EQ(integer_header(r, "RateLimit-Limit"), 2);
  EXPECT_EQ(integer_header(r, "RateLimit-Remaining"), 1);
  EXPECT_GE(integer_header(r, "RateLimit-Reset"), 0);
  EXPECT_EQ(r->get_header_value("RateLimit-Policy"), "2;w=1");
  EXPECT_FALSE(r->has_header("RateLimit"));
  EXPECT_EQ(stop(d6), 0);

  const Started d7 = start_example({"--rate", "5", "--fields", "draft07"});
  r = get(d7.port, "t");
  ASSERT_TRUE(r);
  const std::string combined = r->get_header_value("RateLimit");
  EXPECT_TRUE(absl::StartsWith(combined, "limit=2, remaining=1, reset="))
      << combined;
  EXPECT_EQ(r->get_header_value("RateLimit-Policy"), "2;w=1");
  EXPECT_FALSE(r->has_header("RateLimit-Limit"));
  EXPECT_EQ(stop(d7), 0);

  const Started legacy = start_example({"--rate", "5", "--fields", "legacy"});
  const int64_t before_s = time(nullptr);
  r = get(legacy.port, "t");
  ASSERT_TRUE(r);
  EXPECT_EQ(integer_header(r, "X-RateLimit-Limit"), 2);
  EXPECT_EQ(integer_header(r, "X-RateLimit-Remaining"), 1);
  const int64_t reset = integer_header(r, "X-RateLimit-Reset");
  EXPECT_GE(reset, before_s);  // epoch seconds, within the next few
  EXPECT_LE(reset, before_s + 5);
  EXPECT_FALSE(r->has_header("RateLimit"));
  EXPECT_EQ(stop(legacy), 0);
}

TEST(HttpMiddleware, NoLimitSendsNoFields) {
  const Started c = start_example({"--no-limit"});
  for (int i = 0; i < 5; ++i) {
    httplib::Result r = get(c.port, "t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_FALSE(r->has_header("RateLimit"));
  }
  EXPECT_EQ(stop(c), 0);
}

#ifdef THROTTLEKIT_SERVER_BINARY
TEST(HttpMiddleware, TheServerDecidesWithOneFlag) {
  const std::string config = temp_file("http.yaml", R"(
version: 1
limiters:
  http:
    admission:
      concurrency: {maxInflight: 8}
      rate: {strategy: gcra, limit: 3, period: 1s, burst: 3}
)");
  const Started server = spawn(THROTTLEKIT_SERVER_BINARY,
                               {"--config", config, "--listen", "127.0.0.1:0"},
                               "listening on port ");
  const Started c =
      start_example({"--server", absl::StrCat("127.0.0.1:", server.port)});
  int ok = 0, limited = 0;
  for (int i = 0; i < 5; ++i) {
    httplib::Result r = get(c.port, "carol");
    ASSERT_TRUE(r);
    ok += r->status == 200 ? 1 : 0;
    limited += r->status == 429 ? 1 : 0;
    auto policy = parse_item(r->get_header_value("RateLimit-Policy"));
    ASSERT_TRUE(policy.has_value());
    EXPECT_EQ(policy->params.at("q"), 3);  // the server's limit
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(limited, 2);
  EXPECT_EQ(stop(c), 0);
  EXPECT_EQ(stop(server), 0);
}
#endif

}  // namespace
}  // namespace http_middleware_test
