// The throttlekit-server binary as users run it (src/server/main.cc): it
// loads a configuration file, listens on loopback, serves a real client,
// reclaims the Admit slots of a client process killed with SIGKILL once
// their lease expires, refuses a bad configuration naming the file and the
// path, and exits 0 on SIGTERM. Real clock, real processes.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

// gRPC is initialised only after every fork (a forked gRPC process is not
// safe), so its headers are used in functions the parent calls late.
#include <grpcpp/grpcpp.h>

#include "throttlekit/v1/throttlekit.grpc.pb.h"

extern char** environ;

namespace {

namespace v1 = ::throttlekit::v1;

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/", getpid(), "-", name);
  std::ofstream(path) << text;
  return path;
}

// A throttlekit-server child with its stdout and stderr on pipes.
struct Child {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
};

Child spawn_server(const std::vector<std::string>& args) {
  int out[2], err[2];
  EXPECT_EQ(pipe(out), 0);
  EXPECT_EQ(pipe(err), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, err[0]);
  std::vector<std::string> all = {THROTTLEKIT_SERVER_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  Child c;
  EXPECT_EQ(
      posix_spawn(&c.pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  c.out = out[0];
  c.err = err[0];
  return c;
}

// Reads `fd` until EOF or a newline.
std::string read_line(int fd) {
  std::string line;
  char ch;
  while (read(fd, &ch, 1) == 1 && ch != '\n') line += ch;
  return line;
}

std::string read_all(int fd) {
  std::string s;
  char buf[512];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    s.append(buf, static_cast<size_t>(n));
  return s;
}

int exit_status(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool admit(v1::RateLimiter::Stub& stub, v1::AdmitResponse* resp) {
  v1::AdmitRequest req;
  req.set_policy("checkout");
  req.set_key("k");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  const grpc::Status s = stub.Admit(&ctx, req, resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return s.ok() && resp->decision().allowed();
}

std::unique_ptr<v1::RateLimiter::Stub> connect(int port) {
  return v1::RateLimiter::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
}

TEST(ServerProcess, AKilledClientsSlotsAreReclaimedAtExpiry) {
  const std::string config = temp_file("server.yaml", R"(
version: 1
leaseTtl: 2s
limiters:
  checkout:
    admission:
      concurrency: {maxInflight: 3}
)");
  Child server = spawn_server({"--config", config, "--listen", "127.0.0.1:0"});
  const std::string banner = read_line(server.out);
  const std::string marker = "listening on port ";
  const size_t at = banner.find(marker);
  ASSERT_NE(at, std::string::npos) << banner << read_all(server.err);
  int port = 0;
  ASSERT_TRUE(
      absl::SimpleAtoi(banner.substr(at + marker.size(),
                                     banner.find(',', at) - at - marker.size()),
                       &port))
      << banner;

  // The client to be killed: takes every slot, says so, then hangs.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t client = fork();
  ASSERT_GE(client, 0);
  if (client == 0) {
    close(ready[0]);
    auto stub = connect(port);
    int held = 0;
    for (int i = 0; i < 3; ++i) {
      v1::AdmitResponse resp;
      held += admit(*stub, &resp) ? 1 : 0;
    }
    const char byte = static_cast<char>('0' + held);
    if (write(ready[1], &byte, 1) != 1) _exit(3);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char held = 0;
  ASSERT_EQ(read(ready[0], &held, 1), 1);
  ASSERT_EQ(held, '3');

  // Gone without a Release: its slots stay held until the lease expires.
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(client, SIGKILL), 0);
  exit_status(client);
  auto stub = connect(port);
  v1::AdmitResponse resp;
  EXPECT_FALSE(admit(*stub, &resp));
  EXPECT_EQ(resp.binding_axis(), "concurrency");
  bool reclaimed = false;
  while (std::chrono::steady_clock::now() - killed_at <
         std::chrono::seconds(10)) {
    v1::AdmitResponse r;
    if (admit(*stub, &r)) {
      reclaimed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(reclaimed);

  ASSERT_EQ(kill(server.pid, SIGTERM), 0);
  EXPECT_EQ(exit_status(server.pid), 0);
}

TEST(ServerProcess, ABadConfigurationExitsTwoNamingFileAndPath) {
  const std::string config = temp_file("bad.yaml", R"(
version: 1
limiters:
  api: {strategy: gcra, limit: -3, period: 1s}
)");
  Child server = spawn_server({"--config", config});
  const std::string err = read_all(server.err);
  EXPECT_EQ(exit_status(server.pid), 2);
  EXPECT_NE(err.find(config), std::string::npos) << err;
  EXPECT_NE(err.find("limiters.api.limit"), std::string::npos) << err;
}

TEST(ServerProcess, BadArgumentsExitTwo) {
  Child server = spawn_server({"--config"});
  EXPECT_EQ(exit_status(server.pid), 2);
  EXPECT_NE(read_all(server.err).find("usage"), std::string::npos);
  Child both = spawn_server(
      {"--config", "x.yaml", "--redis", "127.0.0.1:1", "--postgres", "h:1"});
  EXPECT_EQ(exit_status(both.pid), 2);
}

}  // namespace
