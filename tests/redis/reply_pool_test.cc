// The pool of a connection's reply objects (src/redis/reply_pool.h), on
// hiredis's reader alone (no server): replies of every kind come out as
// hiredis builds them, released objects are taken again (a reply of the
// same shape allocates no new one), and a reply the reader abandons (a
// protocol error halfway, a reader freed mid-reply) is released once
// (the sanitizer builds see any leak or double free).

#include "reply_pool.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <set>
#include <string>
#include <string_view>

namespace throttlekit::redis_internal {
namespace {

// Feeds `bytes` to `r` and takes one reply (null if incomplete).
redisReply* feed(redisReader* r, std::string_view bytes) {
  EXPECT_EQ(redisReaderFeed(r, bytes.data(), bytes.size()), REDIS_OK);
  void* reply = nullptr;
  EXPECT_EQ(redisReaderGetReply(r, &reply), REDIS_OK) << r->errstr;
  return static_cast<redisReply*>(reply);
}

// Every object of `reply`, itself included.
void objects(const redisReply* reply, std::set<const void*>& out) {
  out.insert(reply);
  if (reply->type != REDIS_REPLY_ARRAY) return;
  for (size_t i = 0; i < reply->elements; ++i) objects(reply->element[i], out);
}

TEST(ReplyPool, BuildsEveryKindOfReplyAsHiredisDoes) {
  ReplyPool pool;
  redisReader* r = redisReaderCreate();
  pool.adopt(r);
  redisReply* reply =
      feed(r, "*4\r\n:42\r\n$3\r\nabc\r\n*2\r\n+OK\r\n$-1\r\n-ERR boom\r\n");
  ASSERT_NE(reply, nullptr);
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(reply->elements, 4u);
  EXPECT_EQ(reply->element[0]->type, REDIS_REPLY_INTEGER);
  EXPECT_EQ(reply->element[0]->integer, 42);
  EXPECT_EQ(reply->element[1]->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(reply->element[1]->str, reply->element[1]->len), "abc");
  EXPECT_EQ(reply->element[1]->str[3], '\0');  // NUL-terminated, as hiredis's
  const redisReply* inner = reply->element[2];
  ASSERT_EQ(inner->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(inner->elements, 2u);
  EXPECT_EQ(inner->element[0]->type, REDIS_REPLY_STATUS);
  EXPECT_STREQ(inner->element[0]->str, "OK");
  EXPECT_EQ(inner->element[1]->type, REDIS_REPLY_NIL);
  EXPECT_EQ(reply->element[3]->type, REDIS_REPLY_ERROR);
  EXPECT_STREQ(reply->element[3]->str, "ERR boom");
  ReplyPool::release(reply);
  // An empty array and a nil array.
  reply = feed(r, "*0\r\n");
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(reply->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(reply->elements, 0u);
  ReplyPool::release(reply);
  reply = feed(r, "*-1\r\n");
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(reply->type, REDIS_REPLY_NIL);
  ReplyPool::release(reply);
  redisReaderFree(r);
}

TEST(ReplyPool, ReleasedObjectsAreTakenAgain) {
  ReplyPool pool;
  redisReader* r = redisReaderCreate();
  pool.adopt(r);
  const std::string decision = "*5\r\n:1\r\n:7\r\n:0\r\n:1000\r\n:0\r\n";
  redisReply* first = feed(r, decision);
  ASSERT_NE(first, nullptr);
  std::set<const void*> before;
  objects(first, before);
  EXPECT_EQ(before.size(), 6u);
  ReplyPool::release(first);
  redisReply* second = feed(r, decision);
  ASSERT_NE(second, nullptr);
  std::set<const void*> after;
  objects(second, after);
  EXPECT_EQ(after, before) << "the same six objects, none allocated";
  EXPECT_EQ(second->element[1]->integer, 7);
  ReplyPool::release(second);
  redisReaderFree(r);
}

TEST(ReplyPool, AReplyTheReaderAbandonsIsReleasedOnce) {
  ReplyPool pool;
  {
    // A reader freed halfway through an array.
    redisReader* r = redisReaderCreate();
    pool.adopt(r);
    EXPECT_EQ(feed(r, "*3\r\n:1\r\n$2\r\nab\r\n"), nullptr);
    redisReaderFree(r);
  }
  {
    // A protocol error halfway: the reader releases what it built.
    redisReader* r = redisReaderCreate();
    pool.adopt(r);
    const std::string_view bad = "*2\r\n:1\r\n:x\r\n";
    EXPECT_EQ(redisReaderFeed(r, bad.data(), bad.size()), REDIS_OK);
    void* reply = nullptr;
    EXPECT_EQ(redisReaderGetReply(r, &reply), REDIS_ERR);
    EXPECT_EQ(reply, nullptr);
    redisReaderFree(r);
  }
}

}  // namespace
}  // namespace throttlekit::redis_internal
