#!/usr/bin/env python3
"""The Envoy door from another language: a Python grpcio client.

Generates Python stubs from our proto/envoy files at test time (protoc and
grpc_python_plugin, the ones the C++ build uses), starts throttlekit-server
with server.yaml beside this file, sends every request of script.txt in
order and checks each answer is exactly the one written there: the same
script and answers the C++ test (tests/server/envoy_rls_test.cc) holds the
server to. Usage and exit codes: ../script_support.py.
"""

import os
import sys
import time

# The shared helpers, one directory up; no bytecode left in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from script_support import (Server, beside, client_main,  # noqa: E402
                            fail, read_entries)

PROTOS = [
    "envoy/service/ratelimit/v3/rls.proto",
    "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
    "envoy/type/v3/ratelimit_unit.proto",
    "envoy/config/core/v3/base.proto",
]
UNIT_SECONDS = {1: 1, 2: 60, 3: 3600, 4: 86400, 5: 30 * 86400,
                6: 365 * 86400, 7: 7 * 86400}


def read_script(rls_pb2, text_format):
    """[(line number, request, expected response or status name)]."""
    steps = []
    pending = None
    for number, tag, body in read_entries(beside(__file__, "script.txt")):
        if tag == "request":
            pending = (number, text_format.Parse(
                body, rls_pb2.RateLimitRequest()))
        elif tag == "expect":
            steps.append(pending + (text_format.Parse(
                body, rls_pb2.RateLimitResponse()),))
            pending = None
        elif tag == "expect_error":
            steps.append(pending + (body,))
            pending = None
        else:
            fail(f"script.txt:{number}: unknown line {tag!r}", 2)
    return steps


def run_once(binary, grpc, rls_pb2, rls_pb2_grpc, steps):
    """Returns (mismatches, whether an hour or day boundary was crossed)."""
    began = time.time()
    mismatches = []
    with Server(binary, beside(__file__, "server.yaml")) as server:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = rls_pb2_grpc.RateLimitServiceStub(channel)
        for number, request, expected in steps:
            try:
                got = stub.ShouldRateLimit(request, timeout=10)
            except grpc.RpcError as e:
                got_code = e.code().name
                if got_code != expected:
                    mismatches.append(
                        f"script.txt:{number}: expected {expected}, got "
                        f"{got_code}: {e.details()}")
                continue
            if isinstance(expected, str):
                mismatches.append(f"script.txt:{number}: expected {expected}, "
                                  f"got an answer: {got}")
                continue
            for i, status in enumerate(got.statuses):
                if status.HasField("current_limit"):
                    d = status.duration_until_reset
                    total = d.seconds + d.nanos / 1e9
                    unit = UNIT_SECONDS[status.current_limit.unit]
                    if not status.HasField("duration_until_reset") or \
                            not 0 < total <= unit:
                        mismatches.append(
                            f"script.txt:{number}: statuses[{i}]: "
                            f"duration_until_reset {total} s not in (0, "
                            f"{unit}]")
                status.ClearField("duration_until_reset")
            if got != expected:
                mismatches.append(f"script.txt:{number}: expected\n{expected}"
                                  f"got\n{got}")
        channel.close()
    mismatches += server.problems
    ended = time.time()
    crossed = int(began // 3600) != int(ended // 3600)
    return mismatches, crossed


def run(binary, grpc, text_format):
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
    steps = read_script(rls_pb2, text_format)
    if not steps:
        fail("script.txt holds no steps", 2)
    mismatches, crossed = run_once(binary, grpc, rls_pb2, rls_pb2_grpc, steps)
    if crossed:
        # The hourly windows rolled over mid-script: once more, afresh.
        mismatches, crossed = run_once(binary, grpc, rls_pb2, rls_pb2_grpc,
                                       steps)
    return mismatches, f"{len(steps)} requests, every answer as written"


if __name__ == "__main__":
    client_main(PROTOS, run)
