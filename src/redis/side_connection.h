// src/redis/side_connection.h (internal)
//
// The Redis coordinator's connections off the call path: `SideConnection`,
// a short-lived connection for the rare reads of the topology, and
// `ReadyContext`, a connection set up for calls (authenticated, its
// database selected, its scripts loaded) before a caller may use it.

#ifndef THROTTLEKIT_SRC_REDIS_SIDE_CONNECTION_H_
#define THROTTLEKIT_SRC_REDIS_SIDE_CONNECTION_H_

#include <hiredis/hiredis.h>

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "request.h"
#include "scripts.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit::redis_internal {

// A short-lived connection of its own to one server, for the rare reads of
// the topology (CLUSTER SLOTS, a sentinel's answer, ROLE), off every
// caller's path; bounded by the connect and command timeouts. Not
// thread-safe: one thread uses it.
class SideConnection {
 public:
  SideConnection() = default;
  SideConnection(const SideConnection&) = delete;
  SideConnection& operator=(const SideConnection&) = delete;
  ~SideConnection() {
    if (ctx_ != nullptr) redisFree(ctx_);
  }

  // Connects and authenticates (an empty `password` sends no AUTH).
  absl::Status open(const std::string& host, int port,
                    const std::string& username, const std::string& password,
                    const RedisCoordinatorOptions& o) {
    where_ = node_address(host, port);
    ctx_ = redisConnectWithTimeout(host.c_str(), port,
                                   absl::ToTimeval(o.connect_timeout));
    if (ctx_ == nullptr || ctx_->err != 0) {
      return error(ctx_ == nullptr ? "out of memory" : ctx_->errstr);
    }
    redisSetTimeout(ctx_, absl::ToTimeval(o.command_timeout));
    if (password.empty()) return absl::OkStatus();
    std::vector<std::string_view> auth = {"AUTH"};
    if (!username.empty()) auth.push_back(username);
    auth.push_back(password);
    absl::StatusOr<ReplyPtr> r = run(auth);
    return r.ok() ? absl::OkStatus() : r.status();
  }

  // Runs one command: its reply, or kUnavailable (an error reply, a lost
  // connection or a timeout) naming the server and the command.
  absl::StatusOr<ReplyPtr> run(const std::vector<std::string_view>& cmd) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (std::string_view a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    ReplyPtr reply(static_cast<redisReply*>(redisCommandArgv(
        ctx_, static_cast<int>(argv.size()), argv.data(), lens.data())));
    const absl::string_view name(cmd.front().data(), cmd.front().size());
    if (reply == nullptr) return error(absl::StrCat(name, ": ", ctx_->errstr));
    if (reply->type == REDIS_REPLY_ERROR) {
      return error(
          absl::StrCat(name, ": ", absl::string_view(reply->str, reply->len)));
    }
    return reply;
  }

  redisContext* context() const { return ctx_; }
  const std::string& where() const { return where_; }

 private:
  absl::Status error(absl::string_view why) const {
    return absl::UnavailableError(absl::StrCat("redis: ", where_, ": ", why));
  }

  std::string where_;
  redisContext* ctx_ = nullptr;
};

// A connection set up for calls: connected, authenticated, its database
// selected and every script loaded (their SHA-1s), its socket timeout the
// command timeout. Owns the context until handed over (`release`).
class ReadyContext {
 public:
  ReadyContext() = default;
  ReadyContext(ReadyContext&& o) noexcept
      : ctx_(std::exchange(o.ctx_, nullptr)), shas_(std::move(o.shas_)) {}
  ReadyContext& operator=(ReadyContext&& o) noexcept {
    std::swap(ctx_, o.ctx_);
    std::swap(shas_, o.shas_);
    return *this;
  }
  ~ReadyContext() {
    if (ctx_ != nullptr) redisFree(ctx_);
  }

  // Opens one to `host:port`; each step is bounded by `connect_timeout`.
  // kUnavailable naming the server and the step on any failure.
  static absl::StatusOr<ReadyContext> open(const std::string& host, int port,
                                           const RedisCoordinatorOptions& o) {
    ReadyContext r;
    const auto fail = [&](absl::string_view why) {
      return absl::UnavailableError(absl::StrCat("redis: cannot connect to ",
                                                 host, ":", port, ": ", why));
    };
    r.ctx_ = redisConnectWithTimeout(host.c_str(), port,
                                     to_timeval(o.connect_timeout));
    if (r.ctx_ == nullptr) return fail("out of memory");
    if (r.ctx_->err != 0) return fail(r.ctx_->errstr);
    redisSetTimeout(r.ctx_, to_timeval(o.connect_timeout));
    if (!o.password.empty()) {
      std::vector<std::string> auth = {"AUTH"};
      if (!o.username.empty()) auth.push_back(o.username);
      auth.push_back(o.password);
      if (absl::Status s = r.simple(auth, nullptr, fail); !s.ok()) return s;
    }
    if (o.database != 0) {
      if (absl::Status s =
              r.simple({"SELECT", fmt_int(o.database)}, nullptr, fail);
          !s.ok()) {
        return s;
      }
    }
    for (int i = 0; i < kScriptCount; ++i) {
      if (absl::Status s = r.simple({"SCRIPT", "LOAD", script_texts()[i]},
                                    &r.shas_[static_cast<size_t>(i)], fail);
          !s.ok()) {
        return s;
      }
    }
    redisSetTimeout(r.ctx_, to_timeval(o.command_timeout));
    return r;
  }

  // The context, now the caller's to free; the scripts' SHA-1s.
  redisContext* release() { return std::exchange(ctx_, nullptr); }
  std::array<std::string, kScriptCount>& shas() { return shas_; }

 private:
  // Runs one command of the set-up; an error reply or a lost connection
  // is `fail(why)`.
  template <class Fail>
  absl::Status simple(const std::vector<std::string>& cmd, std::string* out,
                      const Fail& fail) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* reply = static_cast<redisReply*>(redisCommandArgv(
        ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (reply == nullptr) {
      // hiredis reports a read past the socket's timeout as EAGAIN.
      const bool late = ctx_->err == REDIS_ERR_IO &&
                        (errno == EAGAIN || errno == EWOULDBLOCK);
      return fail(absl::StrCat(
          cmd[0], ": ",
          late ? "no answer within the connect timeout" : ctx_->errstr));
    }
    absl::Status s = absl::OkStatus();
    if (reply->type == REDIS_REPLY_ERROR) {
      s = fail(absl::StrCat(
          cmd[0], " failed: ", absl::string_view(reply->str, reply->len)));
    } else if (out != nullptr && reply->type == REDIS_REPLY_STRING) {
      out->assign(reply->str, reply->len);
    }
    freeReplyObject(reply);
    return s;
  }

  redisContext* ctx_ = nullptr;
  std::array<std::string, kScriptCount> shas_;
};

}  // namespace throttlekit::redis_internal

#endif  // THROTTLEKIT_SRC_REDIS_SIDE_CONNECTION_H_
