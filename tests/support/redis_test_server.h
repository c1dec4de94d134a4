// Test support: the Redis server the ctest fixture started
// (tests/servers/redis_server.sh), and private servers for fault tests.

#ifndef THROTTLEKIT_TESTS_SUPPORT_REDIS_TEST_SERVER_H_
#define THROTTLEKIT_TESTS_SUPPORT_REDIS_TEST_SERVER_H_

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit::testing {

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// The fixture server's port (THROTTLEKIT_REDIS_PORT).
inline int redis_port() {
  return std::atoi(env_or("THROTTLEKIT_REDIS_PORT", "16379").c_str());
}

// How long a test waits for a new coordinator's connections (wait_ready).
inline constexpr absl::Duration kReadyWithin = absl::Seconds(10);

// A coordinator on the fixture server. On the fixture's port it is ready
// when returned: its connections open and set up (scripts loaded), as a
// service waits for before taking traffic (`wait_ready`), so a test's first
// calls are calls, not a wait for a connection inside their deadline (a
// connection set up under the parallel pass's load can take longer than a
// 250 ms deadline). On another port (nothing listening, a private server)
// it is returned at once.
inline std::unique_ptr<RedisCoordinator> redis_coordinator(
    RedisCoordinatorOptions options = {}) {
  options.port = options.port == 6379 ? redis_port() : options.port;
  auto c = RedisCoordinator::create(options);
  if (!c.ok()) std::abort();
  if (options.port == redis_port()) {
    if (absl::Status s = (*c)->wait_ready(absl::Now() + kReadyWithin);
        !s.ok()) {
      std::fprintf(stderr, "the fixture's Redis is not ready: %s\n",
                   s.ToString().c_str());
    }
  }
  return *std::move(c);
}

// A ready coordinator on the fixture server for a forked fleet process, or
// null if it cannot connect: the process then reports an error (aborting
// would only leave its report missing).
inline std::shared_ptr<RedisCoordinator> fleet_redis_coordinator() {
  auto c = RedisCoordinator::create({.port = redis_port()});
  if (!c.ok() || !(*c)->wait_ready(absl::Now() + kReadyWithin).ok()) {
    return nullptr;
  }
  return *std::move(c);
}

// The output lines of the shell command `cmd`.
inline std::vector<std::string> shell_lines(const std::string& cmd) {
  std::vector<std::string> lines;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return lines;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
      line.pop_back();
    }
    lines.push_back(line);
  }
  pclose(p);
  return lines;
}

// The reply lines of `redis-cli` against the fixture server running
// `command` (any Redis client sees what the scripts wrote). Arguments are
// split by the shell: keep them to letters, digits, ':' and '-'.
inline std::vector<std::string> redis_cli(const std::string& command) {
  return shell_lines("redis-cli -p " + std::to_string(redis_port()) + " " +
                     command);
}

// A private redis-server on `port`, started and stopped by the fixture
// script, for tests that kill, freeze or restart it.
class PrivateRedis {
 public:
  explicit PrivateRedis(int port)
      : port_(port),
        dir_(env_or("THROTTLEKIT_TEST_SERVERS_DIR", "/tmp") + "/redis-" +
             std::to_string(port)) {}
  ~PrivateRedis() { run("stop"); }

  bool start() { return run("start"); }
  bool stop() { return run("stop"); }
  // SIGKILL: the server dies at once, with no reply to anything in flight.
  void kill() { signal(SIGKILL); }
  void freeze() { signal(SIGSTOP); }
  void thaw() { signal(SIGCONT); }
  int port() const { return port_; }

 private:
  bool run(const char* action) {
    const std::string cmd = "bash '" +
                            env_or("THROTTLEKIT_REDIS_SERVER_SCRIPT",
                                   "tests/servers/redis_server.sh") +
                            "' " + action + " '" + dir_ + "' " +
                            std::to_string(port_) + " >/dev/null";
    return std::system(cmd.c_str()) == 0;
  }
  void signal(int sig) {
    std::ifstream in(dir_ + "/redis.pid");
    long pid = 0;
    if (in >> pid && pid > 0) ::kill(static_cast<pid_t>(pid), sig);
  }

  int port_;
  std::string dir_;
};

// The deadlines of the fault-stream tests (a private server frozen and
// killed under load) and the scheduling slack allowed on a loaded 2-core
// machine (and ThreadSanitizer) beyond them; a hang would be seconds.
inline constexpr absl::Duration kFaultCommandTimeout = absl::Milliseconds(100);
inline constexpr absl::Duration kFaultConnectTimeout = absl::Milliseconds(200);
inline constexpr absl::Duration kFaultMargin = absl::Milliseconds(400);

// A coordinator on `server` with the fault-stream deadlines.
inline std::shared_ptr<RedisCoordinator> fault_coordinator(
    const PrivateRedis& server) {
  return *RedisCoordinator::create({.port = server.port(),
                                    .connect_timeout = kFaultConnectTimeout,
                                    .command_timeout = kFaultCommandTimeout});
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_REDIS_TEST_SERVER_H_
