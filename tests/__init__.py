"""The repo's tests (CONTRIBUTING.md's layout table says what each folder holds)."""

import os

# gRPC's fork handlers (built into grpcio, run by libc at every fork once gRPC is
# initialised) wait for gRPC's own threads to go quiet; with a grpc.aio channel of an
# etcd test still open in the same worker they never did, and a later fork (initdb
# for the shared PostgreSQL) hung the worker for ever. Our children exec at once and
# never use the parent's gRPC, so its fork support is off for the test run: set here,
# before any test module imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
