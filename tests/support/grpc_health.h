// tests/support/grpc_health.h
//
// Provides `grpc_health_status(port)`: the status the standard gRPC health
// service (grpc.health.v1.Health/Check, service "") of the server on
// loopback `port` answers, read without generated stubs: 1 SERVING, 2
// NOT_SERVING (the reply's field 1), -1 when the call or the reply fails.

#ifndef THROTTLEKIT_TESTS_SUPPORT_GRPC_HEALTH_H_
#define THROTTLEKIT_TESTS_SUPPORT_GRPC_HEALTH_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <string>
#include <vector>

namespace throttlekit::testing {

inline int grpc_health_status(int port) {
  grpc::GenericStub generic(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                    &request, &response,
                    [&](grpc::Status s) { done.set_value(std::move(s)); });
  if (!done.get_future().get().ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  // An enum field 1 of a small value: the tag 0x08, then the value.
  if (bytes.size() != 2 || bytes[0] != 0x08) return -1;
  return bytes[1];
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_GRPC_HEALTH_H_
