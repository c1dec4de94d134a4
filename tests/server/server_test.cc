// throttlekit-server's gRPC door in process (src/server/server.h): a real
// gRPC server on loopback and a real client. Decisions equal the library's
// for the same configuration and traffic on one manual clock; bad requests
// get the right status and change nothing; the Admit slot lifecycle
// (Release, Heartbeat, reclaim at expiry).

#include "server.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "config.h"
#include "gtest/gtest.h"
#include "policies.h"
#include "support/grpc_health.h"
#include "support/manual_clock_server.h"
#include "support/test_certs.h"
#include "support/test_time.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/twotier/weighted_fair_escrow.h"
#include "throttlekit/v1/throttlekit.grpc.pb.h"

namespace throttlekit::server {
namespace server_test {
namespace {

namespace v1 = ::throttlekit::v1;
using testing::kEpoch;
using testing::Pem;
using testing::self_signed;

// A server over the embedded store on a manual clock, and a client.
// `options` other than the address, the clock and the reaper are kept.
class Door {
 public:
  explicit Door(const std::string& yaml, ServerOptions options = {})
      : clock_(kEpoch),
        server_(testing::start_manual_clock_server(
            parse_config(yaml, "test.yaml"), nullptr, clock_,
            std::move(options))),
        stub_(v1::RateLimiter::NewStub(
            testing::loopback_channel(server_->port()))) {}

  ManualClock& clock() { return clock_; }
  Server& server() { return *server_; }
  v1::RateLimiter::Stub& stub() { return *stub_; }

  grpc::Status check(const std::string& policy, const std::string& key,
                     int64_t cost, Decision& out) {
    return decide(&v1::RateLimiter::Stub::Check, policy, key, out,
                  &v1::CheckRequest::set_cost, cost);
  }

  grpc::Status peek(const std::string& policy, const std::string& key,
                    Decision& out) {
    return decide(&v1::RateLimiter::Stub::Peek, policy, key, out);
  }

  grpc::Status debit(const std::string& policy, const std::string& key,
                     int64_t tokens, Decision& out) {
    return decide(&v1::RateLimiter::Stub::Debit, policy, key, out,
                  &v1::DebitRequest::set_tokens, tokens);
  }

  grpc::Status admit(const std::string& policy, const std::string& key,
                     v1::AdmitResponse& resp) {
    v1::AdmitRequest req;
    req.set_policy(policy);
    req.set_key(key);
    grpc::ClientContext ctx;
    return stub_->Admit(&ctx, req, &resp);
  }

  grpc::Status release(const std::string& id, bool dropped) {
    v1::ReleaseRequest req;
    req.set_lease_id(id);
    req.set_dropped(dropped);
    v1::ReleaseResponse resp;
    grpc::ClientContext ctx;
    return stub_->Release(&ctx, req, &resp);
  }

  static Decision from_wire(const v1::Decision& d) {
    return Decision{.allowed = d.allowed(),
                    .limit = d.limit(),
                    .remaining = d.remaining(),
                    .reset_at_ms = d.reset_at(),
                    .retry_after_ms = d.retry_after_ms()};
  }

 private:
  // `method`'s answer to a request of `policy` and `key` (and `amount`,
  // set by `set_amount`, if given): its status, and its decision in `out`.
  template <class Req, class Resp>
  grpc::Status decide(grpc::Status (v1::RateLimiter::Stub::*method)(
                          grpc::ClientContext*, const Req&, Resp*),
                      const std::string& policy, const std::string& key,
                      Decision& out, void (Req::*set_amount)(int64_t) = nullptr,
                      int64_t amount = 0) {
    Req req;
    req.set_policy(policy);
    req.set_key(key);
    if (set_amount != nullptr) (req.*set_amount)(amount);
    Resp resp;
    grpc::ClientContext ctx;
    grpc::Status s = ((*stub_).*method)(&ctx, req, &resp);
    out = from_wire(resp.decision());
    return s;
  }

  ManualClock clock_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::RateLimiter::Stub> stub_;
};

constexpr const char* kConfig = R"(
version: 1
leaseTtl: 1s
maxKeyBytes: 64
maxBatch: 8
limiters:
  gcra: {strategy: gcra, limit: 10, period: 1s, burst: 4}
  bucket: {strategy: tokenBucket, capacity: 5, refillPerSec: 3}
  fixed: {strategy: fixedWindow, limit: 6, period: 1s}
  sliding: {strategy: slidingWindow, limit: 6, period: 1s, buckets: 4}
  log: {strategy: slidingLog, limit: 4, period: 700ms}
  quota: {strategy: quota, limit: 9, period: 2s, anchorMs: 0}
  tokens: {strategy: tokenBudget, budget: 20, period: 1s}
  checkout:
    admission:
      concurrency: {maxInflight: 2}
      rate: {strategy: fixedWindow, limit: 100, period: 1s}
)";

// Drives `policy` through the door and `S`'s library limiter (same options,
// same clock) over one random timeline; every field of every decision, and
// peeks and forecasts along the way, must be equal.
template <class S>
void expect_same_as_library(Door& door, const std::string& policy,
                            const typename S::Options& options, uint32_t seed) {
  auto lib = RateLimiter<S, ServerClock>::create(options, {},
                                                 ServerClock{&door.clock()});
  ASSERT_TRUE(lib.ok()) << lib.status();
  std::mt19937 rng(seed);
  const std::vector<std::string> keys = {"alice", "bob", "carol"};
  for (int step = 0; step < 300; ++step) {
    door.clock().advance_ms(static_cast<int64_t>(rng() % 120));
    const std::string& key = keys[rng() % keys.size()];
    const int64_t cost = 1 + static_cast<int64_t>(rng() % 3);
    Decision got;
    ASSERT_TRUE(door.check(policy, key, cost, got).ok());
    absl::StatusOr<Decision> want = lib->check(key, static_cast<double>(cost));
    ASSERT_TRUE(want.ok());
    ASSERT_EQ(got, *want) << policy << " step " << step;
    if (step % 5 == 0) {
      Decision peeked;
      ASSERT_TRUE(door.peek(policy, key, peeked).ok());
      ASSERT_EQ(peeked, *lib->peek(key)) << policy << " peek, step " << step;
      v1::ForecastRequest req;
      req.set_policy(policy);
      req.set_key(key);
      req.set_cost(2);
      v1::ForecastResponse resp;
      grpc::ClientContext ctx;
      ASSERT_TRUE(door.stub().Forecast(&ctx, req, &resp).ok());
      absl::StatusOr<Forecast> f = lib->forecast(key, 2);
      ASSERT_TRUE(f.ok());
      EXPECT_EQ(resp.forecast().spendable_now(), f->spendable_now);
      EXPECT_EQ(resp.forecast().next_replenish_at(), f->next_replenish_at_ms);
      EXPECT_EQ(resp.forecast().full_at(), f->full_at_ms);
    }
    if (step % 11 == 0) {
      v1::CheckManyRequest req;
      req.set_policy(policy);
      for (const std::string& k : keys) req.add_keys(k);
      v1::CheckManyResponse resp;
      grpc::ClientContext ctx;
      ASSERT_TRUE(door.stub().CheckMany(&ctx, req, &resp).ok());
      std::vector<std::string_view> views(keys.begin(), keys.end());
      absl::StatusOr<std::vector<Decision>> many = lib->check_many(views);
      ASSERT_TRUE(many.ok());
      ASSERT_EQ(resp.decisions_size(), 3);
      for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(Door::from_wire(resp.decisions(i)), (*many)[i])
            << policy << " check_many, step " << step;
      }
    }
  }
}

TEST(ServerDoor, DecisionsEqualTheLibrarys) {
  Door door(kConfig);
  expect_same_as_library<Gcra>(door, "gcra", {10, 1000, 4}, 1);
  expect_same_as_library<TokenBucket>(door, "bucket", {5, 3}, 2);
  expect_same_as_library<FixedWindow>(door, "fixed", {6, 1000}, 3);
  expect_same_as_library<SlidingWindow>(door, "sliding", {6, 1000, 4}, 4);
  expect_same_as_library<SlidingLog>(door, "log", {4, 700}, 5);
  Quota::Options quota;
  quota.limit = 9;
  quota.period = QuotaPeriod::kFixed;
  quota.period_ms = 2000;
  expect_same_as_library<Quota>(door, "quota", quota, 6);
}

TEST(ServerDoor, DebitEqualsTheLibrarysTokenBudget) {
  Door door(kConfig);
  auto lib = RateLimiter<TokenBudget, ServerClock>::create(
      {20, 1000}, {}, ServerClock{&door.clock()});
  ASSERT_TRUE(lib.ok());
  std::mt19937 rng(7);
  int denied = 0;
  for (int step = 0; step < 200; ++step) {
    door.clock().advance_ms(static_cast<int64_t>(rng() % 90));
    const int64_t tokens = 1 + static_cast<int64_t>(rng() % 9);
    Decision got;
    ASSERT_TRUE(door.debit("tokens", "t", tokens, got).ok());
    absl::StatusOr<Decision> want =
        lib->check("t", static_cast<double>(tokens));
    ASSERT_TRUE(want.ok());
    ASSERT_EQ(got, *want) << "step " << step;
    denied += got.allowed ? 0 : 1;
  }
  EXPECT_GT(denied, 0);  // the timeline crossed the budget
  // A token budget answers Check with the same arithmetic.
  Decision d;
  EXPECT_TRUE(door.check("tokens", "u", 3, d).ok());
}

TEST(ServerDoor, ZeroCostMeansOne) {
  Door door(kConfig);
  Decision a, b;
  ASSERT_TRUE(door.check("fixed", "k", 0, a).ok());
  ASSERT_TRUE(door.check("fixed", "k", 1, b).ok());
  EXPECT_EQ(a.remaining, 5);
  EXPECT_EQ(b.remaining, 4);
}

TEST(ServerDoor, BadRequestsGetTheirStatusAndChangeNothing) {
  Door door(kConfig);
  Decision before;
  ASSERT_TRUE(door.check("fixed", "k", 2, before).ok());
  Decision d;
  const auto code = [](const grpc::Status& s) { return s.error_code(); };
  EXPECT_EQ(code(door.check("nope", "k", 1, d)), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(code(door.check("fixed", "", 1, d)),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(door.check("fixed", std::string(65, 'k'), 1, d)),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(door.check("fixed", "k", -1, d)),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(door.check("fixed", "k", int64_t{1} << 60, d)),
            grpc::StatusCode::INVALID_ARGUMENT);
  const grpc::Status debit = door.debit("fixed", "k", 1, d);
  EXPECT_EQ(code(debit), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(debit.error_message().find("fixed"), std::string::npos)
      << debit.error_message();
  EXPECT_EQ(code(door.check("checkout", "k", 1, d)),
            grpc::StatusCode::UNIMPLEMENTED);
  v1::AdmitResponse admitted;
  EXPECT_EQ(code(door.admit("fixed", "k", admitted)),
            grpc::StatusCode::UNIMPLEMENTED);
  {
    v1::CheckManyRequest req;
    req.set_policy("fixed");
    for (int i = 0; i < 9; ++i) req.add_keys("k");
    v1::CheckManyResponse resp;
    grpc::ClientContext ctx;
    EXPECT_EQ(code(door.stub().CheckMany(&ctx, req, &resp)),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    v1::CheckManyRequest req;
    req.set_policy("fixed");
    req.add_keys("k");
    req.add_keys("");
    v1::CheckManyResponse resp;
    grpc::ClientContext ctx;
    EXPECT_EQ(code(door.stub().CheckMany(&ctx, req, &resp)),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  // Nothing was spent by any of them.
  Decision after;
  ASSERT_TRUE(door.peek("fixed", "k", after).ok());
  EXPECT_EQ(after.remaining, before.remaining);
}

TEST(ServerDoor, AdmitHoldsSlotsUntilReleaseOrExpiry) {
  Door door(kConfig);
  v1::AdmitResponse a, b, c;
  ASSERT_TRUE(door.admit("checkout", "k", a).ok());
  ASSERT_TRUE(door.admit("checkout", "k", b).ok());
  EXPECT_TRUE(a.decision().allowed());
  EXPECT_TRUE(b.decision().allowed());
  EXPECT_FALSE(a.lease_id().empty());
  EXPECT_NE(a.lease_id(), b.lease_id());
  EXPECT_EQ(a.lease_expires_at(), kEpoch + 1000);
  // The ceiling of 2 is full: the third is denied on the concurrency axis
  // and holds nothing.
  ASSERT_TRUE(door.admit("checkout", "k", c).ok());
  EXPECT_FALSE(c.decision().allowed());
  EXPECT_EQ(c.binding_axis(), "concurrency");
  EXPECT_TRUE(c.lease_id().empty());
  EXPECT_EQ(door.server().leases().held(), 2);

  // Release frees one; a second Release of it, and of an unknown id, do
  // nothing.
  ASSERT_TRUE(door.release(a.lease_id(), false).ok());
  ASSERT_TRUE(door.release(a.lease_id(), false).ok());
  ASSERT_TRUE(door.release("not-a-lease", true).ok());
  EXPECT_EQ(door.server().leases().held(), 1);
  ASSERT_TRUE(door.admit("checkout", "k", c).ok());
  EXPECT_TRUE(c.decision().allowed());

  // Heartbeat renews b and c; a is reported reclaimed (not held).
  door.clock().advance_ms(800);
  v1::HeartbeatRequest beat;
  beat.add_lease_ids(b.lease_id());
  beat.add_lease_ids(a.lease_id());
  v1::HeartbeatResponse renewed;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(door.stub().Heartbeat(&ctx, beat, &renewed).ok());
  }
  ASSERT_EQ(renewed.live_ids_size(), 1);
  EXPECT_EQ(renewed.live_ids(0), b.lease_id());
  ASSERT_EQ(renewed.reclaimed_ids_size(), 1);
  EXPECT_EQ(renewed.reclaimed_ids(0), a.lease_id());
  EXPECT_EQ(renewed.next_deadline(), kEpoch + 800 + 1000);

  // c was not renewed: at its expiry it is reclaimed; b lives on.
  door.clock().advance_ms(200);
  EXPECT_EQ(door.server().leases().reclaim_expired(), 1);
  EXPECT_EQ(door.server().leases().held(), 1);
  v1::AdmitResponse d;
  ASSERT_TRUE(door.admit("checkout", "k", d).ok());
  EXPECT_TRUE(d.decision().allowed());
  // Past b's renewed deadline both go.
  door.clock().advance_ms(1000);
  EXPECT_EQ(door.server().leases().reclaim_expired(), 2);
  EXPECT_EQ(door.server().leases().held(), 0);
  EXPECT_EQ(door.server().leases().reclaimed_total(), 3);
}

TEST(ServerDoor, TheHealthServiceSaysServing) {
  Door door(kConfig);
  EXPECT_TRUE(door.server().store_ready());  // the embedded store
  EXPECT_EQ(testing::grpc_health_status(door.server().port()), 1);
}

TEST(ServerDoor, LoopbackPeers) {
  EXPECT_TRUE(is_loopback_peer("ipv4:127.0.0.1:5000"));
  EXPECT_TRUE(is_loopback_peer("ipv4:127.3.2.1:1"));
  EXPECT_TRUE(is_loopback_peer("ipv6:[::1]:443"));
  EXPECT_TRUE(is_loopback_peer("ipv6:[::ffff:127.0.0.1]:80"));
  EXPECT_TRUE(is_loopback_peer("unix:/tmp/sock"));
  EXPECT_FALSE(is_loopback_peer("ipv4:10.0.0.5:5000"));
  EXPECT_FALSE(is_loopback_peer("ipv4:1127.0.0.1:5000"));
  EXPECT_FALSE(is_loopback_peer("ipv6:[::1a]:5000"));
  EXPECT_FALSE(is_loopback_peer("ipv6:[::ffff:10.0.0.1]:80"));
  EXPECT_FALSE(is_loopback_peer(""));
}

// This machine's first IPv4 address off loopback, or "".
std::string non_loopback_ipv4() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* i = all; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) == nullptr) {
      continue;
    }
    if (std::string(text).rfind("127.", 0) != 0) found = text;
  }
  freeifaddrs(all);
  return found;
}

// Runs `command` through the shell; its exit status is 0 or `output`
// (stdout and stderr) says why not.
bool run(const std::string& command, std::string& output) {
  output.clear();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    output = "popen failed";
    return false;
  }
  char buf[256];
  while (fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
  return pclose(pipe) == 0;
}

// An IPv4 address off loopback that this machine answers on, for one test.
// As root with iproute2 it makes one (private, 10.213.x.y/32, x.y from the
// pid so concurrent runs do not collide) on a dummy interface `tk<pid>`,
// or, where the kernel has no dummy interfaces (as on some VMs), on `lo`
// itself (an address outside 127.0.0.0/8 is off loopback to the door,
// which judges the peer's address), and removes it when destroyed.
// Otherwise it takes the machine's own first such address. `ip()` is
// empty when there is none; `why()` then says why.
class OffLoopbackAddress {
 public:
  OffLoopbackAddress() {
    std::string out;
    const int pid = static_cast<int>(getpid());
    const std::string ip =
        absl::StrCat("10.213.", (pid / 254) % 256, ".", pid % 254 + 1);
    if (geteuid() != 0) {
      why_ = "not root, so no address can be added";
    } else if (!run("ip -V", out)) {
      why_ = absl::StrCat("iproute2's ip is missing: ", out);
    } else if (const std::string dev = absl::StrCat("tk", pid);
               run(absl::StrCat("ip link add ", dev, " type dummy"), out)) {
      undo_ = absl::StrCat("ip link del ", dev);
      if (run(absl::StrCat("ip addr add ", ip, "/32 dev ", dev), out) &&
          run(absl::StrCat("ip link set ", dev, " up"), out)) {
        ip_ = ip;
      } else {
        why_ = absl::StrCat("cannot set up ", dev, ": ", out);
      }
    } else if (run(absl::StrCat("ip addr add ", ip, "/32 dev lo"), out)) {
      undo_ = absl::StrCat("ip addr del ", ip, "/32 dev lo");
      ip_ = ip;
    } else {
      why_ = absl::StrCat("ip cannot add an address: ", out);
    }
    if (ip_.empty()) {
      ip_ = non_loopback_ipv4();
      if (!ip_.empty()) why_.clear();
    }
    if (ip_.empty() && why_.empty()) why_ = "no IPv4 address off loopback";
  }
  ~OffLoopbackAddress() {
    std::string out;
    if (!undo_.empty()) {
      EXPECT_TRUE(run(undo_, out)) << undo_ << ": " << out;
    }
  }
  OffLoopbackAddress(const OffLoopbackAddress&) = delete;
  OffLoopbackAddress& operator=(const OffLoopbackAddress&) = delete;

  const std::string& ip() const { return ip_; }
  const std::string& why() const { return why_; }

 private:
  std::string ip_;
  std::string why_;
  std::string undo_;
};

grpc::Status reserve_from(const std::string& address,
                          const std::string& secret) {
  auto fleet = v1::Fleet::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  v1::ReserveRequest req;
  req.set_policy("fixed");
  req.set_wants(5);
  v1::ReserveResponse resp;
  grpc::ClientContext ctx;
  if (!secret.empty()) ctx.AddMetadata("x-fleet-secret", secret);
  return fleet->Reserve(&ctx, req, &resp);
}

// The caller reaches the server through an address off loopback, so the
// peer the door judges is that address (a local connection's source is its
// destination).
TEST(ServerDoor, TheFleetDoorRefusesOffLoopbackCallersWithoutTheSecret) {
  const OffLoopbackAddress address;
  if (address.ip().empty()) {
    GTEST_SKIP() << "no IPv4 address off loopback: " << address.why();
  }
  const std::string& ip = address.ip();
  for (const std::string secret : {"", "s3cret"}) {
    absl::StatusOr<ServerConfig> config = parse_config(kConfig, "t.yaml");
    ASSERT_TRUE(config.ok());
    auto policies = Policies::create(*config, nullptr);
    ASSERT_TRUE(policies.ok());
    auto server = Server::start(
        *std::move(policies), {.listen = "0.0.0.0:0", .fleet_secret = secret});
    ASSERT_TRUE(server.ok()) << server.status();
    const std::string off = absl::StrCat(ip, ":", (*server)->port());
    const std::string on = absl::StrCat("127.0.0.1:", (*server)->port());
    // Off loopback without (or with a wrong) secret: refused.
    EXPECT_EQ(reserve_from(off, "").error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(reserve_from(off, "wrong").error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    // Past the door, the request itself is judged: "fixed" is not leasable.
    EXPECT_EQ(reserve_from(on, "").error_code(), grpc::StatusCode::NOT_FOUND);
    if (!secret.empty()) {
      EXPECT_EQ(reserve_from(off, secret).error_code(),
                grpc::StatusCode::NOT_FOUND);
    }
    // The Monitor door too (it has no secret here).
    auto monitor = v1::Monitor::NewStub(
        grpc::CreateChannel(off, grpc::InsecureChannelCredentials()));
    v1::GetSnapshotResponse snap;
    grpc::ClientContext ctx;
    EXPECT_EQ(monitor->GetSnapshot(&ctx, {}, &snap).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
}

// `name{labels} value` lines of a Prometheus text exposition.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    EXPECT_TRUE(absl::SimpleAtod(line.substr(space + 1), &v)) << line;
    out[line.substr(0, space)] = v;
  }
  return out;
}

TEST(ServerDoor, MetricsCountWhatWasDecided) {
  Door door(kConfig);
  Decision d;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(door.check("fixed", "m", 1, d).ok());
  v1::AdmitResponse a, b, c;
  ASSERT_TRUE(door.admit("checkout", "k", a).ok());
  ASSERT_TRUE(door.admit("checkout", "k", b).ok());
  ASSERT_TRUE(door.admit("checkout", "k", c).ok());  // concurrency denies
  ASSERT_TRUE(door.debit("tokens", "t", 5, d).ok());
  const std::string text = door.server().prometheus_text();
  std::map<std::string, double> m = samples(text);
  EXPECT_EQ(m["throttlekit_checks_total{policy=\"fixed\",allowed=\"true\"}"],
            6);
  EXPECT_EQ(m["throttlekit_checks_total{policy=\"fixed\",allowed=\"false\"}"],
            2);
  EXPECT_EQ(m["throttlekit_limit{policy=\"fixed\"}"], 6);
  EXPECT_EQ(m["throttlekit_checks_total{policy=\"checkout\",allowed=\"true\"}"],
            2);
  EXPECT_EQ(m["throttlekit_denies_by_axis_total{policy=\"checkout\",lane=\""
              "concurrency\"}"],
            1);
  EXPECT_EQ(
      m["throttlekit_denies_by_axis_total{policy=\"checkout\",lane=\"rate\"}"],
      0);
  EXPECT_EQ(m["throttlekit_checks_total{policy=\"tokens\",allowed=\"true\"}"],
            1);
  EXPECT_EQ(m["throttlekit_concurrency_limit{policy=\"checkout\"}"], 2);
  EXPECT_EQ(m["throttlekit_concurrency_inflight{policy=\"checkout\"}"], 2);
  EXPECT_EQ(m["throttlekit_slots_held"], 2);
  EXPECT_EQ(m["throttlekit_store_up"], 1);
  EXPECT_EQ(m["throttlekit_decision_latency_seconds_count{policy=\"fixed\"}"],
            8);
  EXPECT_GT(m["throttlekit_decision_latency_seconds{policy=\"fixed\",quantile="
              "\"0.99\"}"],
            0);
  EXPECT_NE(text.find("# TYPE throttlekit_checks_total counter"),
            std::string::npos);
  EXPECT_TRUE(door.server().healthy());
}

TEST(ServerDoor, MonitorSnapshotShowsPoliciesGuardsAndDenials) {
  Door door(kConfig);
  Decision d;
  for (int i = 0; i < 7; ++i)
    ASSERT_TRUE(door.check("fixed", "who", 1, d).ok());
  v1::AdmitResponse a, b, c;
  ASSERT_TRUE(door.admit("checkout", "k1", a).ok());
  ASSERT_TRUE(door.admit("checkout", "k2", b).ok());
  ASSERT_TRUE(door.admit("checkout", "k3", c).ok());
  auto monitor =
      v1::Monitor::NewStub(testing::loopback_channel(door.server().port()));
  v1::GetSnapshotResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(monitor->GetSnapshot(&ctx, {}, &resp).ok());
  const v1::Snapshot& s = resp.snapshot();
  EXPECT_EQ(s.meta().mode(), "process");
  std::map<std::string, const v1::PolicySummary*> by_name;
  for (const auto& p : s.policies()) by_name[p.name()] = &p;
  ASSERT_TRUE(by_name.contains("fixed"));
  EXPECT_EQ(by_name["fixed"]->allowed(), 6);
  EXPECT_EQ(by_name["fixed"]->denied(), 1);
  EXPECT_EQ(by_name["fixed"]->strategy(), "fixedWindow");
  EXPECT_EQ(by_name["fixed"]->latency().n(), 7);
  EXPECT_EQ(by_name["checkout"]->kind(), "admitter");
  ASSERT_EQ(s.guards_size(), 1);
  EXPECT_EQ(s.guards(0).name(), "checkout");
  EXPECT_EQ(s.guards(0).limit(), 2);
  EXPECT_EQ(s.guards(0).inflight(), 2);
  ASSERT_EQ(s.recent_denials_size(), 2);
  EXPECT_EQ(s.recent_denials(0).policy(), "fixed");
  EXPECT_EQ(s.recent_denials(0).key(), "who");
  EXPECT_EQ(s.recent_denials(0).axis(), "");
  EXPECT_EQ(s.recent_denials(1).key(), "k3");
  EXPECT_EQ(s.recent_denials(1).axis(), "concurrency");
  EXPECT_NE(s.raw_json().find("\"slots_held\":2"), std::string::npos)
      << s.raw_json();
  // The heaviest keys (exact while fewer keys than the sketch holds).
  ASSERT_EQ(by_name["fixed"]->top_requested_size(), 1);
  EXPECT_EQ(by_name["fixed"]->top_requested(0).key(), "who");
  EXPECT_EQ(by_name["fixed"]->top_requested(0).count(), 7);
  ASSERT_EQ(by_name["fixed"]->top_denied_size(), 1);
  EXPECT_EQ(by_name["fixed"]->top_denied(0).count(), 1);
  ASSERT_EQ(by_name["checkout"]->top_requested_size(), 3);
  ASSERT_EQ(by_name["checkout"]->top_denied_size(), 1);
  EXPECT_EQ(by_name["checkout"]->top_denied(0).key(), "k3");
  EXPECT_NE(s.raw_json().find("\"top_denied\":[{\"key\":\"who\",\"count\":1}]"),
            std::string::npos)
      << s.raw_json();
}

// Heavy hitters among many keys: the sketch keeps the keys carrying the
// load, ranked, with counts that bound the truth from above.
TEST(ServerDoor, MonitorTopKeysFindTheHeavyHitters) {
  Door door(kConfig);
  Decision d;
  // 3 heavy keys (60, 40, 25 checks) among 300 keys checked once each.
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(door.check("fixed", absl::StrCat("light-", i), 1, d).ok());
    if (i % 5 == 0) {
      ASSERT_TRUE(door.check("fixed", "heavy-a", 1, d).ok());
    }
    if (i % 15 == 0) {
      ASSERT_TRUE(door.check("fixed", "heavy-b", 1, d).ok());
      ASSERT_TRUE(door.check("fixed", "heavy-b", 1, d).ok());
    }
    if (i % 12 == 0) {
      ASSERT_TRUE(door.check("fixed", "heavy-c", 1, d).ok());
    }
  }
  const Policy* p = door.server().policies().find("fixed");
  const std::vector<KeyCount> top = p->metrics->top_requested(3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].key, "heavy-a");
  EXPECT_EQ(top[1].key, "heavy-b");
  EXPECT_EQ(top[2].key, "heavy-c");
  const std::map<std::string, int64_t> truth = {
      {"heavy-a", 60}, {"heavy-b", 40}, {"heavy-c", 25}};
  for (const KeyCount& k : top) {
    EXPECT_GE(k.count, truth.at(k.key)) << k.key;
    EXPECT_LE(k.count - k.error, truth.at(k.key)) << k.key;
  }
}

// Denies `marker` on policy `fixed` (after its window's 6 admissions)
// every 5 ms until destroyed: a Watch stream is being served once a marker
// denial arrives on it (a Watch starts from the denials after it began).
class MarkerDenials {
 public:
  explicit MarkerDenials(Door& door)
      : thread_([this, &door] {
          Decision m;
          for (int i = 0; i < 6; ++i) {
            (void)door.check("fixed", "marker", 1, m);
          }
          while (!done_.load()) {
            (void)door.check("fixed", "marker", 1, m);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
        }) {}
  ~MarkerDenials() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Reads until a marker denial arrives; false if the stream ended first.
bool await_marker(grpc::ClientReader<v1::WatchResponse>& r) {
  v1::WatchResponse w;
  while (r.Read(&w)) {
    if (w.denial().key() == "marker") return true;
  }
  return false;
}

// The next denial that is not a marker (empty if the stream ended first).
v1::DenialEvent next_denial(grpc::ClientReader<v1::WatchResponse>& r) {
  v1::WatchResponse w;
  while (r.Read(&w)) {
    if (w.denial().key() != "marker") return w.denial();
  }
  return v1::DenialEvent();
}

// A Watch stream: each denial recorded after it began, in order, from the
// policy asked (or every policy); it ends when the server shuts down.
TEST(ServerDoor, MonitorWatchStreamsDenials) {
  Door door(kConfig);
  Decision d;
  for (int i = 0; i < 7; ++i) {  // one denial before any watcher
    ASSERT_TRUE(door.check("fixed", "before", 1, d).ok());
  }
  auto monitor =
      v1::Monitor::NewStub(testing::loopback_channel(door.server().port()));
  grpc::ClientContext all_ctx;
  auto all = monitor->Watch(&all_ctx, {});
  grpc::ClientContext fixed_ctx;
  v1::WatchRequest only_fixed;
  only_fixed.set_policy("fixed");
  auto fixed = monitor->Watch(&fixed_ctx, only_fixed);
  // Wait until both streams are being served: marker denials until one
  // shows up on both.
  bool all_marked = false;
  bool fixed_marked = false;
  {
    const MarkerDenials markers(door);
    all_marked = await_marker(*all);
    fixed_marked = await_marker(*fixed);
  }
  ASSERT_TRUE(all_marked);
  ASSERT_TRUE(fixed_marked);
  // Now one denial on `fixed` (the 7th check of w9: 6 per key and window,
  // on the door's manual clock) and one on `checkout`'s concurrency axis.
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(door.check("fixed", "w9", 1, d).ok());
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(door.check("fixed", "w10", 1, d).ok());
  }
  v1::AdmitResponse a, b, c;
  ASSERT_TRUE(door.admit("checkout", "k1", a).ok());
  ASSERT_TRUE(door.admit("checkout", "k2", b).ok());
  ASSERT_TRUE(door.admit("checkout", "k3", c).ok());
  ASSERT_FALSE(c.decision().allowed());
  // Read what arrived: skip further markers; the rest in order.
  const v1::DenialEvent e1 = next_denial(*all);
  EXPECT_EQ(e1.policy(), "fixed");
  EXPECT_EQ(e1.key(), "w9");
  EXPECT_EQ(e1.remaining(), 0);
  EXPECT_GE(e1.retry_after_ms(), 1);
  const v1::DenialEvent e2 = next_denial(*all);
  EXPECT_EQ(e2.policy(), "checkout");
  EXPECT_EQ(e2.key(), "k3");
  EXPECT_EQ(e2.axis(), "concurrency");
  const v1::DenialEvent f1 = next_denial(*fixed);
  EXPECT_EQ(f1.key(), "w9");
  // Shutdown ends both streams (OK) at once.
  const auto t0 = std::chrono::steady_clock::now();
  door.server().shutdown();
  v1::WatchResponse rest;
  while (all->Read(&rest)) {
  }
  while (fixed->Read(&rest)) {
  }
  EXPECT_TRUE(all->Finish().ok());
  EXPECT_TRUE(fixed->Finish().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

// A denial wakes its watchers: with the idle check (the only timed wake
// of a Watch) set to an hour, every denial still arrives, in the order
// recorded, well before the stream's deadline; nothing but the denial
// itself can have woken the watcher.
TEST(ServerDoor, MonitorWatchIsWokenByTheDenial) {
  Door door(kConfig, {.watch_cancel_check_ms = 3'600'000});
  auto monitor =
      v1::Monitor::NewStub(testing::loopback_channel(door.server().port()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::WatchRequest only_fixed;
  only_fixed.set_policy("fixed");
  auto stream = monitor->Watch(&ctx, only_fixed);
  // The stream is served once a marker denial arrives (each marker denial
  // is itself delivered by a wake).
  bool seen_marker = false;
  {
    const MarkerDenials markers(door);
    seen_marker = await_marker(*stream);
  }
  ASSERT_TRUE(seen_marker) << stream->Finish().error_message();
  v1::WatchResponse w;
  // One denial each on w1, w2, w3 (the 7th check of each, 6 per window),
  // read as they happen: each must arrive before the next is made.
  for (const std::string key : {"w1", "w2", "w3"}) {
    Decision d;
    for (int i = 0; i < 7; ++i) {
      ASSERT_TRUE(door.check("fixed", key, 1, d).ok());
    }
    ASSERT_FALSE(d.allowed);
    const v1::DenialEvent got = next_denial(*stream);
    ASSERT_EQ(got.key(), key) << stream->Finish().error_message();
    EXPECT_EQ(got.policy(), "fixed");
    EXPECT_EQ(got.remaining(), 0);
  }
  // Then a burst, all arriving, in order.
  for (const std::string key : {"w4", "w5", "w6"}) {
    Decision d;
    for (int i = 0; i < 7; ++i) {
      ASSERT_TRUE(door.check("fixed", key, 1, d).ok());
    }
  }
  for (const std::string key : {"w4", "w5", "w6"}) {
    ASSERT_TRUE(stream->Read(&w)) << stream->Finish().error_message();
    EXPECT_EQ(w.denial().key(), key);
  }
  // Shutdown wakes it too (the idle check would take an hour).
  door.server().shutdown();
  while (stream->Read(&w)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

// At most 16 watchers at once; the others are told to poll instead.
TEST(ServerDoor, MonitorWatchersAreBounded) {
  Door door(kConfig);
  auto monitor =
      v1::Monitor::NewStub(testing::loopback_channel(door.server().port()));
  constexpr int kStreams = 20;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::WatchResponse>>> streams;
  for (int i = 0; i < kStreams; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(monitor->Watch(contexts.back().get(), {}));
  }
  // Denials keep coming until every stream has answered once.
  std::atomic<bool> done{false};
  std::thread marker([&] {
    Decision m;
    while (!done.load()) {
      (void)door.check("fixed", "marker", 1, m);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  int served = 0;
  int exhausted = 0;
  for (int i = 0; i < kStreams; ++i) {
    v1::WatchResponse w;
    if (streams[i]->Read(&w)) {
      ++served;
      continue;
    }
    const grpc::Status s = streams[i]->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(s.error_message().find("GetSnapshot"), std::string::npos);
    ++exhausted;
  }
  done = true;
  marker.join();
  EXPECT_EQ(served, 16);
  EXPECT_EQ(exhausted, kStreams - 16);
  door.server().shutdown();  // ends the served streams
}

TEST(ServerDoor, MonitorWatchRefusesAnUnknownPolicy) {
  Door door(kConfig);
  auto monitor =
      v1::Monitor::NewStub(testing::loopback_channel(door.server().port()));
  grpc::ClientContext ctx;
  v1::WatchRequest req;
  req.set_policy("nope");
  auto stream = monitor->Watch(&ctx, req);
  v1::WatchResponse w;
  EXPECT_FALSE(stream->Read(&w));
  const grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("nope"), std::string::npos);
}

// A fairEscrow policy's Check is the library's WeightedFairEscrow admit
// for the tenant named by the key, on every field, over a random run;
// CheckMany admits its tenants at one instant, or nothing when one is
// unknown; what an escrow cannot answer is UNIMPLEMENTED.
TEST(ServerDoor, FairEscrowEqualsTheLibrary) {
  Door door(R"(
version: 1
limiters:
  fair:
    fairEscrow:
      limit: 20
      period: 1s
      tenants:
        - {name: acme, weight: 3}
        - {name: free, weight: 1, hardCap: 6}
        - {name: idle, weight: 2}
)");
  auto lib = BasicWeightedFairEscrow<ServerClock>::create(
      {.limit = 20,
       .window_ms = 1000,
       .tenants = {{.name = "acme", .weight = 3},
                   {.name = "free", .weight = 1, .hard_cap = 6},
                   {.name = "idle", .weight = 2}}},
      ServerClock{&door.clock()});
  ASSERT_TRUE(lib.ok()) << lib.status();
  std::mt19937_64 rng(20261126);
  int64_t allowed = 0;
  int64_t denied = 0;
  for (int i = 0; i < 400; ++i) {
    door.clock().advance_ms(static_cast<int64_t>(rng() % 60));
    const std::string tenant = rng() % 4 == 0 ? "free" : "acme";
    const int64_t cost = 1 + static_cast<int64_t>(rng() % 3);
    if (rng() % 10 == 0) {
      // A batch at one instant, both tenants.
      v1::CheckManyRequest req;
      req.set_policy("fair");
      req.add_keys("acme");
      req.add_keys("free");
      req.set_cost(cost);
      v1::CheckManyResponse resp;
      grpc::ClientContext ctx;
      ASSERT_TRUE(door.stub().CheckMany(&ctx, req, &resp).ok());
      ASSERT_EQ(resp.decisions_size(), 2);
      const int64_t now = door.clock().now_ms();
      for (int k = 0; k < 2; ++k) {
        absl::StatusOr<Decision> want =
            (*lib)->admit_at(k == 0 ? "acme" : "free", now, cost);
        ASSERT_TRUE(want.ok());
        EXPECT_EQ(Door::from_wire(resp.decisions(k)), *want) << i << "/" << k;
      }
      continue;
    }
    Decision got;
    ASSERT_TRUE(door.check("fair", tenant, cost, got).ok());
    absl::StatusOr<Decision> want = (*lib)->admit(tenant, cost);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(got, *want) << "step " << i << " " << tenant << " cost " << cost;
    (got.allowed ? allowed : denied) += 1;
  }
  EXPECT_GT(allowed, 50);
  EXPECT_GT(denied, 50);  // the run pressed on the shares and the cap

  Decision d;
  grpc::Status unknown = door.check("fair", "nobody", 1, d);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.error_message().find("unknown tenant"), std::string::npos);
  // A batch naming an unknown tenant spends nothing for the known ones.
  {
    v1::CheckManyRequest req;
    req.set_policy("fair");
    req.add_keys("acme");
    req.add_keys("nobody");
    v1::CheckManyResponse resp;
    grpc::ClientContext ctx;
    EXPECT_EQ(door.stub().CheckMany(&ctx, req, &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  ASSERT_TRUE(door.check("fair", "acme", 1, d).ok());
  absl::StatusOr<Decision> want = (*lib)->admit("acme", 1);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(d, *want);
  grpc::Status peek = door.peek("fair", "acme", d);
  EXPECT_EQ(peek.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(peek.error_message().find("fairEscrow answers Check only"),
            std::string::npos);
}

// A channel to the server on `port` trusting `root` (and presenting
// `client` when given), expecting the name `localhost`.
std::shared_ptr<grpc::Channel> tls_channel(int port, const std::string& root,
                                           const Pem* client = nullptr) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = root;
  if (client != nullptr) {
    o.pem_private_key = client->key;
    o.pem_cert_chain = client->cert;
  }
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::SslCredentials(o), args);
}

// Check `fixed` over `channel`; the status.
grpc::StatusCode check_over(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::RateLimiter::NewStub(channel);
  v1::CheckRequest req;
  req.set_policy("fixed");
  req.set_key("tls");
  v1::CheckResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  const grpc::Status s = stub->Check(&ctx, req, &resp);
  if (s.ok()) {
    EXPECT_TRUE(resp.decision().allowed());
  }
  return s.error_code();
}

std::unique_ptr<Server> start_tls(const Pem& server, const std::string& ca) {
  absl::StatusOr<ServerConfig> config = parse_config(kConfig, "t.yaml");
  EXPECT_TRUE(config.ok());
  auto policies = Policies::create(*config, nullptr);
  EXPECT_TRUE(policies.ok());
  auto s = Server::start(*std::move(policies), {.listen = "127.0.0.1:0",
                                                .tls_cert_chain = server.cert,
                                                .tls_private_key = server.key,
                                                .tls_client_ca = ca});
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// A negative cap on the synchronous RPCs' threads is refused before
// anything listens, naming the option.
TEST(ServerDoor, ANegativeThreadCapIsRefused) {
  absl::StatusOr<ServerConfig> config = parse_config(kConfig, "t.yaml");
  ASSERT_TRUE(config.ok());
  auto policies = Policies::create(*config, nullptr);
  ASSERT_TRUE(policies.ok());
  auto s = Server::start(*std::move(policies),
                         {.listen = "127.0.0.1:0", .sync_threads = -1});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
  EXPECT_NE(std::string(s.status().message())
                .find("sync_threads must be >= 0; got -1"),
            std::string::npos)
      << s.status();
}

TEST(ServerDoor, ABlockingPoolOutsideItsBoundsIsRefused) {
  absl::StatusOr<ServerConfig> config = parse_config(kConfig, "t.yaml");
  ASSERT_TRUE(config.ok());
  for (const int threads : {0, -3, 4097}) {
    auto policies = Policies::create(*config, nullptr);
    ASSERT_TRUE(policies.ok());
    auto s = Server::start(*std::move(policies), {.listen = "127.0.0.1:0",
                                                  .blocking_threads = threads});
    ASSERT_FALSE(s.ok()) << threads;
    EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
    EXPECT_NE(std::string(s.status().message())
                  .find(absl::StrCat("blocking_threads must be in [1, 4096]; "
                                     "got ",
                                     threads)),
              std::string::npos)
        << s.status();
  }
}

// With a certificate and key the door speaks TLS only: a client trusting
// the certificate is served, a plaintext client or one trusting another
// certificate is not.
TEST(ServerDoor, TlsServesOnlyClientsThatTrustItsCertificate) {
  const Pem server = self_signed("server");
  const Pem stranger = self_signed("stranger");
  ASSERT_FALSE(server.cert.empty()) << "the openssl command is needed";
  std::unique_ptr<Server> door = start_tls(server, "");
  ASSERT_NE(door, nullptr);
  EXPECT_EQ(check_over(tls_channel(door->port(), server.cert)),
            grpc::StatusCode::OK);
  EXPECT_EQ(check_over(testing::loopback_channel(door->port())),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(check_over(tls_channel(door->port(), stranger.cert)),
            grpc::StatusCode::UNAVAILABLE);
}

// With a client CA, a client must also present a certificate that CA
// signed.
TEST(ServerDoor, MutualTlsRequiresAClientCertificate) {
  const Pem server = self_signed("server");
  const Pem client = self_signed("client");
  const Pem stranger = self_signed("stranger");
  ASSERT_FALSE(client.cert.empty()) << "the openssl command is needed";
  std::unique_ptr<Server> door = start_tls(server, client.cert);
  ASSERT_NE(door, nullptr);
  EXPECT_EQ(check_over(tls_channel(door->port(), server.cert, &client)),
            grpc::StatusCode::OK);
  EXPECT_EQ(check_over(tls_channel(door->port(), server.cert)),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(check_over(tls_channel(door->port(), server.cert, &stranger)),
            grpc::StatusCode::UNAVAILABLE);
}

TEST(ServerDoor, BadTlsOptionsAreRefused) {
  const Pem server = self_signed("server");
  ASSERT_FALSE(server.cert.empty()) << "the openssl command is needed";
  const auto start = [&](ServerOptions o) {
    absl::StatusOr<ServerConfig> config = parse_config(kConfig, "t.yaml");
    EXPECT_TRUE(config.ok());
    auto policies = Policies::create(*config, nullptr);
    EXPECT_TRUE(policies.ok());
    o.listen = "127.0.0.1:0";
    return Server::start(*std::move(policies), std::move(o));
  };
  auto no_key = start({.tls_cert_chain = server.cert});
  ASSERT_FALSE(no_key.ok());
  EXPECT_EQ(no_key.status().code(), absl::StatusCode::kInvalidArgument);
  auto ca_alone = start({.tls_client_ca = server.cert});
  ASSERT_FALSE(ca_alone.ok());
  EXPECT_EQ(ca_alone.status().code(), absl::StatusCode::kInvalidArgument);
  auto garbage = start(
      {.tls_cert_chain = "not a certificate", .tls_private_key = "not a key"});
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(std::string(garbage.status().message()).find("TLS certificate"),
            std::string::npos)
      << garbage.status();
}

TEST(ServerDoor, FleetPoliciesNeedASharedStore) {
  for (const char* body :
       {"{fleetBudget: {budget: 5, windowMs: 1000}}",
        "{distributedConcurrency: {maxLimit: 5}}",
        "{admission: {concurrency: {distributed: {maxLimit: 5}}}}",
        "{federated: {batch: 2}, strategy: fixedWindow, limit: 5, period: "
        "1s}",
        "{federatedFairEscrow: {limit: 5, period: 1s, tenants: [{name: "
        "x}]}}"}) {
    absl::StatusOr<ServerConfig> config = parse_config(
        absl::StrCat("version: 1\nlimiters: {b: ", body, "}"), "t.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    auto policies = Policies::create(*config, nullptr);
    ASSERT_FALSE(policies.ok()) << body;
    EXPECT_EQ(policies.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(policies.status().message());
    EXPECT_NE(message.find("policy b: "), std::string::npos) << message;
    EXPECT_NE(message.find("--redis"), std::string::npos) << message;
  }
}

TEST(ServerDoor, APortInUseIsUnavailable) {
  Door first(kConfig);
  absl::StatusOr<ServerConfig> config = parse_config(kConfig, "t.yaml");
  ASSERT_TRUE(config.ok());
  auto policies = Policies::create(*config, nullptr);
  ASSERT_TRUE(policies.ok());
  auto second = Server::start(
      *std::move(policies),
      {.listen = absl::StrCat("127.0.0.1:", first.server().port())});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace server_test
}  // namespace throttlekit::server
