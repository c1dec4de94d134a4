// tests/support/child_process.h
//
// Runs a program as a child process the way a user would, for the tests of
// the binaries (throttlekit-server, the HTTP middleware example):
// `spawn(binary, args[, env])` starts it with its stdout and stderr on
// pipes;
// `read_line`, `read_all` read them; `port_after(line, marker)` takes the
// port a banner names; `exit_status` waits for it (128 + signal when a
// signal ended it); `temp_file` writes a configuration for it (removed when
// the test process exits).

#ifndef THROTTLEKIT_TESTS_SUPPORT_CHILD_PROCESS_H_
#define THROTTLEKIT_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

extern char** environ;

namespace throttlekit::testing {

struct Child {
  pid_t pid = -1;
  int out = -1;  // its stdout
  int err = -1;  // its stderr
};

// `env` ("NAME=value" each) replaces the test's environment when given.
inline Child spawn(const std::string& binary, std::vector<std::string> args,
                   const std::vector<std::string>* env = nullptr) {
  int out[2], err[2];
  EXPECT_EQ(pipe(out), 0);
  EXPECT_EQ(pipe(err), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, err[0]);
  args.insert(args.begin(), binary);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy;
  std::vector<char*> envp;
  if (env != nullptr) {
    env_copy = *env;
    for (std::string& e : env_copy) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  Child c;
  EXPECT_EQ(posix_spawn(&c.pid, argv[0], &actions, nullptr, argv.data(),
                        env != nullptr ? envp.data() : environ),
            0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  c.out = out[0];
  c.err = err[0];
  return c;
}

// Reads `fd` until EOF or a newline (not included).
inline std::string read_line(int fd) {
  std::string line;
  char ch;
  while (read(fd, &ch, 1) == 1 && ch != '\n') line += ch;
  return line;
}

// Reads `fd` to EOF.
inline std::string read_all(int fd) {
  std::string s;
  char buf[512];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    s.append(buf, static_cast<size_t>(n));
  }
  return s;
}

// The digits right after `marker` in `line` as a port; 0 (and a test
// failure) when they are not there.
inline int port_after(const std::string& line, const std::string& marker) {
  const size_t at = line.find(marker);
  EXPECT_NE(at, std::string::npos) << "no \"" << marker << "\" in: " << line;
  if (at == std::string::npos) return 0;
  size_t end = at + marker.size();
  while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(
      line.substr(at + marker.size(), end - at - marker.size()), &port))
      << line;
  return port;
}

// Waits for the child: its exit status, or 128 + the signal that ended it.
inline int exit_status(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The files `temp_file` wrote, removed when the test process exits.
class TempFiles {
 public:
  ~TempFiles() {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }
  void add(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.push_back(path);
  }

 private:
  std::mutex mu_;
  std::vector<std::string> paths_;
};

// Writes `text` to a file named after `name` in the test's temporary
// directory; returns its path. The file is removed when the process exits.
inline std::string temp_file(const std::string& name, const std::string& text) {
  static TempFiles files;
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/", getpid(), "-", name);
  std::ofstream(path) << text;
  files.add(path);
  return path;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_CHILD_PROCESS_H_
