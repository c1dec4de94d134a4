// src/server/http_door.cc: metrics and health over HTTP (http_door.h).

#include "http_door.h"

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace throttlekit::server {
namespace {

// cpp-httplib reads a route as a regular expression: a configured path is
// matched as written.
std::string literal_route(std::string_view path) {
  std::string out;
  for (const char c : path) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

struct HttpDoor::Impl {
  httplib::Server http;
  int port = 0;
  std::thread thread;
};

HttpDoor::HttpDoor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpDoor>> HttpDoor::start(
    const HttpDoorOptions& options, Server& server) {
  const std::string& host = options.host;
  const int port = options.port;
  if (options.loopback_only && host != "127.0.0.1" && host != "::1" &&
      host != "localhost") {
    return absl::InvalidArgumentError(absl::StrCat(
        "the metrics door listens on loopback only (127.0.0.1, ::1 or "
        "localhost); got ",
        host));
  }
  if (!options.metrics_path.empty() && options.metrics_path.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "the metrics path must start with /; got ", options.metrics_path));
  }
  auto impl = std::make_unique<Impl>();
  if (!options.metrics_path.empty()) {
    impl->http.Get(literal_route(options.metrics_path),
                   [&server](const httplib::Request&, httplib::Response& res) {
                     res.set_content(
                         server.prometheus_text(),
                         "text/plain; version=0.0.4; charset=utf-8");
                   });
  }
  if (options.healthz) {
    impl->http.Get("/healthz", [&server](const httplib::Request&,
                                         httplib::Response& res) {
      if (server.healthy()) {
        res.set_content("ok\n", "text/plain");
      } else {
        res.status = 503;
        res.set_content(
            absl::StrCat("the ", std::string(server.policies().store_name()),
                         " store does not answer\n"),
            "text/plain");
      }
    });
  }
  if (options.healthcheck) {
    const bool needs_config = options.healthy_needs_config;
    impl->http.Get("/healthcheck", [&server, needs_config](
                                       const httplib::Request&,
                                       httplib::Response& res) {
      if (needs_config && server.policies().envoy() == nullptr) {
        res.status = 500;
        res.set_content("no rate limit configuration loaded yet\n",
                        "text/plain");
      } else if (!server.healthy()) {
        res.status = 500;
        res.set_content(
            absl::StrCat("the ", std::string(server.policies().store_name()),
                         " store does not answer\n"),
            "text/plain");
      } else {
        res.set_content("OK", "text/plain");
      }
    });
  }
  impl->port = port == 0 ? impl->http.bind_to_any_port(host)
                         : (impl->http.bind_to_port(host, port) ? port : -1);
  if (impl->port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("the HTTP door cannot listen on ", host, ":", port));
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->http.listen_after_bind(); });
  // Serving before it returns, so a stop can never precede the listen loop
  // (it would then wait for a connection that never comes).
  while (!raw->http.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<HttpDoor>(new HttpDoor(std::move(impl)));
}

HttpDoor::~HttpDoor() {
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int HttpDoor::port() const { return impl_->port; }

}  // namespace throttlekit::server
