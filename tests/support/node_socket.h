// tests/support/node_socket.h
//
// Provides `NodeSocket`: a minimal blocking client of one Redis node
// (inline commands on a loopback socket, replies read as RESP), for what
// the coordinator never does, such as reading a replica (the failover
// tests' replication-lag probe).

#ifndef THROTTLEKIT_TESTS_SUPPORT_NODE_SOCKET_H_
#define THROTTLEKIT_TESTS_SUPPORT_NODE_SOCKET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace throttlekit::testing {

// A connection to 127.0.0.1:<port>; each read waits at most 1 s. Not
// thread-safe.
class NodeSocket {
 public:
  explicit NodeSocket(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const timeval tv{.tv_sec = 1, .tv_usec = 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~NodeSocket() {
    if (fd_ >= 0) close(fd_);
  }
  NodeSocket(const NodeSocket&) = delete;
  NodeSocket& operator=(const NodeSocket&) = delete;

  // The reply to `command`: a status, error or integer line as sent
  // ("+OK", "-MOVED ...", ":1"), a bulk string's payload ("" for nil);
  // "!" when the node is gone or silent.
  std::string call(const std::string& command) {
    const std::string line = command + "\r\n";
    if (fd_ < 0 || send(fd_, line.data(), line.size(), MSG_NOSIGNAL) !=
                       static_cast<ssize_t>(line.size())) {
      return "!";
    }
    std::string head;
    if (!read_line(&head)) return "!";
    if (head.empty() || head[0] != '$') return head;
    const int len = std::atoi(head.c_str() + 1);
    if (len < 0) return "";
    while (buf_.size() < static_cast<size_t>(len) + 2) {
      if (!fill()) return "!";
    }
    std::string payload = buf_.substr(0, static_cast<size_t>(len));
    buf_.erase(0, static_cast<size_t>(len) + 2);
    return payload;
  }

 private:
  bool fill() {
    char chunk[4096];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  bool read_line(std::string* out) {
    size_t end;
    while ((end = buf_.find("\r\n")) == std::string::npos) {
      if (!fill()) return false;
    }
    *out = buf_.substr(0, end);
    buf_.erase(0, end + 2);
    return true;
  }

  int fd_ = -1;
  std::string buf_;
};

// Samples the replication lag from the primary on `primary` to its replica
// on `replica` until `stop` is set or the primary stops answering: writes
// `<key>:probe` there, polls the replica until it holds the value, pauses
// a millisecond, again. Returns the longest time a sample took (a bound
// on the lag: it includes the round trips), samples ended by `stop` left
// out. `key` names the primary's slot on a cluster (a hash tag).
inline absl::Duration max_replication_lag(int primary, int replica,
                                          const std::string& key,
                                          const std::atomic<bool>& stop) {
  NodeSocket to_primary(primary), to_replica(replica);
  absl::Duration lag;
  // A cluster replica serves reads after READONLY (elsewhere an error).
  if (to_replica.call("READONLY") == "!") return lag;
  for (int64_t seq = 1; !stop.load(); ++seq) {
    const absl::Time t0 = absl::Now();
    const std::string want = std::to_string(seq);
    if (to_primary.call("SET " + key + ":probe " + want) != "+OK") break;
    while (to_replica.call("GET " + key + ":probe") != want &&
           absl::Now() - t0 < absl::Seconds(2)) {
    }
    if (!stop.load()) lag = std::max(lag, absl::Now() - t0);
    absl::SleepFor(absl::Milliseconds(1));
  }
  return lag;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_NODE_SOCKET_H_
