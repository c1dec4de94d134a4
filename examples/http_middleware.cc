// An HTTP server whose handlers are wrapped in admission control
// (docs/server.md, "HTTP middleware"): cpp-httplib serves GET /hello, and
// every request first passes one `admit(tenant)`: at most 64 in flight, and
// per tenant (the `X-Tenant` header) a GCRA of 100 requests a second with
// bursts of 50. A denial is 429 with the rate-limit fields in the style the
// server chose and `Retry-After`; an admission runs the handler, sends the
// same fields, and releases its slot when the response is ready.
//
//     http_middleware [--port 8080] [--fields
//     structured|draft07|draft06|legacy]
//                     [--server HOST:PORT] [--no-limit] [--rate N]
//
// --server sends each admission to a throttlekit-server instead (its `http`
// policy: Admit, then Release), so many HTTP servers can share one budget;
// --no-limit serves without admission (the baseline of the benchmark,
// scripts/bench_http.sh). The first line on stdout is
// `http_middleware: listening on port N`. SIGINT or SIGTERM stops it.

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/core/binding_axis.h"
#include "throttlekit/observe/rate_limit_fields.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/gcra.h"

#ifdef THROTTLEKIT_EXAMPLE_SERVER
#include <grpcpp/grpcpp.h>

#include "throttlekit/v1/throttlekit.grpc.pb.h"
#endif

namespace tk = throttlekit;

namespace {

// What one admission said, whichever backend made it.
struct Verdict {
  tk::Decision decision;
  std::string binding_axis;  // empty when allowed
  // Releases the slot (when one is held) once the response is ready.
  std::function<void()> release;
};

// The in-process backend: the library's UnifiedAdmission.
class LocalAdmission {
 public:
  using Door = tk::UnifiedAdmission<tk::RateLimiter<tk::Gcra>>;

  static std::unique_ptr<LocalAdmission> create(int64_t rate) {
    auto gcra = tk::RateLimiter<tk::Gcra>::create(
        {.limit = rate,
         .period_ms = 1000,
         .burst = std::max<int64_t>(1, rate / 2)});
    if (!gcra.ok()) return nullptr;
    auto door =
        Door::create({.max_inflight = 64,
                      .rate = std::make_shared<tk::RateLimiter<tk::Gcra>>(
                          *std::move(gcra))});
    if (!door.ok()) return nullptr;
    return std::unique_ptr<LocalAdmission>(
        new LocalAdmission(*std::move(door)));
  }

  absl::StatusOr<Verdict> admit(const std::string& tenant) {
    absl::StatusOr<tk::Admission> a = door_->admit(tenant);
    if (!a.ok()) return a.status();
    Verdict v;
    v.decision = a->decision();
    if (std::optional<tk::Axis> axis = a->binding_axis()) {
      v.binding_axis = std::string(tk::axis_name(*axis));
    }
    if (a->holds_slot()) {
      auto held = std::make_shared<tk::Admission>(*std::move(a));
      v.release = [held] { held->release(tk::PermitOutcome::kSuccess); };
    }
    return v;
  }

 private:
  explicit LocalAdmission(std::unique_ptr<Door> door)
      : door_(std::move(door)) {}
  std::unique_ptr<Door> door_;
};

#ifdef THROTTLEKIT_EXAMPLE_SERVER
// The remote backend: throttlekit-server's `http` policy.
class RemoteAdmission {
 public:
  explicit RemoteAdmission(const std::string& target)
      : stub_(throttlekit::v1::RateLimiter::NewStub(
            grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))) {}

  absl::StatusOr<Verdict> admit(const std::string& tenant) {
    throttlekit::v1::AdmitRequest req;
    req.set_policy("http");
    req.set_key(tenant);
    throttlekit::v1::AdmitResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(500));
    const grpc::Status s = stub_->Admit(&ctx, req, &resp);
    if (!s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("throttlekit-server: ", s.error_message()));
    }
    const auto& d = resp.decision();
    Verdict v;
    v.decision = {d.allowed(), d.limit(), d.remaining(), d.reset_at(),
                  d.retry_after_ms()};
    v.binding_axis = resp.binding_axis();
    if (!resp.lease_id().empty()) {
      v.release = [this, id = resp.lease_id()] {
        throttlekit::v1::ReleaseRequest rel;
        rel.set_lease_id(id);
        throttlekit::v1::ReleaseResponse out;
        grpc::ClientContext rctx;
        rctx.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(500));
        // A lost Release costs the slot until its lease expires.
        stub_->Release(&rctx, rel, &out).ok();
      };
    }
    return v;
  }

 private:
  std::unique_ptr<throttlekit::v1::RateLimiter::Stub> stub_;
};
#endif

int usage(const std::string& problem) {
  std::fprintf(
      stderr,
      "http_middleware: %s\nusage: http_middleware [--port N] "
      "[--fields structured|draft07|draft06|legacy] [--server HOST:PORT] "
      "[--no-limit] [--rate N]\n",
      problem.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // SIGINT and SIGTERM are blocked before any thread exists (gRPC's, the
  // store's, the server's workers all inherit the mask) and taken by one
  // thread with sigwait, which stops the server; one sent during start-up
  // waits for it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  int port = 8080;
  int64_t rate = 100;
  tk::RateLimitStyle style = tk::RateLimitStyle::kStructured;
  std::string server;
  bool limit = true;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--no-limit") {
      limit = false;
      continue;
    }
    if (i + 1 >= argc) return usage(std::string(flag) + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--port") {
      if (!absl::SimpleAtoi(value, &port) || port < 0 || port > 65535) {
        return usage("--port wants 0 .. 65535");
      }
    } else if (flag == "--rate") {
      if (!absl::SimpleAtoi(value, &rate) || rate < 1 || rate > 1'000'000'000) {
        return usage("--rate wants 1 .. 10^9");
      }
    } else if (flag == "--fields") {
      const std::optional<tk::RateLimitStyle> named =
          tk::rate_limit_style_from_name(value);
      if (!named.has_value()) {
        return usage("--fields wants structured, draft07, draft06 or legacy");
      }
      style = *named;
    } else if (flag == "--server") {
      server = value;
    } else {
      return usage("unknown flag " + std::string(flag));
    }
  }

  std::unique_ptr<LocalAdmission> local;
#ifdef THROTTLEKIT_EXAMPLE_SERVER
  std::unique_ptr<RemoteAdmission> remote;
  if (!server.empty()) remote = std::make_unique<RemoteAdmission>(server);
#else
  if (!server.empty()) {
    return usage("this build has no gRPC client (throttlekit-server off)");
  }
#endif
  if (server.empty()) local = LocalAdmission::create(rate);
  const auto admit = [&](const std::string& tenant) -> absl::StatusOr<Verdict> {
#ifdef THROTTLEKIT_EXAMPLE_SERVER
    if (remote != nullptr) return remote->admit(tenant);
#endif
    return local->admit(tenant);
  };
  const tk::RateLimitPolicyName policy =
      *tk::RateLimitPolicyName::create("http");

  httplib::Server http;
  // httplib serves each keep-alive connection on one worker thread until it
  // closes; the default pool (a handful of threads) leaves most of a busy
  // client's connections waiting, so give it room for 64 at once.
  http.new_task_queue = [] { return new httplib::ThreadPool(64); };
  // Small responses must not wait for the peer's delayed ACK (Nagle).
  http.set_tcp_nodelay(true);
  const auto hello = [](const httplib::Request&, httplib::Response& res) {
    res.set_content("hello\n", "text/plain");
  };
  if (!limit) {
    http.Get("/hello", hello);
  } else {
    // The middleware: one admission around the handler.
    http.Get("/hello", [&](const httplib::Request& req,
                           httplib::Response& res) {
      std::string tenant = req.get_header_value("X-Tenant");
      if (tenant.empty()) tenant = "anonymous";
      absl::StatusOr<Verdict> v = admit(tenant);
      if (!v.ok()) {
        // The limiter could not decide (a bad tenant key, a server away):
        // this example fails closed.
        res.status = 503;
        res.set_content(std::string(v.status().message()) + "\n", "text/plain");
        return;
      }
      const int64_t now_ms = tk::SystemClock{}.now_ms();
      tk::rate_limit_fields(v->decision, now_ms, policy, 1000, style)
          .for_each([&](std::string_view k, std::string_view val) {
            res.set_header(std::string(k), std::string(val));
          });
      if (!v->decision.allowed) {
        res.status = 429;
        res.set_content(
            absl::StrCat("{\"error\":\"rate limited\",\"binding_axis\":\"",
                         v->binding_axis, "\"}\n"),
            "application/json");
        return;
      }
      hello(req, res);
      if (v->release) v->release();
    });
  }

  const int bound = port == 0
                        ? http.bind_to_any_port("127.0.0.1")
                        : (http.bind_to_port("127.0.0.1", port) ? port : -1);
  if (bound <= 0) {
    std::fprintf(stderr, "http_middleware: cannot listen on port %d\n", port);
    return 1;
  }
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    http.stop();
  });
  std::printf("http_middleware: listening on port %d (%s)\n", bound,
              !limit           ? "no limit"
              : server.empty() ? "in process"
                               : "server");
  std::fflush(stdout);
  http.listen_after_bind();
  stopper.join();
  return 0;
}
