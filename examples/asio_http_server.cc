// An HTTP server on one Asio event-loop thread whose every request passes a
// rate check without blocking that thread (docs/async.md, "The adapters").
// Each connection is a C++20 coroutine; a request `co_await`s
// `throttlekit::async_check` and answers 200 or 429 with the RateLimit
// fields and Retry-After. With `--redis HOST:PORT` the checks are strict
// Redis checks (one EVALSHA each, pipelined on one connection while the
// loop serves the other connections); without it, the embedded in-memory
// limiter (answered inline).
//
//     asio_http_server [--port 8080] [--limit 10] [--window-ms 60000]
//                      [--redis 127.0.0.1:6379] [--prefix asio-http]
//     curl -i -H 'X-Tenant: acme' http://127.0.0.1:8080/hello
//
// The key is the `X-Tenant` header (`anonymous` without one), stored in
// Redis as `<prefix>:<tenant>`. HTTP/1.1
// keep-alive; requests without a body only (a body is refused with 400).
// Prints `asio_http_server: listening on port N (...)` once it accepts;
// SIGINT or SIGTERM stops it.

// Asio 1.22 enables `co_await` on clang only with <experimental/coroutine>;
// clang 14 with libstdc++ has the standard <coroutine>, which Asio uses once
// told (docs/async.md, "Asio").
#if defined(__clang__) && !defined(ASIO_HAS_CO_AWAIT)
#define ASIO_HAS_CO_AWAIT 1
#endif

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "asio/buffer.hpp"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/read_until.hpp"
#include "asio/signal_set.hpp"
#include "asio/use_awaitable.hpp"
#include "asio/write.hpp"
#include "throttlekit/asio/async_check.h"
#include "throttlekit/observe/rate_limit_headers.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/fixed_window.h"
#ifdef THROTTLEKIT_EXAMPLE_REDIS
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/redis/redis_coordinator.h"
#endif

namespace tk = throttlekit;
using asio::ip::tcp;

namespace {

// What one request asked for: its tenant and whether the client keeps the
// connection open.
struct Request {
  std::string tenant = "anonymous";
  bool keep_alive = true;
  bool has_body = false;
};

// Parses the head of one request (up to and including the blank line).
Request parse_head(absl::string_view head) {
  Request r;
  bool first = true;
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    if (first) {
      first = false;
      r.keep_alive = !absl::EndsWith(line, "HTTP/1.0");
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view name = line.substr(0, colon);
    const absl::string_view value =
        absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "X-Tenant") && !value.empty()) {
      r.tenant = std::string(value.data(), value.size());
    } else if (absl::EqualsIgnoreCase(name, "Connection")) {
      if (absl::EqualsIgnoreCase(value, "close")) r.keep_alive = false;
      if (absl::EqualsIgnoreCase(value, "keep-alive")) r.keep_alive = true;
    } else if (absl::EqualsIgnoreCase(name, "Content-Length")) {
      r.has_body = value != "0";
    } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      r.has_body = true;
    }
  }
  return r;
}

std::string response(int code, absl::string_view reason, absl::string_view body,
                     const tk::RateLimitHeaders* fields, bool keep_alive) {
  std::string out = absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\n");
  if (fields != nullptr) {
    fields->for_each([&out](absl::string_view name, const std::string& value) {
      absl::StrAppend(&out, name, ": ", value, "\r\n");
    });
  }
  absl::StrAppend(
      &out, "Content-Type: text/plain\r\nContent-Length: ", body.size(), "\r\n",
      keep_alive ? "" : "Connection: close\r\n", "\r\n", body);
  return out;
}

// One connection: requests in order, each checked without blocking the
// loop (other connections are served while this one waits for its answer).
template <class Engine>
asio::awaitable<void> serve(tcp::socket socket, Engine& limiter,
                            int64_t window_ms) {
  std::string buffer;
  for (;;) {
    size_t n = 0;
    try {
      n = co_await asio::async_read_until(
          socket, asio::dynamic_buffer(buffer, 64 * 1024), "\r\n\r\n",
          asio::use_awaitable);
    } catch (const std::exception&) {
      co_return;  // closed, reset, or a head over 64 KiB
    }
    const Request req = parse_head(absl::string_view(buffer).substr(0, n));
    buffer.erase(0, n);
    std::string out;
    if (req.has_body) {
      out = response(400, "Bad Request", "requests with a body are refused\n",
                     nullptr, false);
    } else {
      const absl::StatusOr<tk::Decision> d =
          co_await tk::async_check(limiter, req.tenant, 1, asio::use_awaitable);
      if (!d.ok()) {
        out = response(503, "Service Unavailable",
                       std::string(d.status().message()) + "\n", nullptr,
                       req.keep_alive);
      } else {
        const tk::RateLimitHeaders fields =
            tk::rate_limit_headers(*d, tk::SystemClock{}.now_ms(), window_ms);
        out = d->allowed
                  ? response(200, "OK", "hello\n", &fields, req.keep_alive)
                  : response(429, "Too Many Requests", "slow down\n", &fields,
                             req.keep_alive);
      }
    }
    try {
      co_await asio::async_write(socket, asio::buffer(out),
                                 asio::use_awaitable);
    } catch (const std::exception&) {
      co_return;
    }
    if (req.has_body || !req.keep_alive) co_return;
  }
}

template <class Engine>
asio::awaitable<void> accept(tcp::acceptor& acceptor, Engine& limiter,
                             int64_t window_ms) {
  for (;;) {
    tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
    socket.set_option(tcp::no_delay(true));
    asio::co_spawn(acceptor.get_executor(),
                   serve(std::move(socket), limiter, window_ms),
                   asio::detached);
  }
}

// Listens on `port` and runs the loop on this thread until a signal.
template <class Engine>
int run(Engine& limiter, int port, int64_t window_ms, std::string_view what) {
  asio::io_context io(1);
  tcp::acceptor acceptor(io);
  try {
    const tcp::endpoint at(asio::ip::make_address("127.0.0.1"),
                           static_cast<uint16_t>(port));
    acceptor.open(at.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(at);
    acceptor.listen();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asio_http_server: cannot listen on port %d: %s\n",
                 port, e.what());
    return 1;
  }
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&io](const asio::error_code&, int) { io.stop(); });
  asio::co_spawn(io, accept(acceptor, limiter, window_ms), asio::detached);
  std::printf(
      "asio_http_server: listening on port %d (%.*s, one event-loop "
      "thread)\n",
      acceptor.local_endpoint().port(), static_cast<int>(what.size()),
      what.data());
  std::fflush(stdout);
  io.run();
  return 0;
}

int usage(const std::string& why) {
  std::fprintf(stderr,
               "asio_http_server: %s\nusage: asio_http_server [--port N] "
               "[--limit N] [--window-ms MS] [--redis HOST:PORT] "
               "[--prefix P]\n",
               why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 8080;
  int64_t limit = 10;
  int64_t window_ms = 60'000;
  std::string redis;
  std::string prefix = "asio-http";
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) return usage(std::string(flag) + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--port") {
      if (!absl::SimpleAtoi(value, &port) || port < 0 || port > 65535) {
        return usage("--port wants 0 .. 65535");
      }
    } else if (flag == "--limit") {
      if (!absl::SimpleAtoi(value, &limit)) return usage("--limit wants N");
    } else if (flag == "--window-ms") {
      if (!absl::SimpleAtoi(value, &window_ms)) {
        return usage("--window-ms wants MS");
      }
    } else if (flag == "--redis") {
      redis = value;
    } else if (flag == "--prefix") {
      prefix = value;
    } else {
      return usage("unknown flag " + std::string(flag));
    }
  }
  const tk::FixedWindow::Options policy{.limit = limit, .window_ms = window_ms};
  if (redis.empty()) {
    absl::StatusOr<tk::RateLimiter<tk::FixedWindow>> limiter =
        tk::RateLimiter<tk::FixedWindow>::create(policy);
    if (!limiter.ok()) return usage(std::string(limiter.status().message()));
    return run(*limiter, port, window_ms, "in-memory limiter");
  }
#ifdef THROTTLEKIT_EXAMPLE_REDIS
  const size_t colon = redis.rfind(':');
  int redis_port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(redis.substr(colon + 1), &redis_port)) {
    return usage("--redis wants HOST:PORT");
  }
  absl::StatusOr<std::unique_ptr<tk::RedisCoordinator>> store =
      tk::RedisCoordinator::create(
          {.host = redis.substr(0, colon), .port = redis_port});
  if (!store.ok()) return usage(std::string(store.status().message()));
  absl::StatusOr<std::unique_ptr<tk::StrictRateLimiter<tk::FixedWindow>>>
      limiter = tk::StrictRateLimiter<tk::FixedWindow>::create(
          policy, std::shared_ptr<tk::Coordinator>(*std::move(store)),
          {.prefix = prefix});
  if (!limiter.ok()) return usage(std::string(limiter.status().message()));
  return run(**limiter, port, window_ms, "strict Redis checks");
#else
  return usage("--redis: this build has no Redis backend");
#endif
}
