// src/redis/coordinator_impl.h (internal)
//
// `RedisCoordinator::Impl`: the Redis coordinator's state and machinery
// (docs/redis.md): its nodes and their connections, shared leader/follower
// style (a caller leads a connection and pipelines what is queued; the
// connection's I/O thread leads when no caller does), the routing of a
// call to its node (the one server, a cluster's slot owner, the primary the
// sentinels name), redirections and retries, the topology thread, the
// Sentinel watcher, the connector that opens connections in the background,
// and the counters. The verbs (verbs.cc) fill a `Request` and run it here.
// The members are defined by concern: the connection (connection.cc), the
// routing and the topology thread (routing.cc), Sentinel (sentinel.cc),
// the connector (connector.cc); the small ones here.

#ifndef THROTTLEKIT_SRC_REDIS_COORDINATOR_IMPL_H_
#define THROTTLEKIT_SRC_REDIS_COORDINATOR_IMPL_H_

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
#include "reply_pool.h"
#include "request.h"
#include "scripts.h"
#include "side_connection.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/redis/key_slot.h"
#include "topology_reads.h"

namespace throttlekit {

using redis_internal::ask_sentinel;
using redis_internal::AsyncRequest;
using redis_internal::confirm_primary;
using redis_internal::fetch_slot_ranges;
using redis_internal::kScriptCount;
using redis_internal::node_address;
using redis_internal::not_served;
using redis_internal::parse_node_address;
using redis_internal::ReadyContext;
using redis_internal::ReplyPool;
using redis_internal::ReplyPtr;
using redis_internal::Request;
using redis_internal::script_texts;
using redis_internal::SideConnection;
using redis_internal::SlotRange;
using redis_internal::to_timeval;

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
    void drain();
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
    void offer(ReadyContext ready);
    void refused(absl::Status why);
    // Whether a context is ready or in use, and the connector's last error
    // while none is.
    bool ready();
    absl::Status connect_error();
    Node& node() const { return *node_; }

    void submit(std::shared_ptr<Request> req);

    // The status moves out of the request to the caller: an error's shared
    // representation (one per failed batch) is then only ever copied on
    // the leader's thread before the hand-over, never on two threads at
    // once (the distribution's abseil releases it in code ThreadSanitizer
    // does not see).
    absl::Status call(const std::shared_ptr<Request>& req);

   private:
    absl::Status deadline_error() const;

    // The I/O thread: leads whenever it is handed the connection, until
    // the connection stops with nothing left to serve.
    void io_loop();

    // Serves one batch as the leader, then hands the connection over: to
    // the oldest waiting caller, or to the I/O thread when the oldest
    // queued request is asynchronous. Asynchronous requests whose deadline
    // passed in the queue are not sent; they complete with
    // kDeadlineExceeded.
    void lead();

    // A request's result, built outside the lock.
    struct Outcome {
      absl::Status status = not_served();
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
               std::vector<Outcome>& out);

    static bool writes(const Request& r);

    // `durable_writes`: appends WAIT <n> <ms> after the calls `idx` of
    // `batch` when one of them writes; <ms> ends before the earliest
    // deadline among those (at least 1: WAIT 0 would wait forever). True
    // when appended.
    bool append_wait(const std::vector<std::shared_ptr<Request>>& batch,
                     const std::vector<size_t>& idx);

    // `durable_writes`: reads the reply to the WAIT after the calls `idx`;
    // when fewer replicas than asked acknowledged, each of those calls that
    // wrote and succeeded fails kUnavailable instead. Not OK when the reply
    // did not come (the connection must go; the calls stand failed).
    absl::Status settle_wait(const std::vector<std::shared_ptr<Request>>& batch,
                             const std::vector<size_t>& idx,
                             std::vector<Outcome>& out);

    // Writes everything appended (blocking, bounded by the send timeout).
    absl::Status flush();

    // The next reply, reading the socket only when none is buffered, and
    // waiting for it no later than `deadline`: a reply that would come
    // later is kDeadlineExceeded.
    absl::Status read_reply(absl::Time deadline, redisReply** out);

    // The reply to `r`: after the reply to the ASKING sent before it, when
    // it follows an ASK redirect.
    absl::Status read_for(const Request& r, absl::Time deadline,
                          redisReply** out);

    // Keeps the socket's timeout within a small tolerance of `left` (one
    // system call only when it drifts: an uncontended call never pays it).
    // A zero timeval would mean "wait forever", so it is at least 100 us.
    void set_read_timeout(absl::Duration left);

    absl::Status late_error() const;

    void append(const Request& r, bool evalsha);

    // Takes the context the connector made ready, waiting for it until
    // `by` (the earliest deadline of the batch): kDeadlineExceeded if none
    // comes by then; kUnavailable at once, with its reason, while the
    // connector's attempts fail (a server that refuses or is gone), so an
    // outage costs a call no wait. Only the leader calls it.
    absl::Status await_context(absl::Time by);

    // Asks the connector for a new context, unless one is owed already.
    void want();

    absl::Status io_error() const;

    void drop();

    // Drops a failed context and asks the connector for its replacement at
    // once, in the background.
    void lose();

    // Integers go to `out.reply` (strings too, parsed as integers); strings
    // also go, verbatim, to `out.text`.
    static void flatten(const redisReply* reply, Outcome& out);

    void complete(Outcome& o, const redisReply* reply);

    // Redis Cluster: "MOVED <slot> <host>:<port>" or "ASK <slot>
    // <host>:<port>" recorded in `o` (its status the error, should the
    // redirect not be followed); false for any other error.
    static bool redirected(const redisReply* reply, Outcome& o);

    // An error to send the call again for, after a pause, recorded in `o`
    // (its status kUnavailable naming the reply, should no attempt be
    // left): "TRYAGAIN ..." (a multi-key call met a Cluster slot half
    // migrated) or "CLUSTERDOWN ..." (the cluster cannot serve the slot
    // now); under Sentinel also "READONLY ..." (the node was demoted to a
    // replica) or "LOADING ..." (a node restarting), sent then to the
    // primary the sentinels name (asked now). False for any other error.
    bool retry_later(const redisReply* reply, Outcome& o);

    void fail(Outcome& o, const absl::Status& s);

    // Counts one `field` event for the coordinator and for this node.
    void count(std::atomic<int64_t> detail::BackendCounters::*field) const;

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
    // Touched only by the current leader (handed over under `mu_`); the
    // pool builds `ctx_`'s replies and outlives it.
    ReplyPool replies_;
    redisContext* ctx_ = nullptr;
    absl::Duration timeout_set_;  // the socket's timeout now
    std::string cmd_scratch_;     // `append`'s and `append_wait`'s
    int64_t wait_ms_ = 0;
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
  Node* node_at(std::string_view address);
  // A node to ask when the map has no answer: the first seed.
  Node* first_node();

  // The node `r` goes to: the one server; with Sentinel, the primary last
  // learned (null: none yet); in a cluster, the ASK target it was sent to,
  // else the owner of its key's slot (a command without a key and a slot
  // the map does not know yet go to the first seed, whose MOVED then names
  // the owner).
  Node* route(const Request& r);

  static Connection& pick(Node& n);

  // Readies `r`, answered with a redirect, to be sent again: MOVED points
  // its slot at the new node (and refreshes the whole map in the
  // background), ASK sends it once to the node named, with ASKING. The
  // first two redirects of a call are followed at once; later ones after
  // `*pause` (2 ms, doubling), which lets a migration's last steps land
  // (a slot handed over to one node before the other knows). False (r's
  // status stands) past `max_redirects` or when the pause would end past
  // its deadline.
  bool prepare_redirect(Request& r, absl::Duration* pause);

  // Clears what serving `r` wrote, so that it can be queued again.
  static void reset_for_resend(Request& r);

  // Asks the refresher for a new slot map (at most one per
  // `kRefreshInterval`; requests meanwhile are merged).
  void request_refresh();

  static constexpr absl::Duration kRefreshInterval = absl::Milliseconds(100);

  // Readies `r`, answered TRYAGAIN or CLUSTERDOWN, to be sent again: the
  // pause before it (2 ms, doubling, at most 64 ms), or a negative duration
  // (r's status stands) when the pause would end past its deadline.
  absl::Duration prepare_retry(Request& r);

  // An asynchronous request answered TRYAGAIN or CLUSTERDOWN: the cluster
  // thread sends it again after its pause, or it completes with that
  // answer when no pause fits its deadline.
  void retry_later(std::shared_ptr<Request> r);

  // Hands `r` to the cluster thread, to be sent after `pause`.
  void delay(std::shared_ptr<Request> r, absl::Duration pause);

  // The topology thread: reads the slot map (cluster) or asks the sentinels
  // for the primary (Sentinel) when asked, no more often than
  // `kRefreshInterval`, and sends again, when due, the calls waiting out a
  // TRYAGAIN, CLUSTERDOWN, READONLY or LOADING; when the coordinator stops,
  // the calls still waiting complete with that answer.
  void topology_loop();

  // Sentinel: the first discovery (bounded by each sentinel's timeouts),
  // then the topology thread and the +switch-master watcher.
  void start_sentinel();

  // Sentinel: the status of a call made while no primary is known.
  absl::Status no_primary();

  // Sentinel: asks the sentinels in turn (the one that answered last
  // first) for the primary and confirms it with ROLE; points later calls at
  // it. When none confirms one, the primary stays as it was (its failures
  // ask again) and the last error is kept for `no_primary`.
  void discover_primary();

  // Sentinel: later calls go to the primary at `address`.
  void set_primary(const std::string& address);

  // Sentinel: waits, up to `pause`, for the destructor's wake-up. True when
  // it came (the watcher must stop).
  bool wait_for_stop(absl::Duration pause);

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
  void watch_sentinels();

  // Sentinel: reads what a subscription has received and acts on each
  // event; false when the connection broke.
  bool read_events(SideConnection& c);

  // Sentinel: a published event. "+switch-master": "<name> <old ip> <old
  // port> <new ip> <new port>"; "+failover-state-wait-promotion": "slave
  // <ip:port> <ip> <port> @ <name> <primary ip> <primary port>". Others,
  // and events for other names, are ignored.
  void on_sentinel_message(const redisReply* m);

  // Sentinel: asks the replica at `address`, told to become the primary,
  // for its ROLE every 2 ms (for at most 10 s) and moves later calls to it
  // once it says it is the primary. For 5 s after, or until the sentinels'
  // +switch-master, a discovery that still names the old primary (the
  // sentinels announce the new one later) does not move calls back.
  void await_promotion(const std::string& address);

  // Reads CLUSTER SLOTS from the first node that answers (the known nodes
  // in order) and points every slot at its primary.
  void refresh_map();

  // Asks the connector to open a context for `c`, now (it stays asked
  // until one is open, retried with a backoff).
  void want_context(Connection* c);

  // The connector: opens the contexts connections ask for, one at a time,
  // off every call's path, each attempt bounded by `connect_timeout`; a
  // failed one is retried after a backoff (5 ms, doubling, at most 500 ms)
  // while its connection is told why, so calls fail at once meanwhile.
  void connector_loop();

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

}  // namespace throttlekit

#endif  // THROTTLEKIT_SRC_REDIS_COORDINATOR_IMPL_H_
