// src/redis/request.h (internal)
//
// One call's request as the Redis coordinator queues it (`Request`, and
// `AsyncRequest<T>`, which completes itself), the formatting of script
// arguments, and the small types of addresses and replies the connection,
// topology and verb files share.

#ifndef THROTTLEKIT_SRC_REDIS_REQUEST_H_
#define THROTTLEKIT_SRC_REDIS_REQUEST_H_

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "throttlekit/core/completion.h"

namespace throttlekit::redis_internal {

// `%.17g`: the shortest text Lua reads back as the same double. An integral
// value below 2^53 prints as its digits under `%.17g` too (no exponent
// below 1e17), so it takes the cheaper integer path: the same text.
inline std::string fmt_double(double v) {
  if (v >= -9007199254740991.0 && v <= 9007199254740991.0 &&
      v == static_cast<double>(static_cast<int64_t>(v)) &&
      !(v == 0 && std::signbit(v))) {
    return std::to_string(static_cast<int64_t>(v));
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

inline std::string fmt_int(int64_t v) { return std::to_string(v); }

// The status of a request no reply has answered yet. One static status,
// shared (its message counted, not copied): set per call and per resend,
// so it allocates nothing.
inline const absl::Status& not_served() {
  static const absl::Status* const kNotServed =
      new absl::Status(absl::UnknownError("redis: not served"));
  return *kNotServed;
}

inline timeval to_timeval(absl::Duration d) { return absl::ToTimeval(d); }

// One request: a script call (`script >= 0`: argv = key, args...) or a
// plain command (`script < 0`: argv is the command). The flags are guarded
// by the connection's mutex (`wake` waits on it; the analysis cannot name
// another object's mutex here); `status` and `reply` are written by the
// leader before it sets `done` and read by the caller after. An
// asynchronous request (`AsyncRequest<T>`, `async` set) completes itself in
// `finish`, which the thread that finished it calls once, outside every
// lock; a blocking one has a waiting caller.
struct Request {
  Request() = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  virtual ~Request() = default;
  // Runs an asynchronous request's completion from `status` and the reply.
  virtual void finish() {}

  int script = -1;
  int keys = 1;  // how many leading argv entries are KEYS (scripts only)
  std::vector<std::string> argv;
  absl::Time deadline;
  bool abandoned = false;        // the caller gave up: do not send it
  bool done = false;             // `status` and `reply` are final
  bool lead = false;             // the caller must take over the connection
  std::condition_variable wake;  // signalled on `done` or `lead`
  absl::Status status;
  std::vector<int64_t> reply;     // integers (strings parsed as integers)
  std::vector<std::string> text;  // the strings of the reply, in order
  bool async = false;             // an AsyncRequest: nobody waits for it
  // Redis Cluster: a MOVED or ASK reply's node ("host:port"; empty: none)
  // and slot, and whether it was ASK; `ask_at`, the node the request goes
  // to next with ASKING before it; `redirects`, how many it followed.
  std::string redirect;
  int redirect_slot = -1;
  bool ask = false;
  std::string ask_at;
  int redirects = 0;
  // Redis Cluster: the node answered TRYAGAIN or CLUSTERDOWN (sent again
  // after a pause, within the deadline); `retries`, how many times.
  bool retry = false;
  int retries = 0;
};

// An asynchronous request: its completion and the parser of its reply live
// in the request itself (one allocation per call).
template <class T>
class AsyncRequest final : public Request {
 public:
  using Parse = absl::StatusOr<T> (*)(const Request&);
  AsyncRequest(Parse parse, Completion<T> done)
      : parse_(parse), done_(std::move(done)) {
    async = true;
  }
  void finish() override {
    if (!status.ok()) {
      std::move(done_)(std::move(status));
    } else {
      std::move(done_)(parse_(*this));
    }
  }

 private:
  const Parse parse_;
  Completion<T> done_;
};

// "host:port" (an IPv6 host in brackets) as host and port; kInvalidArgument
// naming the problem.
inline absl::StatusOr<std::pair<std::string, int>> parse_node_address(
    std::string_view address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(address.data() + colon + 1,
                                          address.size() - colon - 1),
                        &port) ||
      port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", absl::string_view(address.data(), address.size()),
                     "\" is not host:port with a port in [1, 65535]"));
  }
  std::string_view host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(std::string(host), port);
}

// One range of slots and the primary serving it (CLUSTER SLOTS).
struct SlotRange {
  int first = 0;
  int last = 0;
  std::string host;
  int port = 0;
};

struct FreeReply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, FreeReply>;

// "host:port", with an IPv6 host in brackets.
inline std::string node_address(std::string_view host, int port) {
  const absl::string_view h(host.data(), host.size());
  return host.find(':') == std::string_view::npos
             ? absl::StrCat(h, ":", port)
             : absl::StrCat("[", h, "]:", port);
}

}  // namespace throttlekit::redis_internal

#endif  // THROTTLEKIT_SRC_REDIS_REQUEST_H_
