// RedisCoordinator: hiredis connections shared leader/follower style; the
// leader pipelines everything queued (see the header and docs/redis.md).
// Asynchronous calls queue on the same connections; each connection's I/O
// thread leads when no blocking caller does (docs/async.md).

#include "throttlekit/redis/redis_coordinator.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/redis/key_slot.h"
#include "throttlekit_redis_scripts.h"

namespace throttlekit {
namespace {

// The scripts, in `AnyStrategy` order, then the lease scripts.
enum Script : int {
  kGcraScript = 0,
  kTokenBucketScript,
  kFixedWindowScript,
  kSlidingWindowScript,
  kSlidingLogScript,
  kQuotaScript,
  kTokenBudgetScript,
  kLeaseScript,
  kGiveBackScript,
  kStateScript,
  kHeartbeatScript,
  kFedLeaseScript,
  kFedReconcileScript,
  kEscrowScript,
  kRegionPoolScript,
  kFusedScript,
  kScriptCount,
};
static_assert(std::variant_size_v<AnyStrategy> == kLeaseScript);

const std::array<std::string, kScriptCount>& script_texts() {
  using namespace redis_scripts;  // NOLINT: generated constants
  static const auto* texts = [] {
    auto* t = new std::array<std::string, kScriptCount>;
    const auto av = [](std::string_view v) {
      return absl::string_view(v.data(), v.size());
    };
    // Every script but the fused one, in `Script` order (a missing entry
    // fails to compile).
    const std::array bodies = {
        kGcraLua,         kTokenBucketLua, kFixedWindowLua, kSlidingWindowLua,
        kSlidingLogLua,   kQuotaLua,       kTokenBudgetLua, kLeaseLua,
        kGiveBackLua,     kStateLua,       kHeartbeatLua,   kFedLeaseLua,
        kFedReconcileLua, kEscrowLua,      kRegionPoolLua};
    static_assert(bodies.size() == kFusedScript);
    for (int i = 0; i < kFusedScript; ++i) {
      (*t)[i] = absl::StrCat(av(kPreludeLua), av(bodies[i]));
    }
    // The fused script runs the GCRA and token-bucket scripts unchanged,
    // each wrapped as a function whose parameters shadow the prelude's
    // per-call globals and ARGV (fused.lua).
    constexpr std::string_view kParams = "(tk_key, tk_cost, tk_peek, ARGV)\n";
    (*t)[kFusedScript] = absl::StrCat(
        av(kPreludeLua), "local function tk_rate_axis", av(kParams),
        av(kGcraLua), "\nend\nlocal function tk_cost_axis", av(kParams),
        av(kTokenBucketLua), "\nend\n", av(kFusedLua));
    return t;
  }();
  return *texts;
}

// `%.17g`: the shortest text Lua reads back as the same double. An integral
// value below 2^53 prints as its digits under `%.17g` too (no exponent
// below 1e17), so it takes the cheaper integer path: the same text.
std::string fmt_double(double v) {
  if (v >= -9007199254740991.0 && v <= 9007199254740991.0 &&
      v == static_cast<double>(static_cast<int64_t>(v)) &&
      !(v == 0 && std::signbit(v))) {
    return std::to_string(static_cast<int64_t>(v));
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string fmt_int(int64_t v) { return std::to_string(v); }

timeval to_timeval(absl::Duration d) { return absl::ToTimeval(d); }

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
absl::StatusOr<std::pair<std::string, int>> parse_node_address(
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
std::string node_address(std::string_view host, int port) {
  const absl::string_view h(host.data(), host.size());
  return host.find(':') == std::string_view::npos
             ? absl::StrCat(h, ":", port)
             : absl::StrCat("[", h, "]:", port);
}

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

// CLUSTER SLOTS from `host:port` over a connection of its own. A primary
// announced without an address is `host`.
absl::StatusOr<std::vector<SlotRange>> fetch_slot_ranges(
    const std::string& host, int port, const RedisCoordinatorOptions& o) {
  SideConnection c;
  if (absl::Status s = c.open(host, port, o.username, o.password, o); !s.ok()) {
    return s;
  }
  absl::StatusOr<ReplyPtr> r = c.run({"CLUSTER", "SLOTS"});
  if (!r.ok()) return r.status();
  const redisReply* reply = r->get();
  std::vector<SlotRange> out;
  bool ok = reply->type == REDIS_REPLY_ARRAY;
  for (size_t i = 0; ok && i < reply->elements; ++i) {
    const redisReply* e = reply->element[i];
    ok = e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
         e->element[0]->type == REDIS_REPLY_INTEGER &&
         e->element[1]->type == REDIS_REPLY_INTEGER &&
         e->element[2]->type == REDIS_REPLY_ARRAY &&
         e->element[2]->elements >= 2 &&
         e->element[2]->element[0]->type == REDIS_REPLY_STRING &&
         e->element[2]->element[1]->type == REDIS_REPLY_INTEGER;
    if (!ok) break;
    SlotRange range;
    range.first = static_cast<int>(e->element[0]->integer);
    range.last = static_cast<int>(e->element[1]->integer);
    const redisReply* primary = e->element[2];
    range.host.assign(primary->element[0]->str, primary->element[0]->len);
    if (range.host.empty()) range.host = host;
    range.port = static_cast<int>(primary->element[1]->integer);
    ok = range.first >= 0 && range.first <= range.last &&
         range.last < kClusterSlots;
    if (ok) out.push_back(std::move(range));
  }
  if (!ok) {
    return absl::UnavailableError(absl::StrCat(
        "redis: ", c.where(), ": CLUSTER SLOTS: an unreadable reply"));
  }
  return out;
}

// Redis Sentinel: the address ("host:port") the sentinel at `host:port`
// gives for `o.master_name`.
absl::StatusOr<std::string> ask_sentinel(const std::string& host, int port,
                                         const RedisCoordinatorOptions& o) {
  SideConnection c;
  if (absl::Status s =
          c.open(host, port, o.sentinel_username, o.sentinel_password, o);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<ReplyPtr> r =
      c.run({"SENTINEL", "get-master-addr-by-name", o.master_name});
  if (!r.ok()) return r.status();
  const redisReply* reply = r->get();
  if (reply->type == REDIS_REPLY_NIL) {
    return absl::UnavailableError(absl::StrCat("redis: sentinel ", c.where(),
                                               " watches no master named \"",
                                               o.master_name, "\""));
  }
  int primary_port = 0;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[0]->type != REDIS_REPLY_STRING ||
      reply->element[1]->type != REDIS_REPLY_STRING ||
      !absl::SimpleAtoi(
          absl::string_view(reply->element[1]->str, reply->element[1]->len),
          &primary_port)) {
    return absl::UnavailableError(absl::StrCat(
        "redis: sentinel ", c.where(), ": an unreadable primary address"));
  }
  return node_address(
      std::string_view(reply->element[0]->str, reply->element[0]->len),
      primary_port);
}

// Redis Sentinel: OK when the server at `address` says (ROLE) that it is a
// primary; a sentinel may name a primary before the promotion is done, or
// after it was demoted.
// The same over `c`, opened to `address` when it is not open yet (a caller
// that asks again keeps it, and asks over the same connection).
absl::Status confirm_primary(const std::string& address,
                             const RedisCoordinatorOptions& o,
                             SideConnection& c) {
  if (c.context() == nullptr) {
    absl::StatusOr<std::pair<std::string, int>> a = parse_node_address(address);
    if (!a.ok()) return absl::UnavailableError(a.status().message());
    if (absl::Status s = c.open(a->first, a->second, o.username, o.password, o);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<ReplyPtr> r = c.run({"ROLE"});
  if (!r.ok()) return r.status();
  const redisReply* reply = r->get();
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0 ||
      reply->element[0]->type != REDIS_REPLY_STRING ||
      std::string_view(reply->element[0]->str, reply->element[0]->len) !=
          "master") {
    return absl::UnavailableError(
        absl::StrCat("redis: ", address, ", named primary of \"", o.master_name,
                     "\" by the sentinels, is not a primary (ROLE)"));
  }
  return absl::OkStatus();
}

absl::Status confirm_primary(const std::string& address,
                             const RedisCoordinatorOptions& o) {
  SideConnection c;
  return confirm_primary(address, o, c);
}

}  // namespace

class RedisCoordinator::Impl {
 public:
  explicit Impl(const RedisCoordinatorOptions& options)
      : options_(options),
        topology_(!options.cluster_seeds.empty() ? Topology::kCluster
                  : !options.sentinels.empty()   ? Topology::kSentinel
                                                 : Topology::kSingle) {
    connector_ = std::thread([this] { connector_loop(); });
    if (topology_ == Topology::kSingle) {
      MutexLock lock(nodes_mu_);
      single_ = add_node_locked(options.host, options.port);
      return;
    }
    if (topology_ == Topology::kSentinel) {
      start_sentinel();
      return;
    }
    for (const std::string& seed : options.cluster_seeds) {
      auto [host, port] = *parse_node_address(seed);  // validated by create
      MutexLock lock(nodes_mu_);
      if (find_node_locked(host, port) == nullptr) {
        add_node_locked(host, port);
      }
    }
    for (auto& slot : slots_) slot.store(nullptr, std::memory_order_relaxed);
    refresher_ = std::thread([this] { topology_loop(); });
    request_refresh();  // the first map, without delaying `create`
  }

  ~Impl() {
    stopping_.store(true);
    while (following_.load() > 0) std::this_thread::yield();
    if (watcher_.joinable()) {
      const char byte = 0;
      while (write(wake_fds_[1], &byte, 1) < 0 && errno == EINTR) {
      }
      watcher_.join();
    }
    for (int fd : wake_fds_) {
      if (fd >= 0) close(fd);
    }
    if (refresher_.joinable()) {
      {
        MutexLock lock(refresh_mu_);
        refresh_wanted_ = true;
      }
      refresh_cv_.notify_all();
      refresher_.join();
    }
    // Each node's connections serve or expire what is queued on them (the
    // connector still opening those not yet open); a redirect found
    // meanwhile completes with its MOVED status (stopping_). Then the
    // connector stops (after at most one attempt's connect timeout), before
    // any connection it could still be handed goes.
    std::vector<std::unique_ptr<Node>> nodes;
    {
      MutexLock lock(nodes_mu_);
      nodes.swap(nodes_);
    }
    for (const auto& n : nodes) {
      for (const auto& c : n->connections) c->drain();
    }
    {
      MutexLock lock(connector_mu_);
      connector_stop_ = true;
    }
    connector_cv_.notify_all();
    connector_.join();
  }

  // Queues `r` on a connection of its key's node and waits for its reply or
  // its deadline, following MOVED and ASK redirects (Redis Cluster) within
  // the same deadline. Shared: a caller that gives up leaves its request to
  // the leader.
  absl::Status call(const std::shared_ptr<Request>& r) {
    r->deadline = absl::Now() + options_.command_timeout;
    for (;;) {
      Node* node = route(*r);
      if (node == nullptr) return no_primary();
      absl::Status s = pick(*node).call(r);
      // A call that ran out of time may still be in a leader's batch: only
      // a served one (any other status) may be read and sent again.
      if (absl::IsDeadlineExceeded(s)) return s;
      if (r->retry) {
        const absl::Duration pause = prepare_retry(*r);
        if (pause < absl::ZeroDuration()) return s;
        absl::SleepFor(pause);
        continue;
      }
      if (r->redirect.empty()) return s;
      absl::Duration pause;
      if (!prepare_redirect(*r, &pause)) return r->status;
      absl::SleepFor(pause);
    }
  }

  // The blocking form of a verb: the request `fill` writes, its reply read
  // by `parse`.
  template <class T, class Fill>
  absl::StatusOr<T> run(absl::StatusOr<T> (*parse)(const Request&),
                        Fill&& fill) {
    auto r = std::make_shared<Request>();
    fill(*r);
    if (absl::Status s = call(r); !s.ok()) return s;
    return parse(*r);
  }

  // The same verb without waiting: `done` gets what `run` would return.
  template <class T, class Fill>
  void run_async(absl::StatusOr<T> (*parse)(const Request&), Completion<T> done,
                 Fill&& fill) {
    auto r = std::make_shared<AsyncRequest<T>>(parse, std::move(done));
    fill(*r);
    submit(std::move(r));
  }

  // A verb's hook (coordinator.h): `run` on the calling thread when its
  // caller waits (it leads a connection itself, with no hand-off to the
  // I/O thread and back), else `run_async`.
  template <class T, class Fill>
  void dispatch(absl::StatusOr<T> (*parse)(const Request&),
                VerbCompletion<T> done, Fill&& fill) {
    if (done.caller_waits()) {
      std::move(done)(run(parse, std::forward<Fill>(fill)));
      return;
    }
    run_async(parse, std::move(done).release(), std::forward<Fill>(fill));
  }

  // Queues `r`, an AsyncRequest, on a connection without waiting.
  void submit(std::shared_ptr<Request> r) {
    r->deadline = absl::Now() + options_.command_timeout;
    send(std::move(r));
  }

  // Queues the asynchronous `r` at the node it goes to; completes it at
  // once when there is none (Sentinel: no primary known).
  void send(std::shared_ptr<Request> r) {
    Node* node = route(*r);
    if (node == nullptr) {
      r->status = no_primary();
      r->finish();
      return;
    }
    pick(*node).submit(std::move(r));
  }

  // An asynchronous request a node answered with MOVED or ASK: sent again
  // to the node named, within its deadline; completed with the redirect's
  // status when it has followed `max_redirects` or the coordinator stops.
  void follow(std::shared_ptr<Request> r) {
    // Counted, so the destructor does not free a node this is sending to.
    following_.fetch_add(1);
    absl::Duration pause;
    if (stopping_.load() || !prepare_redirect(*r, &pause)) {
      following_.fetch_sub(1);
      r->finish();
      return;
    }
    if (pause > absl::ZeroDuration()) {
      delay(std::move(r), pause);
    } else {
      send(std::move(r));
    }
    following_.fetch_sub(1);
  }

  BackendStats stats() const { return counters_.snapshot(); }

  std::vector<RedisNodeStats> node_stats() {
    Node* primary = primary_.load(std::memory_order_acquire);
    std::set<const Node*> serving;
    if (topology_ == Topology::kCluster) {
      for (const auto& slot : slots_) {
        serving.insert(slot.load(std::memory_order_acquire));
      }
    }
    std::vector<RedisNodeStats> out;
    MutexLock lock(nodes_mu_);
    for (const auto& n : nodes_) {
      RedisNodeStats s;
      s.address = node_address(n->host, n->port);
      s.stats = n->counters.snapshot();
      switch (topology_) {
        case Topology::kSingle:
          s.serving = true;
          break;
        case Topology::kSentinel:
          s.serving = n.get() == primary;
          break;
        case Topology::kCluster:
          s.serving = serving.contains(n.get());
          break;
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  const RedisCoordinatorOptions& options() const { return options_; }

 private:
  // One Redis connection shared by many callers, leader/follower style:
  // the caller that finds it idle becomes the leader and does the I/O for
  // everything queued (its own request included) in one pipelined batch;
  // callers arriving meanwhile queue and wait. When the leader has served
  // its batch it hands the connection to the oldest waiter, if any, which
  // serves the next batch. No I/O thread for blocking callers, so an
  // uncontended call makes no thread hop, and contended calls go out
  // pipelined. Asynchronous requests queue the same way; when the oldest
  // queued request is asynchronous and nobody leads, the connection's I/O
  // thread (started by the first asynchronous call) leads instead.
  struct Node;

  class Connection {
   public:
    // Asks the coordinator's connector for a ready context at once, so the
    // first call finds one (docs/redis.md, "Connections ready before
    // calls").
    Connection(Impl* owner, Node* node) : owner_(owner), node_(node) { want(); }
    // Serves or expires every queued asynchronous request (each within its
    // deadline; the connector still runs, so a connection not yet open
    // gets its context), then stops the I/O thread. No blocking call is in
    // progress (the coordinator outlives its calls). Idempotent.
    void drain() {
      std::thread io;
      {
        MutexLock lock(mu_);
        stopping_ = true;
        io = std::move(io_);
      }
      io_wake_.notify_all();
      if (io.joinable()) io.join();
    }
    // After `drain`, with the connector stopped.
    ~Connection() {
      drain();
      drop();
      MutexLock lock(mu_);
      if (spare_ != nullptr) redisFree(std::exchange(spare_, nullptr));
    }

    // The connector's side (Impl::connector_loop): a context set up for
    // calls, taken by the next leader; or why the last attempt failed
    // (the connector tries again after a backoff).
    void offer(ReadyContext ready) {
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
    void refused(absl::Status why) {
      {
        MutexLock lock(mu_);
        connect_error_ = std::move(why);
      }
      ready_cv_.notify_all();
    }
    // Whether a context is ready or in use, and the connector's last error
    // while none is.
    bool ready() {
      MutexLock lock(mu_);
      return spare_ != nullptr || connected_;
    }
    absl::Status connect_error() {
      MutexLock lock(mu_);
      return absl::Status(connect_error_.code(), connect_error_.message());
    }
    Node& node() const { return *node_; }

    void submit(std::shared_ptr<Request> req) {
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

    // The status moves out of the request to the caller: an error's shared
    // representation (one per failed batch) is then only ever copied on
    // the leader's thread before the hand-over, never on two threads at
    // once (the distribution's abseil releases it in code ThreadSanitizer
    // does not see).
    absl::Status call(const std::shared_ptr<Request>& req) {
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

   private:
    absl::Status deadline_error() const {
      const RedisCoordinatorOptions& o = owner_->options_;
      return absl::DeadlineExceededError(
          absl::StrCat("redis: no reply from ", node_->host, ":", node_->port,
                       " within the command timeout (",
                       absl::FormatDuration(o.command_timeout), ")"));
    }

    // The I/O thread: leads whenever it is handed the connection, until
    // the connection stops with nothing left to serve.
    void io_loop() {
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

    // Serves one batch as the leader, then hands the connection over: to
    // the oldest waiting caller, or to the I/O thread when the oldest
    // queued request is asynchronous. Asynchronous requests whose deadline
    // passed in the queue are not sent; they complete with
    // kDeadlineExceeded.
    void lead() {
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

    // A request's result, built outside the lock.
    struct Outcome {
      absl::Status status = absl::UnknownError("redis: not served");
      std::vector<int64_t> reply;
      std::vector<std::string> text;
      std::string redirect;  // MOVED / ASK: the node named
      int redirect_slot = -1;
      bool ask = false;
      bool retry = false;  // TRYAGAIN / CLUSTERDOWN
    };

    // Sends `batch` in one pipelined write and reads the replies in order.
    // Runs without the lock: only the leader touches the connection.
    void serve(const std::vector<std::shared_ptr<Request>>& batch,
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
      std::vector<absl::Time> async_by(batch.size() + 1,
                                       absl::InfiniteFuture());
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
        freeReplyObject(reply);
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
      if (absl::Status s = retry.empty() ? absl::OkStatus() : flush();
          !s.ok()) {
        for (size_t i : retry) fail(out[i], s);
        lose();
        return;
      }
      for (size_t k = 0; k < retry.size(); ++k) {
        redisReply* reply = nullptr;
        if (absl::Status s =
                read_for(*batch[retry[k]], bound(retry[k]), &reply);
            !s.ok()) {
          for (size_t j = k; j < retry.size(); ++j) fail(out[retry[j]], s);
          lose();
          return;
        }
        complete(out[retry[k]], reply);
        freeReplyObject(reply);
      }
      if (wait_again) {
        if (absl::Status s = settle_wait(batch, retry, out); !s.ok()) lose();
      }
    }

    static bool writes(const Request& r) {
      return r.script >= 0 && r.script != kStateScript;
    }

    // `durable_writes`: appends WAIT <n> <ms> after the calls `idx` of
    // `batch` when one of them writes; <ms> ends before the earliest
    // deadline among those (at least 1: WAIT 0 would wait forever). True
    // when appended.
    bool append_wait(const std::vector<std::shared_ptr<Request>>& batch,
                     const std::vector<size_t>& idx) {
      const int n = owner_->options_.durable_writes;
      if (n == 0) return false;
      absl::Time by = absl::InfiniteFuture();
      for (size_t i : idx) {
        if (writes(*batch[i])) by = std::min(by, batch[i]->deadline);
      }
      if (by == absl::InfiniteFuture()) return false;
      // The reply must come back before the deadline: WAIT gets half of
      // what is left, since Redis ends a WAIT that times out only at its
      // next timer tick (1/hz: 100 ms by default).
      wait_ms_ = std::max<int64_t>(
          1, absl::ToInt64Milliseconds((by - absl::Now()) / 2));
      wait_argv_ = {"WAIT", fmt_int(n), fmt_int(wait_ms_)};
      const char* argv[3];
      size_t lens[3];
      for (int i = 0; i < 3; ++i) {
        argv[i] = wait_argv_[i].data();
        lens[i] = wait_argv_[i].size();
      }
      redisAppendCommandArgv(ctx_, 3, argv, lens);
      return true;
    }

    // `durable_writes`: reads the reply to the WAIT after the calls `idx`;
    // when fewer replicas than asked acknowledged, each of those calls that
    // wrote and succeeded fails kUnavailable instead. Not OK when the reply
    // did not come (the connection must go; the calls stand failed).
    absl::Status settle_wait(const std::vector<std::shared_ptr<Request>>& batch,
                             const std::vector<size_t>& idx,
                             std::vector<Outcome>& out) {
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
        freeReplyObject(reply);
      }
      if (s.ok() && acked >= n) return absl::OkStatus();
      for (size_t i : idx) {
        if (!writes(*batch[i]) || !out[i].status.ok()) continue;
        count(&detail::BackendCounters::unreplicated);
        count(&detail::BackendCounters::failures);
        out[i].status = s.ok() ? absl::UnavailableError(absl::StrCat(
                                     "redis: the write reached ", acked, " of ",
                                     n, " replicas within ", wait_ms_,
                                     " ms (durable_writes)", why))
                               : s;
      }
      return s;
    }

    // Writes everything appended (blocking, bounded by the send timeout).
    absl::Status flush() {
      int done = 0;
      do {
        if (redisBufferWrite(ctx_, &done) != REDIS_OK) return io_error();
      } while (done == 0);
      return absl::OkStatus();
    }

    // The next reply, reading the socket only when none is buffered, and
    // waiting for it no later than `deadline`: a reply that would come
    // later is kDeadlineExceeded.
    absl::Status read_reply(absl::Time deadline, redisReply** out) {
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

    // The reply to `r`: after the reply to the ASKING sent before it, when
    // it follows an ASK redirect.
    absl::Status read_for(const Request& r, absl::Time deadline,
                          redisReply** out) {
      if (!r.ask_at.empty()) {
        redisReply* asking = nullptr;
        if (absl::Status s = read_reply(deadline, &asking); !s.ok()) return s;
        freeReplyObject(asking);
      }
      return read_reply(deadline, out);
    }

    // Keeps the socket's timeout within a small tolerance of `left` (one
    // system call only when it drifts: an uncontended call never pays it).
    // A zero timeval would mean "wait forever", so it is at least 100 us.
    void set_read_timeout(absl::Duration left) {
      const absl::Duration tolerance = std::min(
          absl::Milliseconds(2), owner_->options_.command_timeout / 16);
      left = std::max(left, absl::Microseconds(100));
      if (absl::AbsDuration(left - timeout_set_) <= tolerance) return;
      redisSetTimeout(ctx_, to_timeval(left));
      timeout_set_ = left;
    }

    absl::Status late_error() const {
      return absl::DeadlineExceededError(absl::StrCat(
          "redis: ", node_->host, ":", node_->port, " did not answer in time"));
    }

    void append(const Request& r, bool evalsha) {
      // The leader's scratch arrays, kept across requests: no allocation.
      std::vector<const char*>& argv = argv_scratch_;
      std::vector<size_t>& lens = lens_scratch_;
      argv.clear();
      lens.clear();
      const auto push = [&](const std::string& s) {
        argv.push_back(s.data());
        lens.push_back(s.size());
      };
      static const std::string kEvalSha = "EVALSHA";
      static const std::string kEval = "EVAL";
      static const std::string kOne = "1";
      static const std::string kTwo = "2";
      static const std::string kAsking = "ASKING";
      if (!r.ask_at.empty()) {
        // Redis Cluster: the slot is migrating here; ASKING lets the next
        // command see it (its +OK is skipped by `read_for`).
        const char* a = kAsking.data();
        const size_t n = kAsking.size();
        redisAppendCommandArgv(ctx_, 1, &a, &n);
      }
      if (r.script >= 0) {
        const bool use_sha = evalsha && !shas_[r.script].empty();
        push(use_sha ? kEvalSha : kEval);
        push(use_sha ? shas_[r.script] : script_texts()[r.script]);
        push(r.keys == 2 ? kTwo : kOne);
      }
      for (const std::string& a : r.argv) push(a);
      redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(),
                             lens.data());
    }

    // Takes the context the connector made ready, waiting for it until
    // `by` (the earliest deadline of the batch): kDeadlineExceeded if none
    // comes by then; kUnavailable at once, with its reason, while the
    // connector's attempts fail (a server that refuses or is gone), so an
    // outage costs a call no wait. Only the leader calls it.
    absl::Status await_context(absl::Time by) {
      MutexLock lock(mu_);
      for (;;) {
        if (spare_ != nullptr) {
          ctx_ = std::exchange(spare_, nullptr);
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
          timed_out =
              ready_cv_.wait_until(native.lock(), absl::ToChronoTime(by)) ==
              std::cv_status::timeout;
        }
        if (timed_out && spare_ == nullptr && connect_error_.ok()) {
          return absl::DeadlineExceededError(absl::StrCat(
              "redis: no connection to ", node_->host, ":", node_->port,
              " was ready within the command timeout (",
              absl::FormatDuration(owner_->options_.command_timeout),
              "; still connecting)"));
        }
      }
    }

    // Asks the connector for a new context, unless one is owed already.
    void want() {
      {
        MutexLock lock(mu_);
        if (wanted_) return;
        wanted_ = true;
      }
      owner_->want_context(this);
    }

    absl::Status io_error() const {
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

    void drop() {
      if (ctx_ == nullptr) return;
      redisFree(ctx_);
      ctx_ = nullptr;
      MutexLock lock(mu_);
      connected_ = false;
    }

    // Drops a failed context and asks the connector for its replacement at
    // once, in the background.
    void lose() {
      drop();
      want();
    }

    // Integers go to `out.reply` (strings too, parsed as integers); strings
    // also go, verbatim, to `out.text`.
    static void flatten(const redisReply* reply, Outcome& out) {
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

    void complete(Outcome& o, const redisReply* reply) {
      if (reply->type == REDIS_REPLY_ERROR &&
          (redirected(reply, o) || unavailable_slot(reply, o) ||
           (owner_->topology_ == Topology::kSentinel &&
            not_primary(reply, o)))) {
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
          o.status = absl::ResourceExhaustedError(
              absl::StrCat("redis: ", msg.substr(7)));
        } else {
          o.status = absl::UnavailableError(absl::StrCat("redis: ", msg));
        }
        return;
      }
      o.reply.reserve(8);  // a decision is 5 integers, a grant 4
      flatten(reply, o);
      o.status = absl::OkStatus();
    }

    // Redis Cluster: "MOVED <slot> <host>:<port>" or "ASK <slot>
    // <host>:<port>" recorded in `o` (its status the error, should the
    // redirect not be followed); false for any other error.
    static bool redirected(const redisReply* reply, Outcome& o) {
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

    // Redis Cluster: "TRYAGAIN ..." (a multi-key call met a slot half
    // migrated) or "CLUSTERDOWN ..." (the cluster cannot serve the slot
    // now), recorded in `o` to be sent again after a pause.
    static bool unavailable_slot(const redisReply* reply, Outcome& o) {
      const std::string_view msg(reply->str, reply->len);
      if (!msg.starts_with("TRYAGAIN") && !msg.starts_with("CLUSTERDOWN")) {
        return false;
      }
      o.retry = true;
      o.status = absl::UnavailableError(
          absl::StrCat("redis: ", absl::string_view(msg.data(), msg.size())));
      return true;
    }

    // Redis Sentinel: "READONLY ..." (the node was demoted to a replica) or
    // "LOADING ..." (a node restarting): recorded in `o` to be sent again,
    // after a pause, to the primary the sentinels name then (asked now).
    bool not_primary(const redisReply* reply, Outcome& o) {
      const std::string_view msg(reply->str, reply->len);
      if (!msg.starts_with("READONLY") && !msg.starts_with("LOADING")) {
        return false;
      }
      o.retry = true;
      o.status = absl::UnavailableError(
          absl::StrCat("redis: ", absl::string_view(msg.data(), msg.size())));
      owner_->request_refresh();
      return true;
    }

    void fail(Outcome& o, const absl::Status& s) {
      owner_->request_refresh();  // Redis Cluster: the node may be gone
      count(absl::IsDeadlineExceeded(s) ? &detail::BackendCounters::timeouts
                                        : &detail::BackendCounters::failures);
      o.status = s;
    }

    // Counts one `field` event for the coordinator and for this node.
    void count(std::atomic<int64_t> detail::BackendCounters::*field) const {
      detail::BackendCounters::add(owner_->counters_.*field);
      detail::BackendCounters::add(node_->counters.*field);
    }

    Impl* const owner_;
    Node* const node_;
    // A `Mutex` (core/mutex.h: a std::mutex ThreadSanitizer sees, checked
    // by clang's analysis); the distribution's abseil is not built for
    // ThreadSanitizer, so not absl::Mutex.
    Mutex mu_;
    std::deque<std::shared_ptr<Request>> queue_ ABSL_GUARDED_BY(mu_);
    bool busy_ ABSL_GUARDED_BY(mu_) = false;      // a leader owns the I/O
    bool io_lead_ ABSL_GUARDED_BY(mu_) = false;   // the I/O thread must lead
    bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // the destructor runs
    std::condition_variable io_wake_;      // on `io_lead_` or `stopping_`
    std::thread io_ ABSL_GUARDED_BY(mu_);  // started by the first submit
    // From the connector: a context ready for the next leader, and its
    // scripts' SHA-1s; why its last attempt failed (OK after a success);
    // whether it owes this connection a context; whether a leader holds
    // one (`ctx_` set). `ready_cv_` wakes a leader waiting for a context.
    redisContext* spare_ ABSL_GUARDED_BY(mu_) = nullptr;
    std::array<std::string, kScriptCount> spare_shas_ ABSL_GUARDED_BY(mu_);
    absl::Status connect_error_ ABSL_GUARDED_BY(mu_);
    bool wanted_ ABSL_GUARDED_BY(mu_) = false;
    bool connected_ ABSL_GUARDED_BY(mu_) = false;
    std::condition_variable ready_cv_;
    // Touched only by the current leader (handed over under `mu_`).
    redisContext* ctx_ = nullptr;
    absl::Duration timeout_set_;             // the socket's timeout now
    std::vector<const char*> argv_scratch_;  // `append`'s
    std::array<std::string, 3> wait_argv_;   // `append_wait`'s
    int64_t wait_ms_ = 0;
    std::vector<size_t> lens_scratch_;
    std::array<std::string, kScriptCount> shas_;
  };

  // One server: its address and its connections (calls spread over them
  // round-robin). Never removed before the coordinator goes, so a pointer
  // to it stays valid.
  struct Node {
    std::string host;
    int port = 0;
    std::vector<std::unique_ptr<Connection>> connections;
    std::atomic<size_t> next{0};
    detail::BackendCounters counters;  // this node's share of `counters_`
  };

  Node* add_node_locked(const std::string& host, int port)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(nodes_mu_) {
    auto n = std::make_unique<Node>();
    n->host = host;
    n->port = port;
    for (int i = 0; i < options_.connections; ++i) {
      n->connections.push_back(std::make_unique<Connection>(this, n.get()));
    }
    nodes_.push_back(std::move(n));
    return nodes_.back().get();
  }
  Node* find_node_locked(const std::string& host, int port)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(nodes_mu_) {
    for (const auto& n : nodes_) {
      if (n->port == port && n->host == host) return n.get();
    }
    return nullptr;
  }
  // The node at `address` ("host:port"), added when new; null for an
  // address that does not parse.
  Node* node_at(std::string_view address) {
    absl::StatusOr<std::pair<std::string, int>> a = parse_node_address(address);
    if (!a.ok()) return nullptr;
    MutexLock lock(nodes_mu_);
    Node* n = find_node_locked(a->first, a->second);
    return n != nullptr ? n : add_node_locked(a->first, a->second);
  }
  // A node to ask when the map has no answer: the first seed.
  Node* first_node() {
    MutexLock lock(nodes_mu_);
    return nodes_.front().get();
  }

  // The node `r` goes to: the one server; with Sentinel, the primary last
  // learned (null: none yet); in a cluster, the ASK target it was sent to,
  // else the owner of its key's slot (a command without a key and a slot
  // the map does not know yet go to the first seed, whose MOVED then names
  // the owner).
  Node* route(const Request& r) {
    if (single_ != nullptr) return single_;
    if (topology_ == Topology::kSentinel) {
      Node* n = primary_.load(std::memory_order_acquire);
      if (n == nullptr) request_refresh();
      return n;
    }
    if (!r.ask_at.empty()) {
      if (Node* n = node_at(r.ask_at); n != nullptr) return n;
    }
    std::string_view key;
    if (r.script >= 0) {
      key = r.argv.front();
    } else if (r.argv.size() > 1) {
      key = r.argv[1];
    }
    if (!key.empty()) {
      Node* n = slots_[static_cast<size_t>(key_slot(key))].load(
          std::memory_order_acquire);
      if (n != nullptr) return n;
      request_refresh();
    }
    return first_node();
  }

  static Connection& pick(Node& n) {
    const size_t i =
        n.next.fetch_add(1, std::memory_order_relaxed) % n.connections.size();
    return *n.connections[i];
  }

  // Readies `r`, answered with a redirect, to be sent again: MOVED points
  // its slot at the new node (and refreshes the whole map in the
  // background), ASK sends it once to the node named, with ASKING. The
  // first two redirects of a call are followed at once; later ones after
  // `*pause` (2 ms, doubling), which lets a migration's last steps land
  // (a slot handed over to one node before the other knows). False (r's
  // status stands) past `max_redirects` or when the pause would end past
  // its deadline.
  bool prepare_redirect(Request& r, absl::Duration* pause) {
    detail::BackendCounters::add(counters_.redirects);
    const std::string to = std::move(r.redirect);
    r.redirect.clear();
    ++r.redirects;
    *pause = r.redirects <= 2
                 ? absl::ZeroDuration()
                 : absl::Milliseconds(2) *
                       (int64_t{1} << std::min(r.redirects - 3, 5));
    if (r.redirects > options_.max_redirects ||
        absl::Now() + *pause >= r.deadline) {
      detail::BackendCounters::add(counters_.failures);
      r.status = absl::UnavailableError(absl::StrCat(
          "redis: slot ", r.redirect_slot, " still redirected after ",
          r.redirects - 1, " redirects (last to ", to, ")"));
      return false;
    }
    Node* n = node_at(to);
    if (n == nullptr) {
      detail::BackendCounters::add(counters_.failures);
      r.status = absl::UnavailableError(
          absl::StrCat("redis: a redirect to an unreadable address: ", to));
      return false;
    }
    if (r.ask) {
      r.ask_at = to;
    } else {
      r.ask_at.clear();
      if (r.redirect_slot >= 0 && r.redirect_slot < kClusterSlots) {
        slots_[static_cast<size_t>(r.redirect_slot)].store(
            n, std::memory_order_release);
      }
      request_refresh();
    }
    r.ask = false;
    reset_for_resend(r);
    return true;
  }

  // Clears what serving `r` wrote, so that it can be queued again.
  static void reset_for_resend(Request& r) {
    r.done = false;
    r.lead = false;
    r.abandoned = false;
    r.reply.clear();
    r.text.clear();
    r.status = absl::UnknownError("redis: not served");
  }

  // Asks the refresher for a new slot map (at most one per
  // `kRefreshInterval`; requests meanwhile are merged).
  void request_refresh() {
    if (topology_ == Topology::kSingle ||
        stopping_.load(std::memory_order_acquire)) {
      return;
    }
    {
      MutexLock lock(refresh_mu_);
      if (refresh_wanted_) return;
      refresh_wanted_ = true;
    }
    refresh_cv_.notify_one();
  }

  static constexpr absl::Duration kRefreshInterval = absl::Milliseconds(100);

  // Readies `r`, answered TRYAGAIN or CLUSTERDOWN, to be sent again: the
  // pause before it (2 ms, doubling, at most 64 ms), or a negative duration
  // (r's status stands) when the pause would end past its deadline.
  absl::Duration prepare_retry(Request& r) {
    const absl::Duration pause =
        absl::Milliseconds(2) * (int64_t{1} << std::min(r.retries, 5));
    if (absl::Now() + pause >= r.deadline) {
      detail::BackendCounters::add(counters_.failures);
      return -absl::Nanoseconds(1);
    }
    detail::BackendCounters::add(counters_.retries);
    ++r.retries;
    r.retry = false;
    reset_for_resend(r);
    return pause;
  }

  // An asynchronous request answered TRYAGAIN or CLUSTERDOWN: the cluster
  // thread sends it again after its pause, or it completes with that
  // answer when no pause fits its deadline.
  void retry_later(std::shared_ptr<Request> r) {
    // Counted as `follow` is: the destructor drains `delayed_` only after.
    following_.fetch_add(1);
    const absl::Duration pause =
        stopping_.load() ? -absl::Nanoseconds(1) : prepare_retry(*r);
    if (pause < absl::ZeroDuration()) {
      following_.fetch_sub(1);
      r->finish();
      return;
    }
    delay(std::move(r), pause);
    following_.fetch_sub(1);
  }

  // Hands `r` to the cluster thread, to be sent after `pause`.
  void delay(std::shared_ptr<Request> r, absl::Duration pause) {
    {
      MutexLock lock(refresh_mu_);
      delayed_.emplace(absl::Now() + pause, std::move(r));
    }
    refresh_cv_.notify_one();
  }

  // The topology thread: reads the slot map (cluster) or asks the sentinels
  // for the primary (Sentinel) when asked, no more often than
  // `kRefreshInterval`, and sends again, when due, the calls waiting out a
  // TRYAGAIN, CLUSTERDOWN, READONLY or LOADING; when the coordinator stops,
  // the calls still waiting complete with that answer.
  void topology_loop() {
    absl::Time last = absl::InfinitePast();
    MutexLock lock(refresh_mu_);
    while (!stopping_.load()) {
      const absl::Time now = absl::Now();
      std::vector<std::shared_ptr<Request>> due;
      while (!delayed_.empty() && delayed_.begin()->first <= now) {
        due.push_back(std::move(delayed_.begin()->second));
        delayed_.erase(delayed_.begin());
      }
      const bool refresh = refresh_wanted_ && now >= last + kRefreshInterval;
      if (refresh) refresh_wanted_ = false;
      if (!due.empty() || refresh) {
        lock.unlock();
        for (std::shared_ptr<Request>& r : due) send(std::move(r));
        if (refresh) {
          last = now;
          if (topology_ == Topology::kSentinel) {
            discover_primary();
          } else {
            refresh_map();
          }
        }
        lock.lock();
        continue;
      }
      absl::Time wake = absl::InfiniteFuture();
      if (!delayed_.empty()) wake = delayed_.begin()->first;
      if (refresh_wanted_) wake = std::min(wake, last + kRefreshInterval);
      NativeWait native(refresh_mu_);
      if (wake == absl::InfiniteFuture()) {
        refresh_cv_.wait(native.lock());
      } else {
        refresh_cv_.wait_until(native.lock(), absl::ToChronoTime(wake));
      }
    }
    std::multimap<absl::Time, std::shared_ptr<Request>> left;
    left.swap(delayed_);
    lock.unlock();
    for (auto& entry : left) entry.second->finish();
  }

  // Sentinel: the first discovery (bounded by each sentinel's timeouts),
  // then the topology thread and the +switch-master watcher.
  void start_sentinel() {
    for (const std::string& s : options_.sentinels) {
      sentinels_.push_back(*parse_node_address(s));  // validated by create
    }
    discover_primary();
    if (pipe2(wake_fds_, O_CLOEXEC) != 0) {
      wake_fds_[0] = wake_fds_[1] = -1;  // no watcher: discovery on failure
    } else {
      watcher_ = std::thread([this] { watch_sentinels(); });
    }
    refresher_ = std::thread([this] { topology_loop(); });
  }

  // Sentinel: the status of a call made while no primary is known.
  absl::Status no_primary() {
    MutexLock lock(discovery_mu_);
    return absl::UnavailableError(
        absl::StrCat("redis: no primary known for master \"",
                     options_.master_name, "\": ", discovery_error_.message()));
  }

  // Sentinel: asks the sentinels in turn (the one that answered last
  // first) for the primary and confirms it with ROLE; points later calls at
  // it. When none confirms one, the primary stays as it was (its failures
  // ask again) and the last error is kept for `no_primary`.
  void discover_primary() {
    absl::Status last = absl::UnavailableError("no sentinel asked yet");
    for (size_t k = 0; k < sentinels_.size(); ++k) {
      const size_t i = (sentinel_first_ + k) % sentinels_.size();
      const auto& [host, port] = sentinels_[i];
      absl::StatusOr<std::string> address = ask_sentinel(host, port, options_);
      if (address.ok()) {
        last = confirm_primary(*address, options_);
        if (last.ok()) {
          sentinel_first_ = i;
          detail::BackendCounters::add(counters_.refreshes);
          {
            // A promotion seen first (`await_promotion`) stands until the
            // sentinels announce it.
            MutexLock lock(discovery_mu_);
            if (absl::Now() < hold_until_) return;
          }
          set_primary(*address);
          return;
        }
      } else {
        last = address.status();
      }
    }
    MutexLock lock(discovery_mu_);
    discovery_error_ = last;
  }

  // Sentinel: later calls go to the primary at `address`.
  void set_primary(const std::string& address) {
    Node* n = node_at(address);
    if (n == nullptr) return;
    Node* was = primary_.exchange(n, std::memory_order_acq_rel);
    if (was != nullptr && was != n) {
      detail::BackendCounters::add(counters_.switches);
    }
  }

  // Sentinel: waits, up to `pause`, for the destructor's wake-up. True when
  // it came (the watcher must stop).
  bool wait_for_stop(absl::Duration pause) {
    pollfd p{wake_fds_[0], POLLIN, 0};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(pause));
    return poll(&p, 1, ms) > 0 || stopping_.load();
  }

  // Sentinel: the watcher thread. Stays subscribed at every sentinel (a
  // failover's events are published by the sentinel that runs it; one
  // that fails is subscribed again every 200 ms) to two events for
  // `master_name`: +failover-state-wait-promotion, when the sentinels have
  // told a replica to become the primary, upon which it asks that replica
  // (ROLE, every 2 ms) until it says it is the primary and moves later
  // calls there at once; and +switch-master, the sentinels' announcement
  // of the new primary (about a second after the promotion: they see it
  // through their INFO polls), upon which it moves later calls to the
  // primary announced. The first cuts the time in which the old primary,
  // not yet demoted, takes writes that the new one will not have
  // (docs/redis.md, "Redis Sentinel"). After every (re)subscription it asks
  // for the primary, since a switch may have been announced while it was
  // not listening.
  void watch_sentinels() {
    std::vector<std::unique_ptr<SideConnection>> subs(sentinels_.size());
    absl::Time retry_at = absl::InfinitePast();
    while (!stopping_.load()) {
      if (absl::Now() >= retry_at) {
        bool subscribed = false;
        for (size_t i = 0; i < subs.size(); ++i) {
          if (subs[i] != nullptr) continue;
          auto c = std::make_unique<SideConnection>();
          const auto& [host, port] = sentinels_[i];
          absl::Status st = c->open(host, port, options_.sentinel_username,
                                    options_.sentinel_password, options_);
          if (st.ok()) {
            st = c->run({"SUBSCRIBE", "+switch-master",
                         "+failover-state-wait-promotion"})
                     .status();
          }
          if (st.ok()) {
            subs[i] = std::move(c);
            subscribed = true;
          }
        }
        if (subscribed) request_refresh();
        retry_at = absl::Now() + absl::Milliseconds(200);
      }
      std::vector<pollfd> fds = {{wake_fds_[0], POLLIN, 0}};
      std::vector<size_t> which;
      for (size_t i = 0; i < subs.size(); ++i) {
        if (subs[i] == nullptr) continue;
        fds.push_back({subs[i]->context()->fd, POLLIN, 0});
        which.push_back(i);
      }
      const bool all = which.size() == subs.size();
      if (poll(fds.data(), fds.size(), all ? -1 : 200) < 0 && errno != EINTR) {
        continue;
      }
      if (fds[0].revents != 0 || stopping_.load()) return;
      for (size_t k = 0; k < which.size(); ++k) {
        if (fds[k + 1].revents == 0) continue;
        if (!read_events(*subs[which[k]])) subs[which[k]].reset();
      }
    }
  }

  // Sentinel: reads what a subscription has received and acts on each
  // event; false when the connection broke.
  bool read_events(SideConnection& c) {
    if (redisBufferRead(c.context()) != REDIS_OK) return false;
    for (;;) {
      void* raw = nullptr;
      if (redisReaderGetReply(c.context()->reader, &raw) != REDIS_OK) {
        return false;
      }
      if (raw == nullptr) return true;
      ReplyPtr message(static_cast<redisReply*>(raw));
      on_sentinel_message(message.get());
    }
  }

  // Sentinel: a published event. "+switch-master": "<name> <old ip> <old
  // port> <new ip> <new port>"; "+failover-state-wait-promotion": "slave
  // <ip:port> <ip> <port> @ <name> <primary ip> <primary port>". Others,
  // and events for other names, are ignored.
  void on_sentinel_message(const redisReply* m) {
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
        m->element[0]->type != REDIS_REPLY_STRING ||
        m->element[1]->type != REDIS_REPLY_STRING ||
        m->element[2]->type != REDIS_REPLY_STRING ||
        absl::string_view(m->element[0]->str, m->element[0]->len) !=
            "message") {
      return;
    }
    const absl::string_view channel(m->element[1]->str, m->element[1]->len);
    const std::vector<absl::string_view> words = absl::StrSplit(
        absl::string_view(m->element[2]->str, m->element[2]->len), ' ');
    const auto address = [](absl::string_view host, absl::string_view port) {
      int p = 0;
      return absl::SimpleAtoi(port, &p)
                 ? node_address(std::string_view(host.data(), host.size()), p)
                 : std::string();
    };
    if (channel == "+switch-master" && words.size() == 5 &&
        words[0] == options_.master_name) {
      const std::string to = address(words[3], words[4]);
      if (to.empty()) return;
      {
        MutexLock lock(discovery_mu_);
        hold_until_ = absl::InfinitePast();
      }
      set_primary(to);
    } else if (channel == "+failover-state-wait-promotion" &&
               words.size() == 8 && words[0] == "slave" &&
               words[5] == options_.master_name) {
      const std::string to = address(words[2], words[3]);
      if (!to.empty()) await_promotion(to);
    }
  }

  // Sentinel: asks the replica at `address`, told to become the primary,
  // for its ROLE every 2 ms (for at most 10 s) and moves later calls to it
  // once it says it is the primary. For 5 s after, or until the sentinels'
  // +switch-master, a discovery that still names the old primary (the
  // sentinels announce the new one later) does not move calls back.
  void await_promotion(const std::string& address) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    // One connection, asked again every 2 ms (opened again if it broke).
    auto c = std::make_unique<SideConnection>();
    while (absl::Now() < give_up) {
      const absl::Status role = confirm_primary(address, options_, *c);
      if (!role.ok() && (c->context() == nullptr || c->context()->err != 0)) {
        c = std::make_unique<SideConnection>();
      }
      if (role.ok()) {
        {
          MutexLock lock(discovery_mu_);
          hold_until_ = absl::Now() + absl::Seconds(5);
        }
        set_primary(address);
        return;
      }
      if (wait_for_stop(absl::Milliseconds(2))) return;
    }
  }

  // Reads CLUSTER SLOTS from the first node that answers (the known nodes
  // in order) and points every slot at its primary.
  void refresh_map() {
    std::vector<std::pair<std::string, int>> candidates;
    {
      MutexLock lock(nodes_mu_);
      for (const auto& n : nodes_) candidates.emplace_back(n->host, n->port);
    }
    for (const auto& [host, port] : candidates) {
      absl::StatusOr<std::vector<SlotRange>> ranges =
          fetch_slot_ranges(host, port, options_);
      if (!ranges.ok()) continue;
      for (const SlotRange& range : *ranges) {
        Node* n = node_at(absl::StrCat(range.host, ":", range.port));
        if (n == nullptr) continue;
        for (int slot = range.first; slot <= range.last; ++slot) {
          slots_[static_cast<size_t>(slot)].store(n, std::memory_order_release);
        }
      }
      detail::BackendCounters::add(counters_.refreshes);
      return;
    }
  }

  // Asks the connector to open a context for `c`, now (it stays asked
  // until one is open, retried with a backoff).
  void want_context(Connection* c) {
    {
      MutexLock lock(connector_mu_);
      connector_due_.emplace(absl::Now(), c);
    }
    connector_cv_.notify_one();
  }

  // The connector: opens the contexts connections ask for, one at a time,
  // off every call's path, each attempt bounded by `connect_timeout`; a
  // failed one is retried after a backoff (5 ms, doubling, at most 500 ms)
  // while its connection is told why, so calls fail at once meanwhile.
  void connector_loop() {
    std::map<Connection*, absl::Duration> backoff;
    MutexLock lock(connector_mu_);
    for (;;) {
      if (connector_stop_) return;
      if (connector_due_.empty()) {
        NativeWait native(connector_mu_);
        connector_cv_.wait(native.lock());
        continue;
      }
      const auto first = connector_due_.begin();
      if (first->first > absl::Now()) {
        NativeWait native(connector_mu_);
        connector_cv_.wait_until(native.lock(),
                                 absl::ToChronoTime(first->first));
        continue;
      }
      Connection* c = first->second;
      connector_due_.erase(first);
      lock.unlock();
      absl::StatusOr<ReadyContext> ready =
          ReadyContext::open(c->node().host, c->node().port, options_);
      if (ready.ok()) {
        detail::BackendCounters::add(counters_.connects);
        detail::BackendCounters::add(c->node().counters.connects);
        backoff.erase(c);
        c->offer(*std::move(ready));
        lock.lock();
        continue;
      }
      c->refused(ready.status());
      absl::Duration& wait = backoff[c];
      wait =
          std::clamp(wait * 2, absl::Milliseconds(5), absl::Milliseconds(500));
      lock.lock();
      connector_due_.emplace(absl::Now() + wait, c);
    }
  }

 public:
  // Whether every connection of every node calls go to has a context open
  // (Sentinel: a primary is known; a cluster: its slot map has been read);
  // if not, what it waits for, and the last connection error if there is
  // one.
  struct Readiness {
    bool ready = false;
    std::string waiting_for;
    absl::Status error;
  };
  Readiness readiness() {
    if (topology_ == Topology::kSentinel &&
        primary_.load(std::memory_order_acquire) == nullptr) {
      MutexLock lock(discovery_mu_);
      return {false, "a primary from the sentinels", discovery_error_};
    }
    if (topology_ == Topology::kCluster &&
        counters_.refreshes.load(std::memory_order_relaxed) == 0) {
      return {false, "the cluster's slot map", absl::OkStatus()};
    }
    std::vector<Connection*> all;
    {
      MutexLock lock(nodes_mu_);
      Node* primary = primary_.load(std::memory_order_acquire);
      for (const auto& n : nodes_) {
        if (topology_ == Topology::kSentinel && n.get() != primary) {
          continue;  // a former primary
        }
        for (const auto& c : n->connections) all.push_back(c.get());
      }
    }
    for (Connection* c : all) {
      if (!c->ready()) {
        return {false,
                absl::StrCat("a connection to ", c->node().host, ":",
                             c->node().port),
                c->connect_error()};
      }
    }
    return {true, "", absl::OkStatus()};
  }

 private:
  const RedisCoordinatorOptions options_;
  enum class Topology { kSingle, kCluster, kSentinel };
  const Topology topology_;
  Mutex nodes_mu_;
  std::vector<std::unique_ptr<Node>> nodes_ ABSL_GUARDED_BY(nodes_mu_);
  Node* single_ = nullptr;  // the one server, when not a cluster
  // Cluster: each slot's primary, as last learned (null: not known yet).
  std::array<std::atomic<Node*>, kClusterSlots> slots_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> following_{0};  // `follow`, `retry_later` in progress
  Mutex refresh_mu_;
  bool refresh_wanted_ ABSL_GUARDED_BY(refresh_mu_) = false;
  // Calls waiting out a TRYAGAIN or CLUSTERDOWN, by when they go again.
  std::multimap<absl::Time, std::shared_ptr<Request>> delayed_
      ABSL_GUARDED_BY(refresh_mu_);
  std::condition_variable refresh_cv_;
  std::thread refresher_;  // the topology thread (cluster, Sentinel)
  // Sentinel: the sentinels; the primary last confirmed (null: none yet);
  // the sentinel asked first (touched by `start_sentinel`, then only by the
  // topology thread); why the last discovery found none; the watcher
  // thread and the pipe that wakes it to stop.
  std::vector<std::pair<std::string, int>> sentinels_;
  std::atomic<Node*> primary_{nullptr};
  size_t sentinel_first_ = 0;
  Mutex discovery_mu_;
  absl::Status discovery_error_ ABSL_GUARDED_BY(discovery_mu_) =
      absl::UnavailableError("not asked yet");
  // Until when a discovery leaves a primary seen promoted in place.
  absl::Time hold_until_ ABSL_GUARDED_BY(discovery_mu_) = absl::InfinitePast();
  std::thread watcher_;
  int wake_fds_[2] = {-1, -1};
  detail::BackendCounters counters_;
  // The connector (`connector_loop`): connections owed a context, by when
  // to try; started first and stopped once every connection has drained,
  // so it never sees a connection destroyed.
  Mutex connector_mu_;
  std::multimap<absl::Time, Connection*> connector_due_
      ABSL_GUARDED_BY(connector_mu_);
  bool connector_stop_ ABSL_GUARDED_BY(connector_mu_) = false;
  std::condition_variable connector_cv_;
  std::thread connector_;
};

absl::StatusOr<std::unique_ptr<RedisCoordinator>> RedisCoordinator::create(
    const RedisCoordinatorOptions& o) {
  const auto bad = [](absl::string_view field, absl::string_view bound,
                      const auto& got) {
    return absl::InvalidArgumentError(absl::StrCat(
        "redis_coordinator.", field, " must be ", bound, "; got ", got));
  };
  if (o.host.empty()) return bad("host", "non-empty", "\"\"");
  if (o.port < 1 || o.port > 65535) return bad("port", "in [1, 65535]", o.port);
  if (o.database < 0 || o.database > 1'000'000) {
    return bad("database", "in [0, 1000000]", o.database);
  }
  if (o.connections < 1 || o.connections > 64) {
    return bad("connections", "in [1, 64]", o.connections);
  }
  if (o.max_pipeline < 1 || o.max_pipeline > 65536) {
    return bad("max_pipeline", "in [1, 65536]", o.max_pipeline);
  }
  for (const absl::Status& s :
       {detail::check_timeout_option("redis_coordinator", "connect_timeout",
                                     o.connect_timeout),
        detail::check_timeout_option("redis_coordinator", "command_timeout",
                                     o.command_timeout)}) {
    if (!s.ok()) return s;
  }
  if (o.ttl_slack_ms < 0 || o.ttl_slack_ms > kMaxSafeInteger) {
    return bad("ttl_slack_ms", "in [0, 2^53-1]", o.ttl_slack_ms);
  }
  if (!o.username.empty() && o.password.empty()) {
    return absl::InvalidArgumentError(
        "redis_coordinator.username needs a password");
  }
  if (o.cluster_seeds.size() > 64) {
    return bad("cluster_seeds", "at most 64 addresses", o.cluster_seeds.size());
  }
  for (const std::string& seed : o.cluster_seeds) {
    if (absl::StatusOr<std::pair<std::string, int>> a =
            parse_node_address(seed);
        !a.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "redis_coordinator.cluster_seeds: ", a.status().message()));
    }
  }
  if (o.max_redirects < 1 || o.max_redirects > 16) {
    return bad("max_redirects", "in [1, 16]", o.max_redirects);
  }
  if (!o.cluster_seeds.empty() && o.database != 0) {
    return absl::InvalidArgumentError(
        "redis_coordinator.database must be 0 with cluster_seeds (a cluster "
        "has one database)");
  }
  if (!o.cluster_seeds.empty() && !o.sentinels.empty()) {
    return absl::InvalidArgumentError(
        "redis_coordinator.cluster_seeds and sentinels select two "
        "topologies; set one");
  }
  if (o.sentinels.size() > 16) {
    return bad("sentinels", "at most 16 addresses", o.sentinels.size());
  }
  for (const std::string& sentinel : o.sentinels) {
    if (absl::StatusOr<std::pair<std::string, int>> a =
            parse_node_address(sentinel);
        !a.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis_coordinator.sentinels: ", a.status().message()));
    }
  }
  if (!o.sentinels.empty() && o.master_name.empty()) {
    return absl::InvalidArgumentError(
        "redis_coordinator.master_name must name the primary the sentinels "
        "watch");
  }
  if (o.sentinels.empty() && !o.master_name.empty()) {
    return absl::InvalidArgumentError(
        "redis_coordinator.master_name needs sentinels");
  }
  if (!o.sentinel_username.empty() && o.sentinel_password.empty()) {
    return absl::InvalidArgumentError(
        "redis_coordinator.sentinel_username needs a sentinel_password");
  }
  if (o.durable_writes < 0 || o.durable_writes > 16) {
    return bad("durable_writes", "in [0, 16]", o.durable_writes);
  }
  return std::unique_ptr<RedisCoordinator>(
      new RedisCoordinator(std::make_unique<Impl>(o)));
}

RedisCoordinator::RedisCoordinator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RedisCoordinator::~RedisCoordinator() = default;

std::string_view RedisCoordinator::lua_script(std::string_view name) {
  static constexpr std::string_view kNames[kScriptCount] = {
      Gcra::kName,        TokenBucket::kName,
      FixedWindow::kName, SlidingWindow::kName,
      SlidingLog::kName,  Quota::kName,
      TokenBudget::kName, "lease",
      "give_back",        "state",
      "heartbeat",        "fed_lease",
      "fed_reconcile",    "escrow",
      "region_pool",      "fused"};
  for (int i = 0; i < kScriptCount; ++i) {
    if (kNames[i] == name) return script_texts()[i];
  }
  return {};
}

BackendStats RedisCoordinator::stats() const { return impl_->stats(); }

std::vector<RedisNodeStats> RedisCoordinator::node_stats() const {
  return impl_->node_stats();
}

namespace {

// The strategy's options as script arguments (ARGV[5..]).
void append_options(const AnyStrategy& strategy,
                    std::vector<std::string>& argv) {
  std::visit(
      [&](const auto& s) {
        using S = std::decay_t<decltype(s)>;
        const auto& o = s.options();
        if constexpr (std::is_same_v<S, Gcra>) {
          argv.insert(argv.end(), {fmt_int(o.limit), fmt_int(o.period_ms),
                                   fmt_int(o.burst)});
        } else if constexpr (std::is_same_v<S, TokenBucket>) {
          argv.insert(argv.end(),
                      {fmt_int(o.capacity), fmt_double(o.refill_per_sec)});
        } else if constexpr (std::is_same_v<S, FixedWindow> ||
                             std::is_same_v<S, SlidingLog>) {
          argv.insert(argv.end(), {fmt_int(o.limit), fmt_int(o.window_ms)});
        } else if constexpr (std::is_same_v<S, SlidingWindow>) {
          argv.insert(argv.end(), {fmt_int(o.limit), fmt_int(o.window_ms),
                                   fmt_int(o.buckets)});
        } else if constexpr (std::is_same_v<S, Quota>) {
          argv.insert(argv.end(),
                      {fmt_int(o.limit), fmt_int(static_cast<int>(o.period)),
                       fmt_int(o.week_starts_on), fmt_int(o.offset_minutes),
                       fmt_int(o.anchor_ms), fmt_int(o.period_ms)});
        } else {
          static_assert(std::is_same_v<S, TokenBudget>);
          argv.insert(argv.end(), {fmt_int(o.budget), fmt_int(o.window_ms)});
        }
      },
      strategy);
}

// A reply that only acknowledges (DEL's count, PING's PONG).
absl::StatusOr<Acknowledged> to_acknowledged(const Request&) {
  return Acknowledged{};
}

absl::StatusOr<Decision> to_decision(const Request& r) {
  if (r.reply.size() != 5) {
    return absl::InternalError(
        absl::StrCat("redis: a check script replied with ", r.reply.size(),
                     " values; expected 5"));
  }
  return Decision{r.reply[0] != 0, r.reply[1], r.reply[2], r.reply[3],
                  r.reply[4]};
}

}  // namespace

namespace {

// One strategy step's request; the blocking and the asynchronous check send
// the same one and read its reply with `to_decision`.
void fill_check(Request& r, const AnyStrategy& strategy, std::string_view key,
                int64_t now_ms, double cost, int64_t ttl_slack_ms) {
  r.script = static_cast<int>(strategy.index());
  r.argv.reserve(12);
  r.argv.emplace_back(key);
  r.argv.insert(r.argv.end(), {fmt_int(now_ms), fmt_double(cost), "c",
                               fmt_int(ttl_slack_ms)});
  append_options(strategy, r.argv);
}

}  // namespace

void RedisCoordinator::do_check(const AnyStrategy& strategy,
                                std::string_view key, int64_t now_ms,
                                double cost, VerbCompletion<Decision> done) {
  impl_->dispatch(&to_decision, std::move(done), [&](Request& r) {
    fill_check(r, strategy, key, now_ms, cost, impl_->options().ttl_slack_ms);
  });
}

namespace {

// kInvalidArgument naming the problem with a fused call's arguments.
absl::Status validate_fused(std::string_view rate_key,
                            std::string_view cost_key, int64_t now_ms,
                            double units) {
  if (absl::Status s = validate_key(rate_key); !s.ok()) return s;
  if (absl::Status s = validate_key(cost_key); !s.ok()) return s;
  if (absl::Status s = validate_cost(units); !s.ok()) return s;
  if (now_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis: fused_check: now_ms must be >= 0; got ", now_ms));
  }
  return absl::OkStatus();
}

// ARGV of the fused script; entries 6, 8 and 9 (the GCRA limit and burst,
// the bucket's capacity) are what `to_fused` reads back.
void fill_fused(Request& r, const Gcra& rate, const TokenBucket& cost,
                std::string_view rate_key, std::string_view cost_key,
                int64_t now_ms, double units, int64_t ttl_slack_ms) {
  r.script = kFusedScript;
  r.keys = 2;
  const Gcra::Options& g = rate.options();
  const TokenBucket::Options& b = cost.options();
  r.argv = {std::string(rate_key),
            std::string(cost_key),
            fmt_int(now_ms),
            fmt_double(units),
            "c",
            fmt_int(ttl_slack_ms),
            fmt_int(g.limit),
            fmt_int(g.period_ms),
            fmt_int(g.burst),
            fmt_int(b.capacity),
            fmt_double(b.refill_per_sec)};
}

// The fused script's 13 integers as both axes' decisions; each axis's limit
// is the one its ARGV carried.
absl::StatusOr<RedisCoordinator::FusedDecision> to_fused(const Request& r) {
  const std::vector<int64_t>& v = r.reply;
  if (v.size() != 13) {
    return absl::InternalError(
        absl::StrCat("redis: the fused script replied with ", v.size(),
                     " values; expected 13"));
  }
  int64_t limit = 0, burst = 0, capacity = 0;
  if (r.argv.size() != 11 || !absl::SimpleAtoi(r.argv[6], &limit) ||
      !absl::SimpleAtoi(r.argv[8], &burst) ||
      !absl::SimpleAtoi(r.argv[9], &capacity)) {
    return absl::InternalError("redis: a fused request lost its options");
  }
  RedisCoordinator::FusedDecision f;
  f.combined = Decision{v[0] != 0, v[1], v[2], v[3], v[4]};
  f.rate = Decision{v[5] != 0, burst == 0 ? limit : burst, v[6], v[7], v[8]};
  if (v[9] >= 0) f.cost = Decision{v[9] != 0, capacity, v[10], v[11], v[12]};
  return f;
}

}  // namespace

absl::StatusOr<RedisCoordinator::FusedDecision> RedisCoordinator::fused_check(
    const Gcra& rate, const TokenBucket& cost, std::string_view rate_key,
    std::string_view cost_key, int64_t now_ms, double units) {
  if (absl::Status s = validate_fused(rate_key, cost_key, now_ms, units);
      !s.ok()) {
    return s;
  }
  return impl_->run(&to_fused, [&](Request& r) {
    fill_fused(r, rate, cost, rate_key, cost_key, now_ms, units,
               impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::fused_check_async(const Gcra& rate,
                                         const TokenBucket& cost,
                                         std::string_view rate_key,
                                         std::string_view cost_key,
                                         int64_t now_ms, double units,
                                         Completion<FusedDecision> on_done) {
  if (absl::Status s = validate_fused(rate_key, cost_key, now_ms, units);
      !s.ok()) {
    std::move(on_done)(std::move(s));
    return;
  }
  impl_->run_async(&to_fused, std::move(on_done), [&](Request& r) {
    fill_fused(r, rate, cost, rate_key, cost_key, now_ms, units,
               impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::do_peek(const AnyStrategy& strategy,
                               std::string_view key, int64_t now_ms,
                               VerbCompletion<Decision> done) {
  impl_->dispatch(&to_decision, std::move(done), [&](Request& r) {
    r.script = static_cast<int>(strategy.index());
    r.argv.reserve(12);
    r.argv.emplace_back(key);
    r.argv.insert(r.argv.end(), {fmt_int(now_ms), "1", "p",
                                 fmt_int(impl_->options().ttl_slack_ms)});
    append_options(strategy, r.argv);
  });
}

namespace {

double parse_double(const std::string& s) {
  return std::strtod(s.c_str(), nullptr);
}

int64_t parse_int(const std::string& s) {
  return std::strtoll(s.c_str(), nullptr, 10);
}

// A hash reply's value of `field`, or null.
const std::string* field_of(const std::vector<std::string>& pairs,
                            std::string_view field) {
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    if (pairs[i] == field) return &pairs[i + 1];
  }
  return nullptr;
}

// The strategy's state from the raw reply of state.lua (`raw` excludes
// `now`), in the key layout of docs/redis.md.
template <class S>
typename S::State state_from(const S& s, const std::vector<std::string>& raw) {
  using State = typename S::State;
  State st{};
  if (raw.empty()) return st;
  if constexpr (std::is_same_v<S, Gcra>) {
    st.tat = parse_double(raw[0]);
  } else if constexpr (std::is_same_v<S, TokenBucket>) {
    const std::string* t = field_of(raw, "t");
    const std::string* l = field_of(raw, "l");
    if (t != nullptr && l != nullptr) {
      st = State{parse_double(*t), parse_double(*l)};
    }
  } else if constexpr (std::is_same_v<S, FixedWindow>) {
    const std::string* start = field_of(raw, "s");
    const std::string* count = field_of(raw, "c");
    if (start != nullptr && count != nullptr) {
      st = State{parse_double(*start), parse_double(*count)};
    }
  } else if constexpr (std::is_same_v<S, Quota>) {
    const std::string* start = field_of(raw, "s");
    const std::string* count = field_of(raw, "c");
    if (start != nullptr && count != nullptr) {
      st = State{parse_int(*start), parse_double(*count)};
    }
  } else if constexpr (std::is_same_v<S, TokenBudget>) {
    const std::string* served = field_of(raw, "s");
    const std::string* start = field_of(raw, "w");
    if (served != nullptr && start != nullptr) {
      st = State{parse_int(*served), parse_int(*start)};
    }
  } else if constexpr (std::is_same_v<S, SlidingWindow>) {
    // field -> "<tick>:<count>"
    std::vector<SlidingWindow::Slot> slots;
    for (size_t i = 0; i + 1 < raw.size(); i += 2) {
      const std::string& v = raw[i + 1];
      const size_t colon = v.find(':');
      if (colon == std::string::npos) continue;
      slots.push_back(SlidingWindow::Slot{parse_int(v.substr(0, colon)),
                                          parse_double(v.substr(colon + 1))});
    }
    st = s.state_from_slots(slots);
  } else {
    static_assert(std::is_same_v<S, SlidingLog>);
    // member/score pairs, ascending by score: one member per unit.
    std::vector<SlidingLog::Run> runs;
    for (size_t i = 0; i + 1 < raw.size(); i += 2) {
      const int64_t at = static_cast<int64_t>(parse_double(raw[i + 1]));
      if (!runs.empty() && runs.back().at_ms == at) {
        ++runs.back().count;
      } else {
        runs.push_back(SlidingLog::Run{at, 1});
      }
    }
    st = SlidingLog::State::from_runs(runs);
  }
  return st;
}

// The Redis type a strategy's key has: 's' string, 'h' hash, 'z' zset.
const char* layout_of(const AnyStrategy& strategy) {
  if (std::holds_alternative<Gcra>(strategy)) return "s";
  if (std::holds_alternative<SlidingLog>(strategy)) return "z";
  return "h";
}

}  // namespace

namespace {

absl::StatusOr<Forecast> forecast_now(RedisCoordinator::Impl& impl,
                                      const AnyStrategy& strategy,
                                      std::string_view key, int64_t now_ms,
                                      double cost) {
  auto r = std::make_shared<Request>();
  r->script = kStateScript;
  r->argv = {std::string(key), fmt_int(now_ms), layout_of(strategy)};
  if (absl::Status s = impl.call(r); !s.ok()) return s;
  if (r->reply.empty()) {
    return absl::InternalError("redis: the state script replied badly");
  }
  const int64_t now = r->reply[0];
  return std::visit(
      [&](const auto& s) -> Forecast {
        return s.forecast(state_from(s, r->text), now, cost);
      },
      strategy);
}

}  // namespace

// Only ever waited for (no asynchronous forecast): runs on the calling
// thread, and reads the key's state back into the C++ strategy.
void RedisCoordinator::do_forecast(const AnyStrategy& strategy,
                                   std::string_view key, int64_t now_ms,
                                   double cost, VerbCompletion<Forecast> done) {
  std::move(done)(forecast_now(*impl_, strategy, key, now_ms, cost));
}

void RedisCoordinator::do_reset(const AnyStrategy&, std::string_view key,
                                VerbCompletion<Acknowledged> done) {
  impl_->dispatch(&to_acknowledged, std::move(done), [&](Request& r) {
    r.argv = {"DEL", std::string(key)};
  });
}

namespace {

void fill_lease(Request& r, const LeaseBudget& budget, std::string_view key,
                int64_t want, int64_t ttl_slack_ms) {
  r.script = kLeaseScript;
  r.argv = {std::string(key), fmt_int(want), fmt_int(budget.limit()),
            fmt_int(budget.window_ms()), fmt_int(ttl_slack_ms)};
}

absl::StatusOr<LeaseGrant> to_grant(const Request& r) {
  if (r.reply.size() != 5) {
    return absl::InternalError(
        absl::StrCat("redis: a lease script replied with ", r.reply.size(),
                     " values; expected 5"));
  }
  return LeaseGrant{r.reply[0], r.reply[1], r.reply[2], r.reply[3], r.reply[4]};
}

void fill_give_back(Request& r, const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t credits,
                    std::string_view token) {
  r.script = kGiveBackScript;
  r.argv = {std::string(key), fmt_int(window_start_ms), fmt_int(credits),
            std::string(token), fmt_int(budget.window_ms())};
}

absl::StatusOr<int64_t> to_count(const Request& r) {
  if (r.reply.size() != 1) {
    return absl::InternalError(absl::StrCat("redis: a script replied with ",
                                            r.reply.size(),
                                            " values; expected 1"));
  }
  return r.reply[0];
}

}  // namespace

void RedisCoordinator::do_lease(const LeaseBudget& budget, std::string_view key,
                                int64_t want, VerbCompletion<LeaseGrant> done) {
  impl_->dispatch(&to_grant, std::move(done), [&](Request& r) {
    fill_lease(r, budget, key, want, impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::do_give_back(const LeaseBudget& budget,
                                    std::string_view key,
                                    int64_t window_start_ms, int64_t credits,
                                    std::string_view token,
                                    VerbCompletion<int64_t> done) {
  impl_->dispatch(&to_count, std::move(done), [&](Request& r) {
    fill_give_back(r, budget, key, window_start_ms, credits, token);
  });
}

namespace {

void fill_lease_windowed(Request& r, const LeaseBudget& budget,
                         std::string_view key, int64_t want, int64_t now_ms,
                         int64_t ttl_slack_ms) {
  r.script = kFedLeaseScript;
  r.argv = {std::string(key),
            fmt_int(now_ms),
            fmt_int(want),
            fmt_int(budget.limit()),
            fmt_int(budget.window_ms()),
            fmt_int(ttl_slack_ms)};
}

void fill_reconcile(Request& r, const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t leftover,
                    std::string_view token, int64_t now_ms) {
  r.script = kFedReconcileScript;
  r.argv = {std::string(key),           fmt_int(now_ms),
            fmt_int(window_start_ms),   fmt_int(leftover),
            std::string(token),         fmt_int(budget.limit()),
            fmt_int(budget.window_ms())};
}

// One escrow.lua call: op and its three arguments.
void fill_escrow(Request& r, std::string_view key, int64_t now_ms,
                 const char* op, int64_t a, int64_t b, int64_t c,
                 int64_t slack) {
  r.script = kEscrowScript;
  r.argv = {std::string(key), fmt_int(now_ms), op, fmt_int(a), fmt_int(b),
            fmt_int(c),       fmt_int(slack)};
}

}  // namespace

void RedisCoordinator::do_lease_windowed(const LeaseBudget& budget,
                                         std::string_view key, int64_t want,
                                         int64_t now_ms,
                                         VerbCompletion<LeaseGrant> done) {
  impl_->dispatch(&to_grant, std::move(done), [&](Request& r) {
    fill_lease_windowed(r, budget, key, want, now_ms,
                        impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::do_reconcile(const LeaseBudget& budget,
                                    std::string_view key,
                                    int64_t window_start_ms, int64_t leftover,
                                    std::string_view token, int64_t now_ms,
                                    VerbCompletion<int64_t> done) {
  impl_->dispatch(&to_count, std::move(done), [&](Request& r) {
    fill_reconcile(r, budget, key, window_start_ms, leftover, token, now_ms);
  });
}

void RedisCoordinator::do_escrow_take(std::string_view key, int64_t want,
                                      int64_t now_ms,
                                      VerbCompletion<LeaseGrant> done) {
  impl_->dispatch(&to_grant, std::move(done), [&](Request& r) {
    fill_escrow(r, key, now_ms, "t", want, 0, 0, impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::do_escrow_refill(std::string_view key, int64_t granted,
                                        int64_t window_start_ms,
                                        int64_t expires_at_ms, int64_t now_ms,
                                        VerbCompletion<int64_t> done) {
  impl_->dispatch(&to_count, std::move(done), [&](Request& r) {
    fill_escrow(r, key, now_ms, "r", granted, window_start_ms, expires_at_ms,
                impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::do_escrow_release(std::string_view key,
                                         int64_t window_start_ms,
                                         int64_t now_ms,
                                         VerbCompletion<int64_t> done) {
  impl_->dispatch(&to_count, std::move(done), [&](Request& r) {
    fill_escrow(r, key, now_ms, "x", window_start_ms, 0, 0,
                impl_->options().ttl_slack_ms);
  });
}

absl::Status RedisCoordinator::do_wait_ready(absl::Time deadline) {
  for (;;) {
    const Impl::Readiness r = impl_->readiness();
    if (r.ready) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      if (!r.error.ok()) return r.error;
      return absl::DeadlineExceededError(absl::StrCat(
          "redis: not ready by the deadline: waiting for ", r.waiting_for));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

void RedisCoordinator::do_ping(VerbCompletion<Acknowledged> done) {
  impl_->dispatch(&to_acknowledged, std::move(done),
                  [](Request& r) { r.argv = {"PING"}; });
}

namespace {

// TIME's reply (seconds, microseconds) as epoch ms.
absl::StatusOr<int64_t> to_now_ms(const Request& r) {
  if (r.reply.size() != 2) {
    return absl::InternalError("redis: TIME replied badly");
  }
  return r.reply[0] * 1000 + r.reply[1] / 1000;
}

}  // namespace

void RedisCoordinator::do_now_ms(VerbCompletion<int64_t> done) {
  impl_->dispatch(&to_now_ms, std::move(done),
                  [](Request& r) { r.argv = {"TIME"}; });
}

namespace {

void fill_heartbeat(Request& r, std::string_view key,
                    const HeartbeatReport& report,
                    const HeartbeatOptions& options, int64_t now_ms,
                    int64_t ttl_slack_ms) {
  r.script = kHeartbeatScript;
  r.argv = {std::string(key),
            fmt_int(now_ms),
            std::string(report.node_id),
            fmt_int(report.seq),
            fmt_int(report.applied_gen),
            fmt_int(report.inflight),
            fmt_int(report.local_limit),
            fmt_int(report.demand),
            fmt_int(options.lease_ttl_ms),
            options.aggregate == HeartbeatAggregate::kMin ? "m" : "l",
            options.handoff ? "1" : "0",
            options.demand_proportional ? "1" : "0",
            fmt_int(ttl_slack_ms)};
}

absl::StatusOr<HeartbeatGrant> to_heartbeat_grant(const Request& r) {
  const std::vector<int64_t>& v = r.reply;
  if (v.size() != 7) {
    return absl::InternalError(
        absl::StrCat("redis: the heartbeat script replied with ", v.size(),
                     " values; expected 7"));
  }
  return HeartbeatGrant{.share = v[0],
                        .generation = v[1],
                        .global_limit = v[2],
                        .live_nodes = v[3],
                        .lease_expires_at_ms = v[4],
                        .stale = v[5] != 0};
}

}  // namespace

void RedisCoordinator::do_heartbeat(std::string_view key,
                                    const HeartbeatReport& report,
                                    const HeartbeatOptions& options,
                                    int64_t now_ms,
                                    VerbCompletion<HeartbeatGrant> done) {
  impl_->dispatch(&to_heartbeat_grant, std::move(done), [&](Request& r) {
    fill_heartbeat(r, key, report, options, now_ms,
                   impl_->options().ttl_slack_ms);
  });
}

namespace {

// `key`'s node table, read on the calling thread.
absl::StatusOr<std::vector<HeartbeatNode>> heartbeat_nodes_now(
    RedisCoordinator::Impl& impl, std::string_view key) {
  auto r = std::make_shared<Request>();
  r->script = kStateScript;
  r->argv = {std::string(key), "0", "h"};
  if (absl::Status s = impl.call(r); !s.ok()) return s;
  // r->text: the field/value pairs (heartbeat.lua's layout); `now`, an
  // integer, is only in r->reply.
  std::vector<HeartbeatNode> nodes;
  for (size_t i = 0; i + 1 < r->text.size(); i += 2) {
    const std::string& field = r->text[i];
    if (field.compare(0, 2, "n:") != 0) {
      return absl::FailedPreconditionError(
          "redis: the key holds another layout; asked for heartbeat_nodes");
    }
    HeartbeatNode n{.id = field.substr(2)};
    int64_t* const slots[] = {&n.local_limit, &n.inflight,    &n.expires_at_ms,
                              &n.share,       &n.seq,         &n.demand,
                              &n.generation,  &n.acked_share, &n.max_unacked};
    const char* p = r->text[i + 1].c_str();
    for (int64_t* slot : slots) {
      char* end = nullptr;
      *slot = std::strtoll(p, &end, 10);
      if (end == p) {
        return absl::InternalError(absl::StrCat(
            "redis: a heartbeat row is malformed: ", r->text[i + 1]));
      }
      p = end;
    }
    nodes.push_back(std::move(n));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const HeartbeatNode& a, const HeartbeatNode& b) {
              return a.id < b.id;
            });
  return nodes;
}

}  // namespace

// Only ever waited for (no asynchronous form): runs on the calling thread.
void RedisCoordinator::do_heartbeat_nodes(
    std::string_view key, VerbCompletion<std::vector<HeartbeatNode>> done) {
  std::move(done)(heartbeat_nodes_now(*impl_, key));
}

absl::StatusOr<std::vector<int64_t>> RedisCoordinator::region_pool_step(
    std::vector<std::string> argv) {
  auto r = std::make_shared<Request>();
  r->script = kRegionPoolScript;
  r->argv = std::move(argv);
  if (absl::Status s = impl_->call(r); !s.ok()) return s;
  return std::move(r->reply);
}

namespace {
absl::StatusOr<std::vector<int64_t>> to_ints(const Request& r) {
  return r.reply;
}
}  // namespace

void RedisCoordinator::region_pool_step_async(
    std::vector<std::string> argv, Completion<std::vector<int64_t>> on_done) {
  impl_->run_async(&to_ints, std::move(on_done), [&](Request& r) {
    r.script = kRegionPoolScript;
    r.argv = std::move(argv);
  });
}

absl::StatusOr<std::vector<std::string>> RedisCoordinator::hash_fields(
    std::string_view key) {
  auto r = std::make_shared<Request>();
  r->script = kStateScript;
  r->argv = {std::string(key), "0", "h"};
  if (absl::Status s = impl_->call(r); !s.ok()) return s;
  // r->text: the pairs (`now`, an integer, is only in r->reply).
  return std::move(r->text);
}

}  // namespace throttlekit
