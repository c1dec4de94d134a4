// src/server/http_door.cc: /metrics and /healthz over HTTP (http_door.h).

#include "http_door.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace throttlekit::server {

struct HttpDoor::Impl {
  httplib::Server http;
  int port = 0;
  std::thread thread;
};

HttpDoor::HttpDoor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpDoor>> HttpDoor::start(
    const std::string& host, int port, Server& server) {
  if (host != "127.0.0.1" && host != "::1" && host != "localhost") {
    return absl::InvalidArgumentError(absl::StrCat(
        "the metrics door listens on loopback only (127.0.0.1, ::1 or "
        "localhost); got ",
        host));
  }
  auto impl = std::make_unique<Impl>();
  impl->http.Get("/metrics",
                 [&server](const httplib::Request&, httplib::Response& res) {
                   res.set_content(server.prometheus_text(),
                                   "text/plain; version=0.0.4; charset=utf-8");
                 });
  impl->http.Get(
      "/healthz", [&server](const httplib::Request&, httplib::Response& res) {
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
  impl->port = port == 0 ? impl->http.bind_to_any_port(host)
                         : (impl->http.bind_to_port(host, port) ? port : -1);
  if (impl->port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("the metrics door cannot listen on ", host, ":", port));
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
