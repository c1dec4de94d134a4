// RedisRegionPool: one hiredis connection under a mutex, each step one
// EVALSHA of the library's prelude plus the pool's script (see the header
// and throttlekit/federation/region_pool.h).

#include "throttlekit/federation/redis_region_pool.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit_redis_scripts.h"

namespace throttlekit {
namespace {

// The pool's step (region_pool.h), after the prelude (tk_now, tk_floor_div,
// tk_int, tk_pexpire, tk_key = KEYS[1]). ARGV follows the prelude's order
// where it can: [1] now (0 = the Redis clock), [2] want, [3] region, [4]
// ttl slack, then [5] limit, [6] window ms, [7] weight, [8] the most
// regions a window holds.
constexpr std::string_view kPoolLua = R"lua(
-- Region pool (federation/region_pool.h): hash `ws` (window start),
-- `w:<region>` (weight), `g:<region>` (grant); TTL to the window end plus
-- the slack. Reply {granted, previous, fair share, total weight, ws}.
local now = tk_now(ARGV[1])
local want, region = tonumber(ARGV[2]), ARGV[3]
local limit, window = tonumber(ARGV[5]), tonumber(ARGV[6])
local weight, most = tonumber(ARGV[7]), tonumber(ARGV[8])

-- floor(x * y / d), exactly, for integers 0 <= x <= d <= 2^42 and
-- 0 <= y < 2^53: y = a d + b, then floor(x b / d) by binary long division,
-- keeping q d + r = (bits of x so far) * b with r < d (all below 2^44).
local function mul_div(x, y, d)
  local a = tk_floor_div(y, d)
  local b = y - a * d
  local q, r, rest, bit = 0, 0, x, 2 ^ 42
  while bit >= 1 do
    q, r = q * 2, r * 2
    if r >= d then q, r = q + 1, r - d end
    if rest >= bit then
      rest = rest - bit
      r = r + b
      if r >= d then q, r = q + 1, r - d end
    end
    bit = bit / 2
  end
  return x * a + q
end

local flat = redis.call('HGETALL', tk_key)
local ws, weights, grants, n = nil, {}, {}, 0
for i = 1, #flat, 2 do
  local f, v = flat[i], flat[i + 1]
  local kind = string.sub(f, 1, 2)
  if f == 'ws' then
    ws = tonumber(v)
  elseif kind == 'w:' then
    weights[string.sub(f, 3)] = tonumber(v)
    n = n + 1
  elseif kind == 'g:' then
    grants[string.sub(f, 3)] = tonumber(v)
  else
    ws = nil
    break
  end
end
if #flat > 0 and not ws then
  return redis.error_reply(
    'WRONGTYPE the key holds another layout; asked for a region pool')
end
local rolls = (not ws) or now >= ws + window
if not rolls and not weights[region] and n >= most then
  return redis.error_reply('TKFULL the window already holds ' ..
    tk_int(most) .. ' regions; a new region is refused')
end
if rolls then
  if #flat > 0 then redis.call('DEL', tk_key) end
  ws = tk_floor_div(now, window) * window
  weights, grants = {}, {}
end
weights[region] = weight
local previous = grants[region] or 0
local total = 0
for _, w in pairs(weights) do total = total + w end
local granted = previous
if want > previous then
  -- ceiling = max(g_r, L - sum_{j != r} max(g_j, fair_j)), term by term.
  local ceiling = limit
  for name, w in pairs(weights) do
    if name ~= region then
      ceiling = ceiling - math.max(grants[name] or 0, mul_div(w, limit, total))
    end
  end
  ceiling = math.max(previous, ceiling)
  granted = math.max(previous, math.max(0, math.min(want, ceiling)))
end
redis.call('HSET', tk_key, 'ws', tk_int(ws), 'w:' .. region, tk_int(weight),
           'g:' .. region, tk_int(granted))
tk_pexpire(tk_key, ws + window - now, tk_slack)
return {granted, previous, mul_div(weight, limit, total), total, ws}
)lua";

const std::string& script_text() {
  static const auto* text = new std::string(
      absl::StrCat(absl::string_view(redis_scripts::kPreludeLua.data(),
                                     redis_scripts::kPreludeLua.size()),
                   absl::string_view(kPoolLua.data(), kPoolLua.size())));
  return *text;
}

struct ContextFree {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;
using Reply = std::unique_ptr<redisReply, ReplyFree>;

}  // namespace

class RedisRegionPool::Impl {
 public:
  explicit Impl(RedisRegionPoolOptions options)
      : options_(std::move(options)) {}

  const RedisRegionPoolOptions& options() const { return options_; }

  // One call of `argv`, connecting first if needed; the reply, or the
  // error (the connection is dropped on an I/O error).
  absl::StatusOr<Reply> call(const std::vector<std::string>& argv,
                             bool script) {
    MutexLock lock(mu_);
    if (ctx_ == nullptr) {
      if (absl::Status s = connect(); !s.ok()) return s;
    }
    if (!script) return command(argv);
    std::vector<std::string> eval = {"EVALSHA", sha_, "1"};
    eval.insert(eval.end(), argv.begin(), argv.end());
    absl::StatusOr<Reply> r = command(eval);
    if (r.ok() && (*r)->type == REDIS_REPLY_ERROR &&
        std::strncmp((*r)->str, "NOSCRIPT", 8) == 0) {
      eval[0] = "EVAL";
      eval[1] = script_text();
      r = command(eval);
    }
    return r;
  }

 private:
  // Sends one command and reads its reply. Caller holds `mu_`.
  absl::StatusOr<Reply> command(const std::vector<std::string>& cmd)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    argv.reserve(cmd.size());
    lens.reserve(cmd.size());
    for (const std::string& s : cmd) {
      argv.push_back(s.data());
      lens.push_back(s.size());
    }
    Reply reply(static_cast<redisReply*>(redisCommandArgv(
        ctx_.get(), static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (reply == nullptr) {
      absl::Status s = io_error();
      ctx_.reset();
      return s;
    }
    return reply;
  }

  // Connects, authenticates, selects the database and loads the script.
  absl::Status connect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const RedisRegionPoolOptions& o = options_;
    ctx_.reset(redisConnectWithTimeout(o.host.c_str(), o.port,
                                       absl::ToTimeval(o.connect_timeout)));
    if (ctx_ == nullptr || ctx_->err != 0) {
      const std::string why =
          ctx_ == nullptr ? "out of memory" : std::string(ctx_->errstr);
      ctx_.reset();
      return absl::UnavailableError(
          absl::StrCat("redis_region_pool: cannot connect to ", o.host, ":",
                       o.port, ": ", why));
    }
    redisSetTimeout(ctx_.get(), absl::ToTimeval(o.connect_timeout));
    std::vector<std::vector<std::string>> setup;
    if (!o.password.empty()) {
      std::vector<std::string> auth = {"AUTH"};
      if (!o.username.empty()) auth.push_back(o.username);
      auth.push_back(o.password);
      setup.push_back(std::move(auth));
    }
    if (o.database != 0) {
      setup.push_back({"SELECT", std::to_string(o.database)});
    }
    setup.push_back({"SCRIPT", "LOAD", script_text()});
    for (const auto& cmd : setup) {
      absl::StatusOr<Reply> r = command(cmd);
      if (!r.ok()) return r.status();
      if ((*r)->type == REDIS_REPLY_ERROR) {
        const absl::Status s = absl::UnavailableError(
            absl::StrCat("redis_region_pool: ", cmd[0],
                         " failed: ", absl::string_view((*r)->str, (*r)->len)));
        ctx_.reset();
        return s;
      }
      if (cmd[0] == "SCRIPT" && (*r)->type == REDIS_REPLY_STRING) {
        sha_.assign((*r)->str, (*r)->len);
      }
    }
    redisSetTimeout(ctx_.get(), absl::ToTimeval(o.command_timeout));
    return absl::OkStatus();
  }

  // The error of a failed read or write: a timeout is kDeadlineExceeded.
  absl::Status io_error() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int err = errno;
    const RedisRegionPoolOptions& o = options_;
    if (ctx_ != nullptr && ctx_->err == REDIS_ERR_IO &&
        (err == EAGAIN || err == EWOULDBLOCK ||
         std::strstr(ctx_->errstr, "temporarily unavailable") != nullptr ||
         std::strstr(ctx_->errstr, "timed out") != nullptr)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "redis_region_pool: ", o.host, ":", o.port,
          " did not answer in time (connect_timeout ",
          absl::FormatDuration(o.connect_timeout), ", command_timeout ",
          absl::FormatDuration(o.command_timeout), ")"));
    }
    return absl::UnavailableError(
        absl::StrCat("redis_region_pool: connection to ", o.host, ":", o.port,
                     " failed: ", ctx_ != nullptr ? ctx_->errstr : "?"));
  }

  const RedisRegionPoolOptions options_;
  Mutex mu_;
  // The connection (null: none); only touched under `mu_`.
  Context ctx_ ABSL_GUARDED_BY(mu_);
  std::string sha_ ABSL_GUARDED_BY(mu_);
};

namespace {

// A server error reply as a status: another layout is kFailedPrecondition,
// a full window kResourceExhausted, anything else kUnavailable.
absl::Status reply_error(const redisReply& r) {
  const absl::string_view msg(r.str, r.len);
  if (msg.find("WRONGTYPE") != absl::string_view::npos) {
    return absl::FailedPreconditionError(
        absl::StrCat("redis_region_pool: the key holds another layout: ", msg));
  }
  if (msg.find("TKFULL") != absl::string_view::npos) {
    return absl::ResourceExhaustedError(
        absl::StrCat("redis_region_pool: ", msg.substr(7)));
  }
  return absl::UnavailableError(absl::StrCat("redis_region_pool: ", msg));
}

// A reply element as an integer (scripts reply integers; HGETALL strings).
bool as_int(const redisReply* r, int64_t& out) {
  if (r->type == REDIS_REPLY_INTEGER) {
    out = r->integer;
    return true;
  }
  if (r->type == REDIS_REPLY_STRING) {
    char* end = nullptr;
    const std::string s(r->str, r->len);
    out = std::strtoll(s.c_str(), &end, 10);
    return end != nullptr && *end == '\0' && !s.empty();
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisRegionPool>> RedisRegionPool::create(
    const RedisRegionPoolOptions& o) {
  const auto bad = [](absl::string_view field, absl::string_view bound,
                      const auto& got) {
    return absl::InvalidArgumentError(absl::StrCat(
        "redis_region_pool.", field, " must be ", bound, "; got ", got));
  };
  if (o.host.empty()) return bad("host", "non-empty", "\"\"");
  if (o.port < 1 || o.port > 65535) return bad("port", "in [1, 65535]", o.port);
  if (o.database < 0 || o.database > 1'000'000) {
    return bad("database", "in [0, 1000000]", o.database);
  }
  for (const absl::Status& s :
       {detail::check_timeout_option("redis_region_pool", "connect_timeout",
                                     o.connect_timeout),
        detail::check_timeout_option("redis_region_pool", "command_timeout",
                                     o.command_timeout)}) {
    if (!s.ok()) return s;
  }
  if (o.prefix.empty() || o.prefix.size() > 256) {
    return bad("prefix", "1 .. 256 bytes", o.prefix.size());
  }
  if (o.ttl_slack_ms < 0 || o.ttl_slack_ms > kMaxSafeInteger) {
    return bad("ttl_slack_ms", "in [0, 2^53-1]", o.ttl_slack_ms);
  }
  if (!o.username.empty() && o.password.empty()) {
    return absl::InvalidArgumentError(
        "redis_region_pool.username needs a password");
  }
  return std::unique_ptr<RedisRegionPool>(
      new RedisRegionPool(std::make_unique<Impl>(o)));
}

RedisRegionPool::RedisRegionPool(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RedisRegionPool::~RedisRegionPool() = default;

std::string_view RedisRegionPool::lua_script() { return script_text(); }

const RedisRegionPoolOptions& RedisRegionPool::options() const noexcept {
  return impl_->options();
}

absl::StatusOr<RegionPoolGrant> RedisRegionPool::do_grant(
    const LeaseBudget& budget, std::string_view key, std::string_view region,
    int64_t weight, int64_t want, int64_t now_ms) {
  const RedisRegionPoolOptions& o = impl_->options();
  absl::StatusOr<Reply> r = impl_->call(
      {join_key(o.prefix, key), std::to_string(now_ms), std::to_string(want),
       std::string(region), std::to_string(o.ttl_slack_ms),
       std::to_string(budget.limit()), std::to_string(budget.window_ms()),
       std::to_string(weight), std::to_string(kMaxPoolRegions)},
      /*script=*/true);
  if (!r.ok()) return r.status();
  const redisReply& reply = **r;
  if (reply.type == REDIS_REPLY_ERROR) return reply_error(reply);
  int64_t v[5];
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 5 ||
      !as_int(reply.element[0], v[0]) || !as_int(reply.element[1], v[1]) ||
      !as_int(reply.element[2], v[2]) || !as_int(reply.element[3], v[3]) ||
      !as_int(reply.element[4], v[4])) {
    return absl::UnavailableError(
        "redis_region_pool: unexpected reply to the pool script");
  }
  return RegionPoolGrant{v[0], v[1], v[2], v[3], v[4]};
}

absl::StatusOr<RegionPoolState> RedisRegionPool::do_state(
    std::string_view key) {
  absl::StatusOr<Reply> r = impl_->call(
      {"HGETALL", join_key(impl_->options().prefix, key)}, /*script=*/false);
  if (!r.ok()) return r.status();
  const redisReply& reply = **r;
  if (reply.type == REDIS_REPLY_ERROR) return reply_error(reply);
  RegionPoolState state;
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements % 2 != 0) {
    return absl::UnavailableError(
        "redis_region_pool: unexpected reply to HGETALL");
  }
  bool has_window = false;
  for (size_t i = 0; i < reply.elements; i += 2) {
    const redisReply* f = reply.element[i];
    int64_t value = 0;
    if (f->type != REDIS_REPLY_STRING || !as_int(reply.element[i + 1], value)) {
      return absl::FailedPreconditionError(
          "redis_region_pool: the key holds another layout");
    }
    const std::string_view field(f->str, f->len);
    if (field == "ws") {
      state.window_start_ms = value;
      has_window = true;
    } else if (field.substr(0, 2) == "w:") {
      state.regions[std::string(field.substr(2))].weight = value;
    } else if (field.substr(0, 2) == "g:") {
      state.regions[std::string(field.substr(2))].granted = value;
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "redis_region_pool: the key holds another layout (field \"",
          absl::string_view(field.data(), field.size()), "\")"));
    }
  }
  if (reply.elements > 0 && !has_window) {
    return absl::FailedPreconditionError(
        "redis_region_pool: the key holds another layout (no \"ws\")");
  }
  return state;
}

}  // namespace throttlekit
