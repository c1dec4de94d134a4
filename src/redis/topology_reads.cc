// The topology reads: see topology_reads.h.

#include "topology_reads.h"

#include <hiredis/hiredis.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/redis/key_slot.h"

namespace throttlekit::redis_internal {

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

}  // namespace throttlekit::redis_internal
