// src/redis/reply_pool.h (internal)
//
// Provides `ReplyPool`: the reply objects of one connection's hiredis
// reader, reused. hiredis's own reader allocates an object per element of
// every reply (a decision's array of five integers is seven allocations
// and seven frees, measured as half the client's allocations:
// docs/async.md, "Benchmark"); a pool keeps the objects, their strings and
// their element arrays, so a connection past its first replies allocates
// none. The objects are hiredis's `redisReply`, so every reader of a reply
// is unchanged; only freeing differs: `release`, not `freeReplyObject`.
//
//     ReplyPool pool;
//     pool.adopt(ctx);        // ctx's reader now builds from the pool
//     redisReply* r = ...;    // redisGetReply / redisReaderGetReply
//     ReplyPool::release(r);  // back to the pool, with its elements
//
// Thread-safety: none. A pool serves one context, whose owner (the
// connection's leader) is its only user; the pool must outlive the context
// (redisFree releases a reply in progress through it).

#ifndef THROTTLEKIT_SRC_REDIS_REPLY_POOL_H_
#define THROTTLEKIT_SRC_REDIS_REPLY_POOL_H_

#include <hiredis/hiredis.h>

#include <cstddef>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace throttlekit::redis_internal {

class ReplyPool {
 public:
  ReplyPool() = default;
  ReplyPool(const ReplyPool&) = delete;
  ReplyPool& operator=(const ReplyPool&) = delete;
  ~ReplyPool() {
    while (free_ != nullptr) delete std::exchange(free_, free_->next);
  }

  // Makes `ctx`'s reader (or `reader`) build its replies from this pool.
  void adopt(redisContext* ctx) { adopt(ctx->reader); }
  void adopt(redisReader* reader) {
    reader->fn = &kFunctions;
    reader->privdata = this;
  }

  // Returns a reply built from a pool, and its elements, to that pool.
  // Null is a no-op.
  static void release(void* reply) {
    if (reply == nullptr) return;
    Slot* s = static_cast<Slot*>(reply);
    if (s->reply.type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < s->reply.elements; ++i) {
        release(s->reply.element[i]);
      }
    }
    ReplyPool* pool = s->pool;
    if (pool->free_count_ >= kMaxFree) {
      delete s;
      return;
    }
    s->next = pool->free_;
    pool->free_ = s;
    ++pool->free_count_;
  }

 private:
  // One object: the reply first, so a `redisReply*` is its `Slot*`.
  struct Slot {
    redisReply reply;
    ReplyPool* pool = nullptr;
    std::string text;                  // `reply.str`'s storage
    std::vector<redisReply*> element;  // `reply.element`'s storage
    Slot* next = nullptr;              // in the free list
  };
  static_assert(offsetof(Slot, reply) == 0);

  // Objects kept for reuse at most (a pipelined batch's replies, and
  // more): beyond it they are freed.
  static constexpr size_t kMaxFree = 8192;

  // A cleared object of `type` from `task`'s pool; null when memory runs
  // out (hiredis then reports the error).
  static Slot* take(const redisReadTask* task, int type) noexcept {
    ReplyPool* pool = static_cast<ReplyPool*>(task->privdata);
    Slot* s = pool->free_;
    if (s != nullptr) {
      pool->free_ = s->next;
      --pool->free_count_;
    } else {
      s = new (std::nothrow) Slot;
      if (s == nullptr) return nullptr;
      s->pool = pool;
    }
    s->reply = redisReply{};
    s->reply.type = type;
    s->next = nullptr;
    return s;
  }
  // `s`, built, goes into its parent array (only then: an object released
  // on a failure must not be released again with its parent).
  static void* link(const redisReadTask* task, Slot* s) noexcept {
    if (task->parent != nullptr) {
      redisReply* parent = static_cast<redisReply*>(task->parent->obj);
      parent->element[task->idx] = &s->reply;
    }
    return s;
  }

  static void* create_string(const redisReadTask* task, char* str,
                             size_t len) noexcept {
    Slot* s = take(task, task->type);
    if (s == nullptr) return nullptr;
    try {
      s->text.assign(str, len);
    } catch (...) {
      release(s);
      return nullptr;
    }
    s->reply.str = s->text.data();  // NUL-terminated, as hiredis's
    s->reply.len = len;
    return link(task, s);
  }
  static void* create_array(const redisReadTask* task, int elements) noexcept {
    Slot* s = take(task, REDIS_REPLY_ARRAY);
    if (s == nullptr) return nullptr;
    if (elements > 0) {
      try {
        s->element.assign(static_cast<size_t>(elements), nullptr);
      } catch (...) {
        release(s);
        return nullptr;
      }
      s->reply.element = s->element.data();
    }
    s->reply.elements = elements > 0 ? static_cast<size_t>(elements) : 0;
    return link(task, s);
  }
  static void* create_integer(const redisReadTask* task,
                              long long value) noexcept {
    Slot* s = take(task, REDIS_REPLY_INTEGER);
    if (s == nullptr) return nullptr;
    s->reply.integer = value;
    return link(task, s);
  }
  static void* create_nil(const redisReadTask* task) noexcept {
    Slot* s = take(task, REDIS_REPLY_NIL);
    return s == nullptr ? nullptr : link(task, s);
  }

  static inline redisReplyObjectFunctions kFunctions = {
      create_string, create_array, create_integer, create_nil, release};

  Slot* free_ = nullptr;
  size_t free_count_ = 0;
};

}  // namespace throttlekit::redis_internal

#endif  // THROTTLEKIT_SRC_REDIS_REPLY_POOL_H_
