// The forward-auth door beside a plain 200 on the same HTTP server
// (docs/gateways.md, "Benchmark"; issue 51's target: at least 0.8x).
//
// Both are cpp-httplib servers on loopback with the door's settings (64
// threads, kept connections, TCP_NODELAY): `plain` answers `200 ok` to every
// GET; the door (ForwardAuthDoor) decides each request through a server's Envoy
// door on the embedded store (one descriptor read from X-Real-IP, 2^31 a
// second: every request admitted and counted) and answers 200 with the draft06
// fields. One iteration: `conns` client threads, each on a keep-alive
// connection, send requests back to back for 1 s; the rate is what all of
// them got answered. After the runs the ratio door / plain is printed per
// connection count.
//
//     build/release/bench/forward_auth_benchmark

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "config.h"
#include "forward_auth_door.h"
#include "httplib.h"
#include "policies.h"
#include "server.h"

namespace {

using throttlekit::server::ForwardAuthDoor;
using throttlekit::server::Policies;
using throttlekit::server::Server;
using throttlekit::server::ServerConfig;

constexpr double kSeconds = 1.0;

const char* const kConfig = R"(
version: 1
envoy:
  headers: draft06
  domains:
    - domain: bench
      descriptors:
        - key: client
          rate_limit: {unit: second, requests_per_unit: 2147483648}
forwardAuth:
  routes:
    - path: /auth
      domain: bench
      descriptors:
        - [{key: client, from: clientAddress}]
)";

// The plain server: 200 ok to every GET.
class Plain {
 public:
  Plain() {
    // The door's settings (forward_auth_door.cc): 64 threads, connections
    // kept open for any number of requests.
    http_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    http_.set_keep_alive_max_count(std::numeric_limits<size_t>::max());
    http_.set_tcp_nodelay(true);
    http_.Get(".*", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~Plain() {
    http_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
};

// The door and the server behind it.
class Door {
 public:
  Door() {
    absl::StatusOr<ServerConfig> config =
        throttlekit::server::parse_config(kConfig, "bench.yaml");
    if (!config.ok()) std::abort();
    auto policies = Policies::create(*config, nullptr);
    if (!policies.ok()) std::abort();
    auto server =
        Server::start(*std::move(policies), {.listen = "127.0.0.1:0"});
    if (!server.ok()) std::abort();
    server_ = *std::move(server);
    auto door =
        ForwardAuthDoor::start("127.0.0.1", 0, *server_, config->forward_auth);
    if (!door.ok()) std::abort();
    door_ = *std::move(door);
  }
  ~Door() {
    door_.reset();
    server_->shutdown();
  }
  int port() const { return door_->port(); }

 private:
  std::unique_ptr<Server> server_;
  std::unique_ptr<ForwardAuthDoor> door_;
};

// Requests answered 200 per second by `conns` keep-alive clients of `port`
// asking `path` for kSeconds.
double rate(int port, const char* path, int conns) {
  std::atomic<int64_t> answered{0};
  std::atomic<int64_t> failed{0};
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(kSeconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < conns; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      const httplib::Headers headers = {
          {"X-Real-IP", "10.0.0." + std::to_string(c % 250)}};
      while (std::chrono::steady_clock::now() < until) {
        httplib::Result r = client.Get(path, headers);
        if (r && r->status == 200) {
          answered.fetch_add(1, std::memory_order_relaxed);
        } else {
          failed.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (failed.load() > 0) {
    std::fprintf(stderr, "%s: %lld requests failed\n", path,
                 static_cast<long long>(failed.load()));
  }
  return static_cast<double>(answered.load()) / kSeconds;
}

std::map<std::pair<int, int>, double>& rates() {
  static auto* r = new std::map<std::pair<int, int>, double>();
  return *r;
}

// arg 0: 0 plain, 1 the door; arg 1: connections.
void BM_Http(benchmark::State& state) {
  const bool door = state.range(0) == 1;
  const int conns = static_cast<int>(state.range(1));
  static Plain* plain = new Plain();
  static Door* auth = new Door();
  double r = 0;
  for (auto _ : state) {
    r = door ? rate(auth->port(), "/auth", conns)
             : rate(plain->port(), "/plain", conns);
    state.SetIterationTime(kSeconds);
  }
  state.counters["requests_per_s"] = r;
  state.SetLabel(door ? "forward-auth door" : "plain 200");
  rates()[{state.range(0), conns}] = r;
}
BENCHMARK(BM_Http)
    ->ArgsProduct({{0, 1}, {1, 8, 32}})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (int conns : {1, 8, 32}) {
    const auto plain = rates().find({0, conns});
    const auto door = rates().find({1, conns});
    if (plain == rates().end() || door == rates().end() || plain->second <= 0) {
      continue;
    }
    std::printf("%d connection(s): door %.0f/s, plain %.0f/s, ratio %.2f\n",
                conns, door->second, plain->second,
                door->second / plain->second);
  }
  return 0;
}
