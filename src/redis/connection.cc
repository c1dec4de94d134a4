// RedisCoordinator::Impl::Connection (coordinator_impl.h): one connection
// shared by many callers, leader/follower style. A caller whose request is
// first when no one leads sends everything queued as one pipelined write
// and reads the replies in order; the connection's I/O thread leads for
// the asynchronous requests no caller waits for (docs/redis.md,
// "Pipelining: leader/follower connections"; docs/async.md).

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator_impl.h"

namespace throttlekit {
namespace {
// Redis's timer tick at the default `hz` (10): a timed-out WAIT is ended
// at the next one.
constexpr absl::Duration kRedisTick = absl::Milliseconds(100);

// Appends RESP's "<kind><n>\r\n" (kind '*': an array of n; '$': a bulk
// string of n bytes, which follow) to `cmd`.
void resp_number(std::string& cmd, char kind, size_t n) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  cmd.push_back(kind);
  cmd.append(digits, end);
  cmd.append("\r\n", 2);
}

// Appends `a` to `cmd` as a RESP bulk string.
void resp_bulk(std::string& cmd, std::string_view a) {
  resp_number(cmd, '$', a.size());
  cmd.append(a);
  cmd.append("\r\n", 2);
}
}  // namespace

using redis_internal::fmt_int;
using redis_internal::kStateScript;

void RedisCoordinator::Impl::Connection::drain() {
  std::thread io;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    io = std::move(io_);
  }
  io_wake_.notify_all();
  if (io.joinable()) io.join();
}

void RedisCoordinator::Impl::Connection::offer(ReadyContext ready) {
  {
    MutexLock lock(mu_);
    wanted_ = false;
    connect_error_ = absl::OkStatus();
    if (spare_ != nullptr) redisFree(spare_);
    spare_ = ready.release();
    spare_shas_ = std::move(ready.shas());
  }
  ready_cv_.notify_all();
}

void RedisCoordinator::Impl::Connection::refused(absl::Status why) {
  {
    MutexLock lock(mu_);
    connect_error_ = std::move(why);
  }
  ready_cv_.notify_all();
}

bool RedisCoordinator::Impl::Connection::ready() {
  MutexLock lock(mu_);
  return spare_ != nullptr || connected_;
}

absl::Status RedisCoordinator::Impl::Connection::connect_error() {
  MutexLock lock(mu_);
  return absl::Status(connect_error_.code(), connect_error_.message());
}

void RedisCoordinator::Impl::Connection::submit(std::shared_ptr<Request> req) {
  bool wake = false;
  {
    MutexLock lock(mu_);
    if (!io_.joinable()) io_ = std::thread([this] { io_loop(); });
    queue_.push_back(std::move(req));
    if (!busy_) {
      busy_ = true;
      io_lead_ = true;
      wake = true;
    }
  }
  if (wake) io_wake_.notify_one();
}

absl::Status RedisCoordinator::Impl::Connection::call(
    const std::shared_ptr<Request>& req) {
  Request& r = *req;
  {
    MutexLock lock(mu_);
    queue_.push_back(req);
    if (busy_) {
      // Wait for the reply, a hand-over, or the deadline.
      NativeWait native(mu_);
      r.wake.wait_until(native.lock(), absl::ToChronoTime(r.deadline),
                        [&r] { return r.done || r.lead; });
      if (!r.lead) {
        if (r.done) return std::move(r.status);
        r.abandoned = true;  // the leader does not send it
        count(&detail::BackendCounters::timeouts);
        return deadline_error();
      }
    }
    busy_ = true;
  }
  lead();
  MutexLock lock(mu_);
  if (r.done) return std::move(r.status);
  // Served by nobody: only possible if it timed out in a batch.
  count(&detail::BackendCounters::timeouts);
  return deadline_error();
}

absl::Status RedisCoordinator::Impl::Connection::deadline_error() const {
  const RedisCoordinatorOptions& o = owner_->options_;
  return absl::DeadlineExceededError(
      absl::StrCat("redis: no reply from ", node_->host, ":", node_->port,
                   " within the command timeout (",
                   absl::FormatDuration(o.command_timeout), ")"));
}

void RedisCoordinator::Impl::Connection::io_loop() {
  MutexLock lock(mu_);
  for (;;) {
    {
      NativeWait native(mu_);
      while (!io_lead_ && !stopping_) io_wake_.wait(native.lock());
    }
    if (!io_lead_) return;  // stopping, and nothing queued
    io_lead_ = false;
    lock.unlock();
    lead();
    lock.lock();
  }
}

void RedisCoordinator::Impl::Connection::lead() {
  std::vector<std::shared_ptr<Request>> batch;
  std::vector<std::shared_ptr<Request>> expired;
  {
    MutexLock lock(mu_);
    const size_t n = std::min(
        queue_.size(), static_cast<size_t>(owner_->options_.max_pipeline));
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < n; ++i) {
      std::shared_ptr<Request> q = std::move(queue_.front());
      queue_.pop_front();
      if (q->abandoned) continue;
      if (q->async && q->deadline <= now) {
        expired.push_back(std::move(q));
      } else {
        batch.push_back(std::move(q));
      }
    }
  }
  std::vector<Outcome> outcomes(batch.size());
  serve(batch, outcomes);
  std::shared_ptr<Request> next;
  bool wake_io = false;
  {
    MutexLock lock(mu_);
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->status = std::move(outcomes[i].status);
      batch[i]->reply = std::move(outcomes[i].reply);
      batch[i]->text = std::move(outcomes[i].text);
      batch[i]->redirect = std::move(outcomes[i].redirect);
      batch[i]->redirect_slot = outcomes[i].redirect_slot;
      batch[i]->ask = outcomes[i].ask;
      batch[i]->retry = outcomes[i].retry;
      batch[i]->done = true;
    }
    for (const auto& r : expired) {
      count(&detail::BackendCounters::timeouts);
      r->status = deadline_error();
      r->done = true;
    }
    while (!queue_.empty() && queue_.front()->abandoned) {
      queue_.pop_front();
    }
    if (queue_.empty()) {
      busy_ = false;
    } else if (queue_.front()->async) {
      io_lead_ = true;  // stays busy: the I/O thread takes over
      wake_io = true;
    } else {
      next = queue_.front();  // stays busy: this waiter takes over
      next->lead = true;
    }
  }
  // Wake and complete outside the lock, so the woken do not block on it
  // at once and a completion may call the coordinator again; the
  // batch's references keep every request alive.
  if (next != nullptr) next->wake.notify_one();
  if (wake_io) io_wake_.notify_one();
  for (auto* list : {&batch, &expired}) {
    for (const auto& r : *list) {
      if (r->async && !r->redirect.empty()) {
        owner_->follow(r);  // Redis Cluster: sent on to the node named
      } else if (r->async && r->retry) {
        owner_->retry_later(r);  // Redis Cluster: sent again later
      } else if (r->async) {
        r->finish();
      } else {
        r->wake.notify_one();
      }
    }
  }
}

void RedisCoordinator::Impl::Connection::serve(
    const std::vector<std::shared_ptr<Request>>& batch,
    std::vector<Outcome>& out) {
  if (batch.empty()) return;
  if (ctx_ == nullptr) {
    absl::Time by = absl::InfiniteFuture();
    for (const auto& r : batch) by = std::min(by, r->deadline);
    if (absl::Status s = await_context(by); !s.ok()) {
      for (auto& o : out) fail(o, s);
      return;
    }
  }
  for (const auto& r : batch) append(*r, /*evalsha=*/true);
  std::vector<size_t> all(batch.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  const bool wait = append_wait(batch, all);
  count(&detail::BackendCounters::batches);
  if (absl::Status s = flush(); !s.ok()) {
    for (auto& o : out) fail(o, s);
    lose();
    return;
  }
  // The earliest deadline among the asynchronous requests from i on:
  // a read waits no longer than that (each asynchronous completion
  // comes within its deadline), nor than `command_timeout` (the
  // blocking callers' bound; each waits for its own deadline itself).
  std::vector<absl::Time> async_by(batch.size() + 1, absl::InfiniteFuture());
  for (size_t i = batch.size(); i-- > 0;) {
    async_by[i] = batch[i]->async
                      ? std::min(async_by[i + 1], batch[i]->deadline)
                      : async_by[i + 1];
  }
  const auto bound = [&](size_t i) {
    return std::min(async_by[i],
                    absl::Now() + owner_->options_.command_timeout);
  };
  std::vector<size_t> retry;
  for (size_t i = 0; i < batch.size(); ++i) {
    redisReply* reply = nullptr;
    if (absl::Status s = read_for(*batch[i], bound(i), &reply); !s.ok()) {
      for (size_t j = i; j < batch.size(); ++j) fail(out[j], s);
      lose();
      return;
    }
    if (reply->type == REDIS_REPLY_ERROR &&
        std::strncmp(reply->str, "NOSCRIPT", 8) == 0) {
      count(&detail::BackendCounters::reloads);
      retry.push_back(i);
    } else {
      complete(out[i], reply);
    }
    ReplyPool::release(reply);
  }
  if (wait) {
    if (absl::Status s = settle_wait(batch, all, out); !s.ok()) {
      for (size_t i : retry) fail(out[i], s);
      lose();
      return;
    }
  }
  for (size_t i : retry) append(*batch[i], /*evalsha=*/false);
  const bool wait_again = !retry.empty() && append_wait(batch, retry);
  if (absl::Status s = retry.empty() ? absl::OkStatus() : flush(); !s.ok()) {
    for (size_t i : retry) fail(out[i], s);
    lose();
    return;
  }
  for (size_t k = 0; k < retry.size(); ++k) {
    redisReply* reply = nullptr;
    if (absl::Status s = read_for(*batch[retry[k]], bound(retry[k]), &reply);
        !s.ok()) {
      for (size_t j = k; j < retry.size(); ++j) fail(out[retry[j]], s);
      lose();
      return;
    }
    complete(out[retry[k]], reply);
    ReplyPool::release(reply);
  }
  if (wait_again) {
    if (absl::Status s = settle_wait(batch, retry, out); !s.ok()) lose();
  }
}

bool RedisCoordinator::Impl::Connection::writes(const Request& r) {
  return r.script >= 0 && r.script != kStateScript;
}

bool RedisCoordinator::Impl::Connection::append_wait(
    const std::vector<std::shared_ptr<Request>>& batch,
    const std::vector<size_t>& idx) {
  const int n = owner_->options_.durable_writes;
  if (n == 0) return false;
  absl::Time by = absl::InfiniteFuture();
  for (size_t i : idx) {
    if (writes(*batch[i])) by = std::min(by, batch[i]->deadline);
  }
  if (by == absl::InfiniteFuture()) return false;
  // The reply must come back before the deadline: Redis ends a WAIT that
  // times out only at its next timer tick (1/hz: 100 ms by default), so
  // WAIT gets half of what is left after one tick; the other half is the
  // reply's margin (a 300 ms deadline: WAIT 100 ms, answered by 200 ms at
  // the latest, 100 ms to spare; half of the whole left 50 ms, which a
  // loaded machine overran).
  wait_ms_ = std::max<int64_t>(
      1, absl::ToInt64Milliseconds((by - absl::Now() - kRedisTick) / 2));
  std::string& cmd = cmd_scratch_;  // written the way `append` writes
  cmd.clear();
  resp_number(cmd, '*', 3);
  resp_bulk(cmd, "WAIT");
  resp_bulk(cmd, fmt_int(n));
  resp_bulk(cmd, fmt_int(wait_ms_));
  redisAppendFormattedCommand(ctx_, cmd.data(), cmd.size());
  return true;
}

absl::Status RedisCoordinator::Impl::Connection::settle_wait(
    const std::vector<std::shared_ptr<Request>>& batch,
    const std::vector<size_t>& idx, std::vector<Outcome>& out) {
  const int n = owner_->options_.durable_writes;
  redisReply* reply = nullptr;
  absl::Status s =
      read_reply(absl::Now() + owner_->options_.command_timeout, &reply);
  int64_t acked = 0;
  std::string why;
  if (s.ok()) {
    if (reply->type == REDIS_REPLY_INTEGER) {
      acked = reply->integer;
    } else {
      why = absl::StrCat(
          ": ", absl::string_view(reply->str == nullptr ? "" : reply->str,
                                  reply->len));
    }
    ReplyPool::release(reply);
  }
  if (s.ok() && acked >= n) return absl::OkStatus();
  for (size_t i : idx) {
    if (!writes(*batch[i]) || !out[i].status.ok()) continue;
    count(&detail::BackendCounters::unreplicated);
    count(&detail::BackendCounters::failures);
    out[i].status =
        s.ok()
            ? absl::UnavailableError(absl::StrCat(
                  "redis: the write reached ", acked, " of ", n,
                  " replicas within ", wait_ms_, " ms (durable_writes)", why))
            : s;
  }
  return s;
}

absl::Status RedisCoordinator::Impl::Connection::flush() {
  int done = 0;
  do {
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) return io_error();
  } while (done == 0);
  return absl::OkStatus();
}

absl::Status RedisCoordinator::Impl::Connection::read_reply(absl::Time deadline,
                                                            redisReply** out) {
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(ctx_->reader, &reply) != REDIS_OK) {
      return absl::UnavailableError(
          absl::StrCat("redis: unreadable reply from ", node_->host, ":",
                       node_->port, ": ", ctx_->reader->errstr));
    }
    if (reply != nullptr) {
      *out = static_cast<redisReply*>(reply);
      return absl::OkStatus();
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return late_error();
    set_read_timeout(left);
    if (redisBufferRead(ctx_) != REDIS_OK) return io_error();
  }
}

absl::Status RedisCoordinator::Impl::Connection::read_for(const Request& r,
                                                          absl::Time deadline,
                                                          redisReply** out) {
  if (!r.ask_at.empty()) {
    redisReply* asking = nullptr;
    if (absl::Status s = read_reply(deadline, &asking); !s.ok()) return s;
    ReplyPool::release(asking);
  }
  return read_reply(deadline, out);
}

void RedisCoordinator::Impl::Connection::set_read_timeout(absl::Duration left) {
  const absl::Duration tolerance =
      std::min(absl::Milliseconds(2), owner_->options_.command_timeout / 16);
  left = std::max(left, absl::Microseconds(100));
  if (absl::AbsDuration(left - timeout_set_) <= tolerance) return;
  redisSetTimeout(ctx_, to_timeval(left));
  timeout_set_ = left;
}

absl::Status RedisCoordinator::Impl::Connection::late_error() const {
  return absl::DeadlineExceededError(absl::StrCat(
      "redis: ", node_->host, ":", node_->port, " did not answer in time"));
}

void RedisCoordinator::Impl::Connection::append(const Request& r,
                                                bool evalsha) {
  // The command in the protocol's own form (RESP: "*<argc>", then
  // "$<len>" and the bytes of each argument), written into the leader's
  // scratch buffer, kept across requests, and handed to hiredis whole: no
  // allocation once the buffer has grown, and none of hiredis's per-command
  // formatting (the client's largest cost after malloc, measured:
  // docs/performance.md).
  std::string& cmd = cmd_scratch_;
  cmd.clear();
  const auto bulk = [&cmd](std::string_view a) { resp_bulk(cmd, a); };
  if (!r.ask_at.empty()) {
    // Redis Cluster: the slot is migrating here; ASKING lets the next
    // command see it (its +OK is skipped by `read_for`).
    resp_number(cmd, '*', 1);
    bulk("ASKING");
  }
  const size_t script_args = r.script >= 0 ? 3 : 0;
  resp_number(cmd, '*', script_args + r.argv.size());
  if (r.script >= 0) {
    const bool use_sha = evalsha && !shas_[r.script].empty();
    bulk(use_sha ? std::string_view("EVALSHA") : std::string_view("EVAL"));
    bulk(use_sha ? std::string_view(shas_[r.script])
                 : std::string_view(script_texts()[r.script]));
    bulk(r.keys == 2 ? std::string_view("2") : std::string_view("1"));
  }
  for (const std::string& a : r.argv) bulk(a);
  redisAppendFormattedCommand(ctx_, cmd.data(), cmd.size());
}

absl::Status RedisCoordinator::Impl::Connection::await_context(absl::Time by) {
  MutexLock lock(mu_);
  for (;;) {
    if (spare_ != nullptr) {
      ctx_ = std::exchange(spare_, nullptr);
      replies_.adopt(ctx_);
      shas_ = std::move(spare_shas_);
      timeout_set_ = owner_->options_.command_timeout;
      connected_ = true;
      return absl::OkStatus();
    }
    // A status of its own: a shared one copied on many threads is
    // released in code ThreadSanitizer does not see (see `call`).
    if (!connect_error_.ok()) {
      return absl::Status(connect_error_.code(), connect_error_.message());
    }
    if (!wanted_) {
      lock.unlock();
      want();
      lock.lock();
      continue;
    }
    bool timed_out = false;
    {
      NativeWait native(mu_);
      timed_out = ready_cv_.wait_until(native.lock(), absl::ToChronoTime(by)) ==
                  std::cv_status::timeout;
    }
    if (timed_out && spare_ == nullptr && connect_error_.ok()) {
      return absl::DeadlineExceededError(
          absl::StrCat("redis: no connection to ", node_->host, ":",
                       node_->port, " was ready within the command timeout (",
                       absl::FormatDuration(owner_->options_.command_timeout),
                       "; still connecting)"));
    }
  }
}

void RedisCoordinator::Impl::Connection::want() {
  {
    MutexLock lock(mu_);
    if (wanted_) return;
    wanted_ = true;
  }
  owner_->want_context(this);
}

absl::Status RedisCoordinator::Impl::Connection::io_error() const {
  const int err = errno;
  if (ctx_ != nullptr && ctx_->err == REDIS_ERR_IO &&
      (err == EAGAIN || err == EWOULDBLOCK ||
       std::strstr(ctx_->errstr, "temporarily unavailable") != nullptr)) {
    return late_error();
  }
  return absl::UnavailableError(
      absl::StrCat("redis: connection to ", node_->host, ":", node_->port,
                   " failed: ", ctx_ != nullptr ? ctx_->errstr : "?"));
}

void RedisCoordinator::Impl::Connection::drop() {
  if (ctx_ == nullptr) return;
  redisFree(ctx_);
  ctx_ = nullptr;
  MutexLock lock(mu_);
  connected_ = false;
}

void RedisCoordinator::Impl::Connection::lose() {
  drop();
  want();
}

void RedisCoordinator::Impl::Connection::flatten(const redisReply* reply,
                                                 Outcome& out) {
  switch (reply->type) {
    case REDIS_REPLY_INTEGER:
      out.reply.push_back(reply->integer);
      break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      out.reply.push_back(std::strtoll(reply->str, nullptr, 10));
      out.text.emplace_back(reply->str, reply->len);
      break;
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < reply->elements; ++i) {
        flatten(reply->element[i], out);
      }
      break;
    default:
      break;  // nil
  }
}

void RedisCoordinator::Impl::Connection::complete(Outcome& o,
                                                  const redisReply* reply) {
  if (reply->type == REDIS_REPLY_ERROR &&
      (redirected(reply, o) || retry_later(reply, o))) {
    return;
  }
  count(&detail::BackendCounters::requests);
  if (reply->type == REDIS_REPLY_ERROR) {
    const std::string msg(reply->str, reply->len);
    if (msg.find("WRONGTYPE") != std::string::npos) {
      o.status = absl::FailedPreconditionError(
          absl::StrCat("redis: key holds another strategy's state: ", msg));
    } else if (msg.starts_with("TKFULL ")) {
      // A script's table is full (the region pool's 1024 regions).
      o.status =
          absl::ResourceExhaustedError(absl::StrCat("redis: ", msg.substr(7)));
    } else {
      o.status = absl::UnavailableError(absl::StrCat("redis: ", msg));
    }
    return;
  }
  o.reply.reserve(8);  // a decision is 5 integers, a grant 4
  flatten(reply, o);
  o.status = absl::OkStatus();
}

bool RedisCoordinator::Impl::Connection::redirected(const redisReply* reply,
                                                    Outcome& o) {
  const std::string_view msg(reply->str, reply->len);
  const bool moved = msg.starts_with("MOVED ");
  if (!moved && !msg.starts_with("ASK ")) return false;
  const std::string_view rest = msg.substr(moved ? 6 : 4);
  const size_t space = rest.find(' ');
  int slot = -1;
  if (space == std::string_view::npos ||
      !absl::SimpleAtoi(absl::string_view(rest.data(), space), &slot)) {
    return false;
  }
  o.redirect = std::string(rest.substr(space + 1));
  o.redirect_slot = slot;
  o.ask = !moved;
  o.status = absl::UnavailableError(
      absl::StrCat("redis: ", absl::string_view(msg.data(), msg.size())));
  return true;
}

bool RedisCoordinator::Impl::Connection::retry_later(const redisReply* reply,
                                                     Outcome& o) {
  const std::string_view msg(reply->str, reply->len);
  const bool slot =
      msg.starts_with("TRYAGAIN") || msg.starts_with("CLUSTERDOWN");
  const bool demoted =
      owner_->topology_ == Topology::kSentinel &&
      (msg.starts_with("READONLY") || msg.starts_with("LOADING"));
  if (!slot && !demoted) return false;
  o.retry = true;
  o.status = absl::UnavailableError(
      absl::StrCat("redis: ", absl::string_view(msg.data(), msg.size())));
  if (demoted) owner_->request_refresh();
  return true;
}

void RedisCoordinator::Impl::Connection::fail(Outcome& o,
                                              const absl::Status& s) {
  owner_->request_refresh();  // Redis Cluster: the node may be gone
  count(absl::IsDeadlineExceeded(s) ? &detail::BackendCounters::timeouts
                                    : &detail::BackendCounters::failures);
  o.status = s;
}

void RedisCoordinator::Impl::Connection::count(
    std::atomic<int64_t> detail::BackendCounters::*field) const {
  detail::BackendCounters::add(owner_->counters_.*field);
  detail::BackendCounters::add(node_->counters.*field);
}

}  // namespace throttlekit
