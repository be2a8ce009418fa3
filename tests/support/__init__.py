"""Helpers shared by the test suites: real servers (HMS) and Apache Thrift reference clients."""
