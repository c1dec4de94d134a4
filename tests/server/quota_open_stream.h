// tests/server/quota_open_stream.h
//
// Provides `open_stream(door, writer)`: a stream of the quota door
// (src/server/quota_door.h) written through `writer`, a test's
// QuotaStreamWriter with a `stream` member it completes its writes on,
// started as the gRPC reactor starts one.

#ifndef THROTTLEKIT_TESTS_SERVER_QUOTA_OPEN_STREAM_H_
#define THROTTLEKIT_TESTS_SERVER_QUOTA_OPEN_STREAM_H_

#include <memory>

#include "quota_door.h"

namespace throttlekit::testing {

template <class Writer>
std::shared_ptr<server::QuotaStream> open_stream(server::QuotaDoor& door,
                                                 Writer& writer) {
  std::shared_ptr<server::QuotaStream> s = door.open(&writer);
  writer.stream = s.get();
  s->start();
  return s;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SERVER_QUOTA_OPEN_STREAM_H_
