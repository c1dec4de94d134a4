// The Asio HTTP example (examples/asio_http_server.cc) as a user runs it:
// the binary on loopback, one event-loop thread, driven by real HTTP
// clients. 64 concurrent keep-alive clients of one tenant get exactly the
// limit of 200s, the rest 429 with Retry-After and the RateLimit fields;
// another tenant has its own budget; a request with a body is refused.
// Over the test Redis (strict checks, pipelined while the loop serves the
// other connections) and on the in-memory default.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "support/child_process.h"

namespace asio_http_server_test {
namespace {

using throttlekit::testing::Child;

struct Started {
  Child child;
  int port = 0;
};

Started start(std::vector<std::string> args) {
  args.insert(args.end(), {"--port", "0"});
  Started s;
  s.child = throttlekit::testing::spawn(THROTTLEKIT_ASIO_HTTP_SERVER,
                                        std::move(args));
  s.port = throttlekit::testing::port_after(
      throttlekit::testing::read_line(s.child.out),
      "asio_http_server: listening on port ");
  return s;
}

int stop(const Started& s) {
  kill(s.child.pid, SIGTERM);
  return throttlekit::testing::exit_status(s.child.pid);
}

// `clients` threads, each with its own keep-alive connection, send
// `per_client` requests of `tenant`; returns (200s, 429s).
std::pair<int, int> load(int port, const std::string& tenant, int clients,
                         int per_client) {
  std::atomic<int> ok{0}, limited{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      for (int i = 0; i < per_client; ++i) {
        httplib::Result r = client.Get("/hello", {{"X-Tenant", tenant}});
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        if (r->status == 200) {
          EXPECT_EQ(r->body, "hello\n");
          EXPECT_TRUE(r->has_header("RateLimit-Remaining"));
          ok.fetch_add(1);
        } else {
          EXPECT_EQ(r->status, 429) << r->body;
          int64_t retry = 0;
          EXPECT_TRUE(
              absl::SimpleAtoi(r->get_header_value("Retry-After"), &retry));
          EXPECT_GE(retry, 1);
          EXPECT_EQ(r->get_header_value("RateLimit-Remaining"), "0");
          limited.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return {ok.load(), limited.load()};
}

void expect_the_limit_exactly(const Started& s) {
  // 64 clients x 5 = 320 requests against a limit of 100 per hour.
  const auto [ok, limited] = load(s.port, "acme", 64, 5);
  EXPECT_EQ(ok, 100);
  EXPECT_EQ(limited, 220);
  const auto [other, other_limited] = load(s.port, "beta", 4, 5);
  EXPECT_EQ(other, 20) << "another tenant has its own budget";
  EXPECT_EQ(other_limited, 0);
  httplib::Client client("127.0.0.1", s.port);
  httplib::Result body = client.Post("/hello", "x", "text/plain");
  ASSERT_TRUE(body);
  EXPECT_EQ(body->status, 400);
}

TEST(AsioHttpServer, StrictRedisChecksOnOneEventLoopThread) {
  const char* env = std::getenv("THROTTLEKIT_REDIS_PORT");
  const std::string port = env != nullptr ? env : "16379";
  const Started s =
      start({"--redis", "127.0.0.1:" + port, "--limit", "100", "--window-ms",
             "3600000", "--prefix",
             absl::StrCat("asio-http-test:", getpid(), ":", time(nullptr))});
  ASSERT_GT(s.port, 0);
  expect_the_limit_exactly(s);
  EXPECT_EQ(stop(s), 0);
}

TEST(AsioHttpServer, TheInMemoryDefault) {
  const Started s = start({"--limit", "100", "--window-ms", "3600000"});
  ASSERT_GT(s.port, 0);
  expect_the_limit_exactly(s);
  EXPECT_EQ(stop(s), 0);
}

}  // namespace
}  // namespace asio_http_server_test
