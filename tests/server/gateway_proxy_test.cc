// The forward-auth door behind the real proxies (docs/gateways.md):
// Debian's nginx (auth_request, the refusal mapped to 429 by error_page,
// the fields copied with auth_request_set) and Debian's Caddy
// (forward_auth), each started on loopback from the configurations shipped
// in examples/gateways/ (their ports and paths replaced), in front of a
// counting upstream, with a throttlekit-server of examples/gateways/
// server.yaml (10 requests a second per client address) in process.
//
// Four client threads send 200 requests a second through the proxy for
// three seconds, each request timed from send to answer. Then: every
// answer is 200 or 429; the upstream received exactly the 200s; in every
// window (second) the requests sent and answered within it admitted at
// most the limit; over the run the proxy admitted no more than the limit
// per window touched and at least the limit per window the run covered
// whole; and the fields the client saw are the door's (nginx: RateLimit-*
// on every answer, Retry-After on a refusal; Caddy: the door's answer, its
// fields and Retry-After, on a refusal).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "config.h"
#include "forward_auth_door.h"
#include "forward_auth_served.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "policies.h"
#include "server.h"
#include "support/child_process.h"
#include "throttlekit/core/clock.h"

namespace throttlekit::server {
namespace gateway_proxy_test {
namespace {

constexpr int kLimit = 10;  // examples/gateways/server.yaml
constexpr int kThreads = 4;
constexpr int kEveryMs = 20;  // per thread: 200 requests a second in all
constexpr int64_t kRunMs = 3000;

int64_t now_ms() { return SystemClock{}.now_ms(); }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::string examples() {
  const char* dir = std::getenv("THROTTLEKIT_GATEWAY_EXAMPLES");
  EXPECT_NE(dir, nullptr) << "THROTTLEKIT_GATEWAY_EXAMPLES names "
                             "examples/gateways (the ctest entry sets it)";
  return dir == nullptr ? "" : dir;
}

// A loopback port nobody listens on now.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Whether something accepts on 127.0.0.1:port within `ms`.
bool accepts(int port, int64_t ms) {
  const int64_t until = now_ms() + ms;
  while (now_ms() < until) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The application behind the proxy: counts what reaches it.
class Upstream {
 public:
  Upstream() {
    http_.Get(".*", [this](const httplib::Request&, httplib::Response& res) {
      hits_.fetch_add(1);
      res.set_content("up\n", "text/plain");
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~Upstream() {
    http_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  int64_t hits() const { return hits_.load(); }

 private:
  httplib::Server http_;
  int port_ = 0;
  std::atomic<int64_t> hits_{0};
  std::thread thread_;
};

// A proxy process, its output in `dir`/proxy.log; stopped (SIGTERM, then
// SIGKILL) when destroyed.
class Proxy {
 public:
  Proxy(const std::string& dir, const std::string& command) : dir_(dir) {
    child_ = testing::spawn("/bin/bash",
                            {"-c", absl::StrCat("exec ", command, " > '", dir,
                                                "/proxy.log' 2>&1")});
  }
  ~Proxy() {
    kill(child_.pid, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (waitpid(child_.pid, nullptr, WNOHANG) == child_.pid) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(child_.pid, SIGKILL);
    waitpid(child_.pid, nullptr, 0);
  }
  std::string log() const { return read_text(dir_ + "/proxy.log"); }

 private:
  std::string dir_;
  testing::Child child_;
};

// One request through the proxy.
struct Sent {
  int64_t sent_ms = 0;
  int64_t answered_ms = 0;
  int status = 0;
  std::string limit, remaining, retry_after;
};

class GatewayProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/gateway-", getpid(), "-",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_EQ(
        std::system(absl::StrCat("rm -rf '", dir_, "' && mkdir -p '", dir_, "'")
                        .c_str()),
        0);
    absl::StatusOr<ServerConfig> config =
        load_config(examples() + "/server.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    ASSERT_TRUE(served_.start(*config));
    proxy_port_ = free_port();
  }

  // The example's text with its ports made this run's.
  std::string example(const std::string& name, const std::string& listen) {
    return absl::StrReplaceAll(
        read_text(examples() + "/" + name),
        {{"127.0.0.1:9090", absl::StrCat("127.0.0.1:", served_.door->port())},
         {"127.0.0.1:8080", absl::StrCat("127.0.0.1:", upstream_.port())},
         {listen, absl::StrCat("127.0.0.1:", proxy_port_)}});
  }

  // Sends the traffic through the proxy and checks what came back.
  void run_traffic(bool fields_on_admissions) {
    ASSERT_TRUE(accepts(proxy_port_, 10'000)) << "the proxy did not start";
    // Each window starts in step with the clock: begin just after one.
    while (now_ms() % 1000 > 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const int64_t start = now_ms();
    std::mutex mu;
    std::vector<Sent> sent;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        httplib::Client client("127.0.0.1", proxy_port_);
        client.set_keep_alive(true);
        int64_t next = start + t * kEveryMs / kThreads;
        while (next < start + kRunMs) {
          std::this_thread::sleep_for(
              std::chrono::milliseconds(std::max<int64_t>(0, next - now_ms())));
          next += kEveryMs;
          Sent s;
          s.sent_ms = now_ms();
          httplib::Result r = client.Get("/items?page=1");
          s.answered_ms = now_ms();
          if (r) {
            s.status = r->status;
            s.limit = r->get_header_value("RateLimit-Limit");
            s.remaining = r->get_header_value("RateLimit-Remaining");
            s.retry_after = r->get_header_value("Retry-After");
          }
          std::lock_guard lock(mu);
          sent.push_back(std::move(s));
        }
      });
    }
    for (std::thread& t : threads) t.join();

    std::map<int64_t, int> admitted;  // by window, attributed
    int64_t ok = 0, refused = 0, unattributed = 0;
    for (const Sent& s : sent) {
      ASSERT_TRUE(s.status == 200 || s.status == 429)
          << "answered " << s.status;
      if (s.status == 200) {
        ++ok;
        if (s.sent_ms / 1000 == s.answered_ms / 1000) {
          ++admitted[s.sent_ms / 1000];
        } else {
          ++unattributed;
        }
        if (fields_on_admissions) {
          EXPECT_EQ(s.limit, absl::StrCat(kLimit));
          EXPECT_FALSE(s.remaining.empty());
        }
      } else {
        ++refused;
        EXPECT_EQ(s.retry_after, "1") << "seconds to the window's end";
        EXPECT_EQ(s.limit, absl::StrCat(kLimit));
        EXPECT_EQ(s.remaining, "0");
      }
    }
    const int64_t first = sent.front().sent_ms / 1000;
    int64_t last = first;
    for (const Sent& s : sent) last = std::max(last, s.answered_ms / 1000);
    // The run covered whole windows (first, last) exclusive.
    const int64_t whole = std::max<int64_t>(0, last - first - 1);
    std::string per;
    for (const auto& [w, n] : admitted) {
      absl::StrAppend(&per, w - first, ":", n, " ");
      EXPECT_LE(n, kLimit) << "window " << w - first;
    }
    EXPECT_EQ(upstream_.hits(), ok) << "the upstream got exactly the 200s";
    EXPECT_EQ(ok + refused, static_cast<int64_t>(sent.size()));
    EXPECT_LE(ok, kLimit * (last - first + 1));
    EXPECT_GE(ok, kLimit * whole);
    EXPECT_GT(refused, ok) << "the traffic was well over the limit";
    std::printf(
        "%zu requests: %lld admitted (%lld across a window's end), %lld "
        "refused; admitted per window: %s\n",
        sent.size(), static_cast<long long>(ok),
        static_cast<long long>(unattributed), static_cast<long long>(refused),
        per.c_str());
  }

  std::string dir_;
  Upstream upstream_;
  testing::ServedDoor served_;
  int proxy_port_ = 0;
};

TEST_F(GatewayProxyTest, NginxAuthRequestHoldsTheLimitPerWindow) {
  // Debian's nginx, its main configuration around the example's server
  // block: everything it writes in this run's directory.
  const std::string site = example("nginx.conf", "127.0.0.1:8000");
  write_text(dir_ + "/site.conf", site);
  write_text(
      dir_ + "/nginx.conf",
      absl::StrCat(
          "worker_processes 1;\npid ", dir_, "/nginx.pid;\nerror_log ", dir_,
          "/error.log warn;\nevents { worker_connections 256; "
          "}\nhttp {\n  access_log off;\n",
          "  client_body_temp_path ", dir_, "/body;\n  proxy_temp_path ", dir_,
          "/proxy;\n  fastcgi_temp_path ", dir_,
          "/fastcgi;\n  uwsgi_temp_path ", dir_, "/uwsgi;\n  scgi_temp_path ",
          dir_, "/scgi;\n  include ", dir_, "/site.conf;\n}\n"));
  ASSERT_EQ(access("/usr/sbin/nginx", X_OK), 0)
      << "nginx is not installed (scripts/install-deps.sh test installs it)";
  Proxy nginx(dir_,
              absl::StrCat("/usr/sbin/nginx -c '", dir_, "/nginx.conf' -p '",
                           dir_, "' -g 'daemon off;'"));
  run_traffic(/*fields_on_admissions=*/true);
  if (HasFailure()) {
    std::printf("nginx: %s\n%s\n", nginx.log().c_str(),
                read_text(dir_ + "/error.log").c_str());
  }
}

TEST_F(GatewayProxyTest, CaddyForwardAuthHoldsTheLimitPerWindow) {
  // Debian's Caddy, the example's site after global options that keep it
  // to this run (no admin endpoint, no certificates, no logs).
  write_text(dir_ + "/Caddyfile",
             absl::StrCat("{\n\tadmin off\n\tauto_https off\n\tstorage "
                          "file_system ",
                          dir_, "/caddy\n\tlog {\n\t\toutput discard\n\t}\n}\n",
                          example("Caddyfile", "127.0.0.1:8001")));
  ASSERT_EQ(access("/usr/bin/caddy", X_OK), 0)
      << "caddy is not installed (scripts/install-deps.sh test installs it)";
  Proxy caddy(dir_, absl::StrCat("env HOME='", dir_, "' XDG_DATA_HOME='", dir_,
                                 "' XDG_CONFIG_HOME='", dir_,
                                 "' /usr/bin/caddy run --adapter caddyfile "
                                 "--config '",
                                 dir_, "/Caddyfile'"));
  run_traffic(/*fields_on_admissions=*/false);
  if (HasFailure()) std::printf("caddy: %s\n", caddy.log().c_str());
}

}  // namespace
}  // namespace gateway_proxy_test
}  // namespace throttlekit::server
