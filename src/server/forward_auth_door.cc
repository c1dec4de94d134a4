// src/server/forward_auth_door.cc: the forward-auth endpoint over HTTP
// (forward_auth_door.h).

#include "forward_auth_door.h"

#include <chrono>
#include <limits>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "envoy_rls.h"
#include "forward_auth.h"
#include "httplib.h"

namespace throttlekit::server {

struct ForwardAuthDoor::Impl {
  explicit Impl(ForwardAuthConfig config) : routes(std::move(config)) {}
  ForwardAuthRoutes routes;
  httplib::Server http;
  int port = 0;
  std::thread thread;
};

namespace {

namespace rls = ::envoy::service::ratelimit::v3;

// The door's threads: the connections it serves at once.
constexpr size_t kForwardAuthThreads = 64;

// The answer to `req` through `server`'s Envoy door.
ForwardAuthAnswer decide(const ForwardAuthConfig& config, Server& server,
                         const httplib::Request& req) {
  const ForwardAuthRoute* route = config.find(req.path);
  if (route == nullptr) {
    return ForwardAuthAnswer{
        .status = 404,
        .headers = {},
        .body = absl::StrCat("no forward-auth route ", req.path, "\n")};
  }
  const auto header =
      [&req](std::string_view name) -> std::optional<std::string_view> {
    // httplib's headers compare names in any case.
    const auto it = req.headers.find(std::string(name));
    if (it == req.headers.end()) return std::nullopt;
    return std::string_view(it->second);
  };
  // The target after the route's path: ext_authz's original path.
  std::string_view rest = req.target;
  rest = rest.size() > route->path.size() &&
                 rest.substr(0, route->path.size()) == route->path
             ? rest.substr(route->path.size())
             : std::string_view();
  if (!rest.empty() && rest.front() == '?') rest = {};  // the route's own query
  absl::StatusOr<rls::RateLimitRequest> request = forward_auth_request(
      *route, header, {.method = req.method, .rest = rest});
  if (!request.ok()) return forward_auth_error(request.status());
  const std::shared_ptr<EnvoyLimits> limits = server.policies().envoy();
  if (limits == nullptr) {
    return forward_auth_error(absl::UnavailableError(
        "forward auth: the server has no `envoy:` domains"));
  }
  rls::RateLimitResponse response;
  if (absl::Status s = limits->should_rate_limit(*request, &response);
      !s.ok()) {
    return forward_auth_error(s);
  }
  return forward_auth_answer(response, *route);
}

}  // namespace

ForwardAuthDoor::ForwardAuthDoor(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<ForwardAuthDoor>> ForwardAuthDoor::start(
    const std::string& host, int port, Server& server,
    ForwardAuthConfig config) {
  if (config.routes.empty()) {
    return absl::InvalidArgumentError(
        "the forward-auth door needs routes (a `forwardAuth:` block)");
  }
  auto impl = std::make_unique<Impl>(std::move(config));
  // Proxies keep a few connections open and send every request over them:
  // a thread per kept connection (httplib serves one connection on a
  // thread until it closes), and no cap on the requests one carries.
  impl->http.new_task_queue = [] {
    return new httplib::ThreadPool(kForwardAuthThreads);
  };
  impl->http.set_keep_alive_max_count(std::numeric_limits<size_t>::max());
  // An answer goes out at once: without it Nagle's algorithm holds the
  // last segment of an answer on a kept connection until the proxy's
  // delayed ACK, 40 ms a request.
  impl->http.set_tcp_nodelay(true);
  Impl* raw = impl.get();
  const auto handler = [raw, &server](const httplib::Request& req,
                                      httplib::Response& res) {
    const std::shared_ptr<const ForwardAuthConfig> routes = raw->routes.get();
    const ForwardAuthAnswer a = decide(*routes, server, req);
    res.status = a.status;
    for (const auto& [name, value] : a.headers) res.set_header(name, value);
    res.set_content(a.body, "text/plain");
  };
  // Whatever method the proxy's subrequest has (nginx keeps the original
  // one; HEAD is answered by the GET handler).
  impl->http.Get(".*", handler);
  impl->http.Post(".*", handler);
  impl->http.Put(".*", handler);
  impl->http.Patch(".*", handler);
  impl->http.Delete(".*", handler);
  impl->http.Options(".*", handler);
  impl->port = port == 0 ? impl->http.bind_to_any_port(host)
                         : (impl->http.bind_to_port(host, port) ? port : -1);
  if (impl->port <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "the forward-auth door cannot listen on ", host, ":", port));
  }
  impl->thread = std::thread([raw] { raw->http.listen_after_bind(); });
  // Serving before it returns, so a stop can never precede the listen loop.
  while (!raw->http.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<ForwardAuthDoor>(new ForwardAuthDoor(std::move(impl)));
}

ForwardAuthDoor::~ForwardAuthDoor() {
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int ForwardAuthDoor::port() const { return impl_->port; }

ForwardAuthRoutes& ForwardAuthDoor::routes() { return impl_->routes; }

}  // namespace throttlekit::server
